package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/testkit/chtest"
)

// TestIntegrationClickHouseKill9: serve-source (the generator), serve-sink
// (clickhouse://, against a chdb front of the test's own) and run as three
// processes, a random one kill -9ed and restarted (the sink preferably
// while it has a batch between its intent and commit rows: the window
// where its insert may have landed without its checkpoint); then the front is
// stopped and chdb itself opens its data directory and must find every id
// exactly once (integration/python/verify_chdb_ids.py). The generator
// re-forms a batch from a checkpoint identically, which is the condition
// under which the sink's deduplication tokens make a replay a no-op (see
// docs/sinks/clickhouse.md). A few kills in make test, 100 under
// FLIGHTLINE_CHAOS=1.
func TestIntegrationClickHouseKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	py := Need(t, "FLIGHTLINE_CLICKHOUSE_PYTHON", "python with chdb")
	seed := killSeed(t)
	t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays it)", seed, seed)
	kills := killCount(4, 100)
	rows := int64(kills) * 4000
	front := startChdbFront(t, py)

	bin := flightlineBin(t)
	began := time.Now()
	t.Setenv("FL_KILL_CH_PASSWORD", "kill-secret")
	srcAddr, sinkAddr := freePort(t), freePort(t)
	argv := map[string][]string{
		"source": {"serve-source", "--listen", srcAddr, "--source", fmt.Sprintf("generator:?rows=%d&batch_rows=500&interval=5ms", rows)},
		"sink": {"serve-sink", "--listen", sinkAddr, "--sink",
			"clickhouse://killer@" + front.addr + "/default?password_env=FL_KILL_CH_PASSWORD&order_by=id&dedup_window=100"},
		"run": {"run", "--source", "grpc://" + srcAddr, "--sink", "grpc://" + sinkAddr,
			"--stream", "orders", "--pipeline", "gen", "--target", "orders"},
	}
	sinkLog := &syncBuffer{} // every run of serve-sink, for the count of replays below
	launch := func(name string) *proc {
		if name == "sink" {
			return startLogged(t, bin, sinkLog, argv[name]...)
		}
		return start(t, bin, argv[name]...)
	}
	procs := map[string]*proc{}
	for _, name := range killRoles {
		procs[name] = launch(name)
	}
	rng := rand.New(rand.NewPCG(seed, 38))
	ch := chtest.Front{URL: "http://" + front.addr, User: "killer", Password: "kill-secret"}
	killed, sinkKills, inFlight := 0, 0, 0
	for killed < kills {
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		if done, err := procs["run"].exited(); done {
			require.NoErrorf(t, err, "coordinator failed:\n%s", procs["run"].log.String())
			break
		}
		victim := killRoles[rng.IntN(len(killRoles))]
		if victim == "sink" {
			// Aim at the window the design is about: wait (a moment at
			// most) until the sink has a batch between its intent row and
			// its commit row, then kill it there.
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && !pending(t, ch); {
			}
		}
		procs[victim].kill()
		killed++
		if victim == "sink" {
			sinkKills++
			// Requests the killed sink had already sent still run at the
			// front (they are queued behind its lock): let them land first.
			time.Sleep(300 * time.Millisecond)
			// Did the kill leave a batch between its intent row and its
			// commit row (its insert maybe landed)? The replay must then
			// be deduplicated by its token.
			if pending(t, ch) {
				inFlight++
			}
		}
		procs[victim] = launch(victim)
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
	procs["sink"].kill()
	front.stop(t)
	out, err := exec.Command(py, "python/verify_chdb_ids.py", front.data, "default.orders", fmt.Sprint(rows)).CombinedOutput()
	require.NoErrorf(t, err, "independent check with chdb (every id exactly once) failed: %s\nsink log:\n%s", out, tail(sinkLog.String(), 4000))
	t.Logf("chdb: %s; %d records checked after %d kills; pipeline and check took %v", strings.TrimSpace(string(out)), rows, killed, time.Since(began).Round(time.Second))
	// How often a restarted writer found a batch in flight and re-sent it
	// with its token (deduplicated where it had landed), and how often the
	// replay was cut otherwise (which the check above would catch).
	t.Logf("serve-sink killed %d times, with a batch in flight (intent row written, commit row not) %d times", sinkKills, inFlight)
	// A kill aimed at the window may still miss it (the commit row's
	// request was already queued at the front): with make test's 4 kills
	// no sink kill in the window happens often enough to fail make test
	// (it did), so the short run only reports it and the deterministic
	// TestIntegrationCrashAfterInsertReplayDeduplicated (flightsink/
	// clickhouse) covers the replay there; the 100-kill run (about 40 of
	// them the sink's, 22 in the window when measured) must reach it.
	if chaosMode() && sinkKills >= 10 {
		require.Positive(t, inFlight, "no kill of the sink landed between an intent row and its commit row: the replay path was not exercised")
	}
	t.Logf("pending batches replayed with their token: %d; not re-formed identically: %d",
		strings.Count(sinkLog.String(), "replaying the batch a previous writer left pending"),
		strings.Count(sinkLog.String(), "was not re-formed identically"))
}

// pending says whether the pipeline's checkpoint row has a batch pending
// (intent row written, commit row not).
func pending(t *testing.T, ch chtest.Front) bool {
	out, err := ch.Exec("SELECT count() FROM default.flightline_checkpoints FINAL WHERE pending != ''")
	if err != nil && strings.Contains(err.Error(), "UNKNOWN_TABLE") {
		return false // the sink has not opened the pipeline yet
	}
	require.NoError(t, err, "reading the checkpoint table")
	return strings.TrimSpace(out) != "0"
}

// chdbFront is a chdb HTTP front (integration/services/chdb_server.py)
// of one test, on its own data directory.
type chdbFront struct {
	addr, data string
	cmd        *exec.Cmd
	done       chan struct{}
}

func startChdbFront(t *testing.T, py string) *chdbFront {
	t.Helper()
	dir := t.TempDir()
	addr := freePort(t)
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(py, "services/chdb_server.py", "-p", port, "--host", host, "--path", dir,
		"--user", "killer", "--password", "kill-secret")
	log, err := os.Create(filepath.Join(dir, "front.log"))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	f := &chdbFront{addr: addr, data: filepath.Join(dir, "data"), cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(f.done) }()
	t.Cleanup(func() { f.stop(t) })
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return f
		}
		select {
		case <-f.done:
			b, _ := os.ReadFile(filepath.Join(dir, "front.log"))
			t.Fatalf("chdb front exited: %s", b)
		default:
		}
		require.True(t, time.Now().Before(deadline), "chdb front did not start")
		time.Sleep(100 * time.Millisecond)
	}
}

// stop ends the front and waits, so chdb can open its data directory.
func (f *chdbFront) stop(t *testing.T) {
	select {
	case <-f.done:
		return
	default:
	}
	_ = f.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-f.done:
	case <-time.After(20 * time.Second):
		_ = f.cmd.Process.Kill()
		<-f.done
	}
}
