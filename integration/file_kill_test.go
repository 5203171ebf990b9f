package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The file sink's kill tests (issue 37): serve-source, serve-sink (file:)
// and run as three processes, a random one kill -9ed and restarted, then
// pyarrow.dataset reads the part files as any reader would and must find
// every record exactly once. Two sources: the generator, which has no
// committed position of its own (the sink's commit records are the only
// resume point), and Kafka on the split kill test's live topic with
// committed and aborted transactions. make test runs a few kills of each;
// FLIGHTLINE_CHAOS=1 runs 100 per source (and the generator in every
// format).

// fileKills is the number of kills per run: a few in make test, 100
// under FLIGHTLINE_CHAOS=1.
func fileKills() int {
	if chaosMode() {
		return 100
	}
	return 4
}

// fileKillLayout is the partitioning of each format's generator kill
// test: Parquet by a column (nine part files per batch, committed by one
// record), JSON lines by day, CSV none.
var fileKillLayout = map[string]string{"parquet": "&partition_by=quantity", "jsonl": "&partition_by_day=ts", "csv": ""}

// TestIntegrationFileKill9Generator: the generator source, whose stream is
// deterministic but which keeps no position; the file sink's checkpoint is
// the resume point.
func TestIntegrationFileKill9Generator(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	py := Need(t, "FLIGHTLINE_PYTHON", "python with pyarrow")
	formats := []string{"parquet"}
	if chaosMode() {
		formats = append(formats, "jsonl", "csv")
	}
	seed := killSeed(t)
	for _, format := range formats {
		t.Run(format, func(t *testing.T) {
			t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays it)", seed, seed)
			kills := fileKills()
			rows := int64(kills) * 6000
			bin := flightlineBin(t)
			dir := t.TempDir()
			srcAddr, sinkAddr := freePort(t), freePort(t)
			argv := map[string][]string{
				"source": {"serve-source", "--listen", srcAddr, "--source", fmt.Sprintf("generator:?rows=%d&batch_rows=500&interval=5ms", rows)},
				"sink":   {"serve-sink", "--listen", sinkAddr, "--sink", "file:" + dir + "?format=" + format + fileKillLayout[format]},
				"run": {"run", "--source", "grpc://" + srcAddr, "--sink", "grpc://" + sinkAddr,
					"--stream", "orders", "--pipeline", "gen", "--target", "orders"},
			}
			procs := map[string]*proc{}
			for _, name := range killRoles {
				procs[name] = start(t, bin, argv[name]...)
			}
			rng := rand.New(rand.NewPCG(seed, 37))
			killed := 0
			for killed < kills {
				time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
				if done, err := procs["run"].exited(); done {
					require.NoErrorf(t, err, "coordinator failed:\n%s", procs["run"].log.String())
					break
				}
				victim := killRoles[rng.IntN(len(killRoles))]
				procs[victim].kill()
				killed++
				procs[victim] = start(t, bin, argv[victim]...)
			}
			t.Logf("killed a process %d times", killed)
			require.GreaterOrEqual(t, killed, kills*3/4, "the pipeline ended too soon for its kills; give it more rows")
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			select {
			case err := <-procs["run"].doneOnce():
				require.NoError(t, err, procs["run"].log.String())
			case <-ctx.Done():
				t.Fatalf("pipeline did not finish:\n%s", procs["run"].log.String())
			}
			pyFormat := map[string]string{"parquet": "parquet", "jsonl": "json", "csv": "csv"}[format]
			out, err := exec.Command(py, "python/verify_ids.py", filepath.Join(dir, "orders"), fmt.Sprint(rows), pyFormat).CombinedOutput()
			require.NoErrorf(t, err, "independent check (every id exactly once) failed: %s", out)
			t.Logf("pyarrow.dataset (%s): %s; %d records checked after %d kills", pyFormat, strings.TrimSpace(string(out)), rows, killed)
		})
	}
}

// TestIntegrationFileKill9Kafka: the split kill test's harness (a Kafka
// source without instance_id on a live topic with aborted transactions)
// with the file sink, read back with pyarrow.dataset.
func TestIntegrationFileKill9Kafka(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	s := killSink{name: "file", format: "raw", dest: func(t *testing.T, _ context.Context, _ string) killDest {
		Need(t, "FLIGHTLINE_PYTHON", "python with pyarrow")
		dir := t.TempDir()
		return killDest{spec: "file:" + dir, target: "out", read: pythonKeys(t, "parquet", filepath.Join(dir, "out"), nil)}
	}}
	seed := killSeed(t)
	t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays it)", seed, seed)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r := newKillRun(t, ctx, s, seed, killSession.String(), false)
	rep := r.chaos(ctx, rand.New(rand.NewPCG(seed, 1)), fileKills())
	t.Cleanup(func() { appendChaosReport(t, rep.rows(s.name, r.res)) })
	res := r.finish(ctx, 4*time.Minute)
	t.Logf("file sink, Kafka source: %d records checked after %d kills", res.checked, fileKills())
	if rep.worst > killRecoveryBound {
		t.Errorf("the pipeline took %v to commit again after a restart (%s), over the bound of %v",
			rep.worst.Round(100*time.Millisecond), rep.worstAt, killRecoveryBound)
	}
}
