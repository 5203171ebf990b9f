package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/objsinktest"
	"github.com/flightline/flightline/internal/testkit/s3test"
)

// The object-store sinks' kill tests (issue 37): serve-source, serve-sink
// (file:, gcs:, azblob:, s3: or sftp://) and run as three processes, a
// random one kill -9ed and restarted, then a reader independent of
// Flightline fetches what any dataset reader would see (the store's own
// client: google-cloud-storage, azure-storage-blob, pyarrow's S3FileSystem
// (the AWS C++ SDK) on versitygw, OpenSSH's sftp command; the local
// directory for file:) and pyarrow.dataset must find every record
// exactly once. Two sources: the generator, which has no committed
// position of its own (the sink's commit records are the only resume
// point), and Kafka on the split kill test's live topic with committed
// and aborted transactions. One table (objStores) drives both tests.
//
// make test runs the generator with every store (a few kills each) and
// Kafka with file: only; FLIGHTLINE_CHAOS=1 runs 100 kills for every store
// and both sources (the generator on file: in every format).
// FLIGHTLINE_CHAOS_KILLS=N sets the chaos variant's kills.

// objStore is one exactly-once object store of the kill tests.
type objStore struct {
	name string
	// dest makes a fresh destination on the store for a test.
	dest func(t *testing.T) objDest
}

// objDest is one fresh destination of an object store.
type objDest struct {
	// spec is serve-sink's --sink without the format; it has a query
	// (format and layout keys are appended with &).
	spec string
	// fetch copies the published part files of target to a local
	// directory with a client independent of Flightline and returns it.
	fetch func(ctx context.Context, t *testing.T, target string) string
}

// objStores are the object stores of the kill tests.
var objStores = []objStore{
	{name: "file", dest: func(t *testing.T) objDest {
		dir := t.TempDir()
		return objDest{spec: "file:" + dir + "?", fetch: func(_ context.Context, _ *testing.T, target string) string {
			return filepath.Join(dir, target)
		}}
	}},
	{name: "gcs", dest: func(t *testing.T) objDest {
		endpoint := objsinktest.GCSEndpoint(t)
		bucket := objsinktest.NewBucket(t, endpoint)
		return objDest{spec: fmt.Sprintf("gcs:%s/lake?endpoint=%s", bucket, endpoint),
			fetch: pythonFetch("gcs", endpoint, bucket, "lake")}
	}},
	{name: "azblob", dest: func(t *testing.T) objDest {
		a := objsinktest.NeedAzurite(t)
		cont := a.NewContainer(t)
		t.Setenv("AZURE_STORAGE_KEY", a.Key) // serve-sink inherits it: no secret on its command line
		return objDest{spec: fmt.Sprintf("azblob:%s/lake?account=%s&endpoint=%s", cont, a.Account, a.Endpoint),
			fetch: pythonFetch("azblob", a.Endpoint, cont, "lake")}
	}},
	{name: "s3", dest: func(t *testing.T) objDest {
		opts := s3test.Options(t)                                 // versitygw, which honours If-None-Match: *
		t.Setenv("AWS_ACCESS_KEY_ID", opts[objstore.AccessKeyID]) // serve-sink inherits them: no secret on its command line
		t.Setenv("AWS_SECRET_ACCESS_KEY", opts[objstore.SecretAccessKey])
		prefix := fmt.Sprintf("storekill-%d", time.Now().UnixNano())
		return objDest{spec: fmt.Sprintf("s3:%s/%s?AWS_ENDPOINT_URL=%s&AWS_ALLOW_HTTP=true&AWS_REGION=us-east-1", s3test.Bucket, prefix, opts[objstore.EndpointURL]),
			fetch: pythonFetch("s3", opts[objstore.EndpointURL], s3test.Bucket, prefix)}
	}},
	{name: "sftp", dest: func(t *testing.T) objDest {
		s := objsinktest.NeedSSH(t)
		dir := t.TempDir()
		return objDest{spec: s.URL(dir), fetch: func(ctx context.Context, t *testing.T, target string) string {
			return sftpFetch(ctx, t, s, dir+"/"+target)
		}}
	}},
}

// pythonFetch fetches with integration/python/store_fetch.py (the store's
// own Python client) from the service at endpoint.
func pythonFetch(kind, endpoint, bucket, prefix string) func(context.Context, *testing.T, string) string {
	return func(ctx context.Context, t *testing.T, target string) string {
		py := Need(t, "FLIGHTLINE_PYTHON", "python with pyarrow, google-cloud-storage and azure-storage-blob")
		dest := t.TempDir()
		cmd := exec.CommandContext(ctx, py, "python/store_fetch.py", kind, bucket, prefix+"/"+target, dest)
		cmd.Env = append(os.Environ(), "FLIGHTLINE_GCS_ENDPOINT="+endpoint, "FLIGHTLINE_AZURITE_ENDPOINT="+endpoint, "FLIGHTLINE_S3_ENDPOINT="+endpoint)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "store_fetch.py %s: %s", kind, out)
		t.Logf("%s: fetched %s part files with the store's Python client", kind, strings.TrimSpace(string(out)))
		return dest
	}
}

// sftpFetch copies the directory remote from the sshd with OpenSSH's sftp
// command (get -R), host key checked, and returns the local copy.
func sftpFetch(ctx context.Context, t *testing.T, s objsinktest.SSH, remote string) string {
	host, port, _ := strings.Cut(s.Addr, ":")
	dest := filepath.Join(t.TempDir(), "fetched")
	batch := filepath.Join(t.TempDir(), "batch")
	require.NoError(t, os.WriteFile(batch, []byte(fmt.Sprintf("get -R %s %s\n", remote, dest)), 0o644))
	out, err := exec.CommandContext(ctx, "sftp", "-q", "-b", batch, "-i", s.Key, "-P", port,
		"-o", "UserKnownHostsFile="+s.KnownHosts, "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
		s.User+"@"+host).CombinedOutput()
	require.NoError(t, err, "sftp get -R %s: %s", remote, out)
	return dest
}

// storeKills is the kill count of a store kill test: short in make test,
// 100 under FLIGHTLINE_CHAOS=1 (FLIGHTLINE_CHAOS_KILLS overrides it).
func storeKills(t *testing.T, short int) int {
	if v := os.Getenv("FLIGHTLINE_CHAOS_KILLS"); v != "" && chaosMode() {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "FLIGHTLINE_CHAOS_KILLS")
		return n
	}
	return killCount(short, 100)
}

// storeKillLayout is the partitioning of each format's generator kill
// test: Parquet by a column (nine part files per batch, committed by one
// record) on file:, by day on the remote stores (fewer copies per commit),
// JSON lines by day, CSV none.
func storeKillLayout(store, format string) string {
	switch {
	case format == "parquet" && store == "file":
		return "&partition_by=quantity"
	case format == "csv":
		return ""
	}
	return "&partition_by_day=ts"
}

// TestIntegrationStoreKill9Generator: the generator source, whose stream is
// deterministic but which keeps no position; the sink's commit records are
// the resume point. 3 kills per store in make test.
func TestIntegrationStoreKill9Generator(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	py := Need(t, "FLIGHTLINE_PYTHON", "python with pyarrow")
	seed := killSeed(t)
	for _, st := range objStores {
		formats := []string{"parquet"}
		if chaosMode() && st.name == "file" {
			formats = append(formats, "jsonl", "csv")
		}
		for _, format := range formats {
			t.Run(st.name+"/"+format, func(t *testing.T) {
				t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays it)", seed, seed)
				dest := st.dest(t)
				kills := storeKills(t, 3)
				// Paced at 5,000 rows/s (500-row batches, 100 ms apart), so
				// the stream outlasts its kills however fast the sink: at
				// 5 ms apart a fast sftp run finished after one kill of three.
				rows := int64(kills) * 6000
				bin := flightlineBin(t)
				srcAddr, sinkAddr := freePort(t), freePort(t)
				argv := map[string][]string{
					"source": {"serve-source", "--listen", srcAddr, "--source", fmt.Sprintf("generator:?rows=%d&batch_rows=500&interval=100ms", rows)},
					"sink":   {"serve-sink", "--listen", sinkAddr, "--sink", dest.spec + "&format=" + format + storeKillLayout(st.name, format)},
					"run": {"run", "--source", "grpc://" + srcAddr, "--sink", "grpc://" + sinkAddr,
						"--stream", "orders", "--pipeline", "gen", "--target", "orders"},
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				killed := killTotal(killGeneratorRun(ctx, t, bin, argv, kills, seed, func() int64 { return committedRows(t, sinkAddr, "gen", "orders") }))
				dir := dest.fetch(ctx, t, "orders")
				pyFormat := map[string]string{"parquet": "parquet", "jsonl": "json", "csv": "csv"}[format]
				out, err := exec.Command(py, "python/verify_ids.py", dir, fmt.Sprint(rows), pyFormat).CombinedOutput()
				require.NoErrorf(t, err, "independent check (every id exactly once) failed: %s", out)
				t.Logf("%s, pyarrow.dataset (%s): %s; %d records checked after %d kills", st.name, pyFormat, strings.TrimSpace(string(out)), rows, killed)
				appendChaosReport(t, []faultRow{{sink: st.name, fault: "kill (generator source)", faults: killed, checked: int(rows), recovery: notMeasured}})
			})
		}
	}
}

// TestIntegrationStoreKill9Kafka: the split kill test's harness (a Kafka
// source without instance_id on a live topic with aborted transactions)
// with each object store, read back record by record with pyarrow.dataset
// over what the store's own client fetched. make test runs file: (4
// kills); the other stores run under FLIGHTLINE_CHAOS=1.
func TestIntegrationStoreKill9Kafka(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	seed := killSeed(t)
	for _, st := range objStores {
		t.Run(st.name, func(t *testing.T) {
			if st.name != "file" && !chaosMode() {
				t.Skip("the Kafka × object store matrix runs under FLIGHTLINE_CHAOS=1 (make chaos); make test runs file: only")
			}
			kills := storeKills(t, 4)
			s := killSink{name: st.name, format: "raw", dest: func(t *testing.T, _ context.Context, _ string) killDest {
				py := Need(t, "FLIGHTLINE_PYTHON", "python with pyarrow")
				d := st.dest(t)
				return killDest{spec: d.spec, target: "out", read: func(ctx context.Context) ([]string, error) {
					return readKeys(ctx, t, py, "parquet", d.fetch(ctx, t, "out"), "key", nil)
				}}
			}}
			t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays it)", seed, seed)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			r := newKillRun(t, ctx, s, seed, killSession.String(), false)
			rep := r.chaos(ctx, rand.New(rand.NewPCG(seed, 1)), kills)
			t.Cleanup(func() { appendChaosReport(t, rep.rows(s.name, r.res)) })
			res := r.finish(ctx, 4*time.Minute)
			t.Logf("%s sink, Kafka source: %d records checked after %d kills", st.name, res.checked, kills)
			if rep.worst > killRecoveryBound {
				t.Errorf("the pipeline took %v to commit again after a restart (%s), over the bound of %v",
					rep.worst.Round(100*time.Millisecond), rep.worstAt, killRecoveryBound)
			}
		})
	}
}

// killGeneratorRun starts the three processes of argv (killRoles: a
// bounded generator source, a sink, run), kill -9s and restarts one kills
// times (each role once in a random order first, so a short run hits every
// process, then at random), each 100–500 ms after progress (a measure of
// what the sink holds: committed rows, messages) has grown since the last
// kill, so every kill lands while data flows; waits for run to finish the
// stream, stops the others and returns the kills made per role.
func killGeneratorRun(ctx context.Context, t *testing.T, bin string, argv map[string][]string, kills int, seed uint64, progress func() int64) map[string]int {
	t.Helper()
	procs := map[string]*proc{}
	for _, name := range killRoles {
		procs[name] = start(t, bin, argv[name]...)
	}
	rng := rand.New(rand.NewPCG(seed, 37))
	order := rng.Perm(len(killRoles))
	killed := 0
	victims := map[string]int{}
	last := progress()
	for killed < kills {
		require.Eventually(t, func() bool {
			done, _ := procs["run"].exited()
			return done || progress() > last
		}, 2*time.Minute, 50*time.Millisecond, "no progress since the last kill:\nrun:\n%s\nsink:\n%s", procs["run"].log.String(), procs["sink"].log.String())
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		if done, err := procs["run"].exited(); done {
			require.NoErrorf(t, err, "coordinator failed:\n%s", procs["run"].log.String())
			break
		}
		last = progress()
		victim := killRoles[rng.IntN(len(killRoles))]
		if killed < len(order) {
			victim = killRoles[order[killed]]
		}
		procs[victim].kill()
		killed++
		victims[victim]++
		procs[victim] = start(t, bin, argv[victim]...)
	}
	t.Logf("killed a process %d times: %v", killed, victims)
	require.GreaterOrEqual(t, killed, kills*3/4, "the pipeline ended too soon for its kills; give it more rows")
	select {
	case err := <-procs["run"].doneOnce():
		require.NoError(t, err, "coordinator:\n%s\nsink:\n%s", procs["run"].log.String(), procs["sink"].log.String())
	case <-ctx.Done():
		t.Fatalf("pipeline did not finish:\n%s\nsink:\n%s", procs["run"].log.String(), procs["sink"].log.String())
	}
	for _, p := range procs {
		p.kill()
	}
	return victims
}

// killTotal is the number of kills in killGeneratorRun's answer.
func killTotal(victims map[string]int) int {
	n := 0
	for _, k := range victims {
		n += k
	}
	return n
}

// committedRows is the sum of the positions of pipeline's checkpoint at
// the sink at sinkAddr (the generator's: rows committed); 0 while the sink
// does not answer.
func committedRows(t *testing.T, sinkAddr, pipeline, target string) int64 {
	cl, err := flightsink.Dial("grpc://"+sinkAddr, flightsink.ClientConfig{})
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cp, err := cl.Checkpoint(ctx, flightsink.Pipeline{ID: pipeline, Target: target})
	if err != nil || cp == nil {
		return 0
	}
	p, err := checkpoint.Parse(cp)
	if err != nil {
		return 0
	}
	var n int64
	for _, v := range p {
		n += v
	}
	return n
}
