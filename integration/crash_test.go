package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the binary flightlineBin built (155 MB with -race),
// which every run of this package would otherwise leave in the temporary
// directory.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// flightlineBin builds cmd/flightline once per test binary.
func flightlineBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "flightline-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "flightline")
		out, err := exec.Command("go", "build", "-race", "-o", binPath, "../cmd/flightline").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// proc is a child process the test may kill -9.
type proc struct {
	cmd  *exec.Cmd
	done chan error
	log  *syncBuffer
}

// syncBuffer collects a child's output; String may be called while the
// child still writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func start(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	return startLogged(t, bin, &syncBuffer{}, args...)
}

// startLogged starts bin with its output appended to log, which may
// collect several runs.
func startLogged(t *testing.T, bin string, log *syncBuffer, args ...string) *proc {
	t.Helper()
	return startLoggedEnv(t, nil, bin, log, args...)
}

// startLoggedEnv is startLogged with env added to the process's
// environment (the test's own otherwise).
func startLoggedEnv(t *testing.T, env []string, bin string, log *syncBuffer, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = log
	cmd.Stderr = log
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, done: make(chan error, 1), log: log}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.doneOnce()
}

func (p *proc) doneOnce() <-chan error {
	ch := make(chan error, 1)
	go func() {
		err, ok := <-p.done
		if ok {
			p.done <- err // keep it for later waiters
		}
		ch <- err
	}()
	return ch
}

// exited reports whether p has exited, and how.
func (p *proc) exited() (bool, error) {
	select {
	case err := <-p.done:
		p.done <- err
		return true, err
	default:
		return false, nil
	}
}

// killRuns is a single-process crash loop: kills runs, each started by
// startRun and killed after delay(). Until committed reports a first
// commit, the kill also waits for it (for at most two minutes): a -race
// binary on a loaded machine can take longer to start than the delay, and
// then no kill lands mid-stream and the test checks nothing (a fresh
// machine's make test failed so). After the first commit kills land at
// random, start-up included.
func killRuns(t *testing.T, kills int, delay func() time.Duration, startRun func() *proc, committed func() bool) {
	t.Helper()
	first := false
	for i := range kills {
		p := startRun()
		for deadline := time.Now().Add(2 * time.Minute); !first; time.Sleep(50 * time.Millisecond) {
			if first = committed(); !first && time.Now().After(deadline) {
				t.Fatalf("run %d committed nothing in 2 minutes:\n%s", i, p.log.String())
			}
		}
		time.Sleep(delay())
		if done, err := p.exited(); done {
			t.Fatalf("run %d exited before its kill (%v):\n%s", i, err, p.log.String())
		}
		p.kill()
	}
}

func verifyWithPyarrow(t *testing.T, dir string, n int64) {
	t.Helper()
	py := Need(t, "FLIGHTLINE_PYTHON", "python with pyarrow")
	out, err := exec.Command(py, "python/verify_ids.py", dir, fmt.Sprint(n)).CombinedOutput()
	require.NoErrorf(t, err, "independent check failed: %s", out)
	t.Logf("pyarrow: %s", strings.TrimSpace(string(out)))
}

// verifyDeltaKeys checks with delta-rs that column of the Delta table at
// uri holds every key of [0, n) exactly once (the strings prefix0 ..
// prefix(n-1) when prefix is not empty).
func verifyDeltaKeys(t *testing.T, uri string, storage map[string]string, column string, n int64, prefix string) {
	t.Helper()
	py := Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	args := []string{"python/verify_delta_keys.py", uri, column, fmt.Sprint(n)}
	if prefix != "" {
		args = append(args, prefix)
	}
	js, _ := json.Marshal(storage)
	cmd := exec.Command(py, args...)
	cmd.Env = append(os.Environ(), "FLIGHTLINE_DELTA_STORAGE="+string(js))
	out, err := cmd.CombinedOutput()
	require.NoErrorf(t, err, "independent check failed (every key exactly once): %s", out)
	t.Logf("delta-rs: %s", strings.TrimSpace(string(out)))
}

// TestCrashDemoKill9 kills the one-process demo (embedded Kafka → Flight →
// coordinator → Flight → Delta) with SIGKILL at random points while it
// writes, at least 20 times, restarting it each time (each start re-seeds
// the same topic), then lets it finish: delta-rs must find every order id
// exactly once.
func TestCrashDemoKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	Need(t, "FLIGHTLINE_PYTHON", "python with deltalake") // for the final check
	bin := flightlineBin(t)
	dir := t.TempDir()
	const rows = 60_000
	kills := killCount(10, 24)
	args := []string{"demo", "--out", dir, "--rows", fmt.Sprint(rows), "--partitions", "3", "--batch-rows", "500", "--interval", "10ms"}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	killed := 0
	for killed < kills {
		p := start(t, bin, args...)
		// Kill while the pipeline runs, not while the topic is seeded.
		require.Eventually(t, func() bool {
			done, _ := p.exited()
			return done || strings.Contains(p.log.String(), "flightline demo:")
		}, time.Minute, 5*time.Millisecond, "the demo did not start:\n%s", p.log)
		time.Sleep(time.Duration(20+rng.IntN(400)) * time.Millisecond)
		if done, err := p.exited(); done {
			require.NoErrorf(t, err, "demo failed before its kill:\n%s", p.log.String())
			t.Logf("demo finished before kill %d; all rows written", killed+1)
			break
		}
		p.kill()
		killed++
	}
	t.Logf("killed the demo %d times", killed)
	require.GreaterOrEqual(t, killed, kills*5/6, "the demo must have been killed at least %d times; slow it down", kills*5/6)
	final := start(t, bin, args...)
	require.NoError(t, <-final.doneOnce(), final.log.String())
	require.Contains(t, final.log.String(), `{"positions":{"orders/0":20000,"orders/1":20000,"orders/2":20000}}`)
	verifyDeltaKeys(t, filepath.Join(dir, "orders"), nil, "order_id", rows, "")
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// TestCrashSplitProcessesKill9 runs source, sink and coordinator as three
// processes talking Flight over loopback, and kill -9s a random one of them
// at random points, restarting it: the output holds every row exactly once.
func TestCrashSplitProcessesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	Need(t, "FLIGHTLINE_PYTHON", "python with pyarrow") // for the final check, before the kills
	bin := flightlineBin(t)
	dir := t.TempDir()
	const rows = 300_000
	kills := killCount(10, 20)
	srcAddr, sinkAddr := freePort(t), freePort(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("crash-token\n"), 0o600))

	argv := map[string][]string{
		"source": {"serve-source", "--listen", srcAddr, "--source", fmt.Sprintf("generator:?rows=%d&batch_rows=1000&interval=3ms", rows)},
		"sink":   {"serve-sink", "--listen", sinkAddr, "--sink", "dir:" + dir, "--token-file", tokenFile},
		"run": {"run", "--source", "grpc://" + srcAddr, "--sink", "grpc://" + sinkAddr, "--sink-token-file", tokenFile,
			"--stream", "orders", "--pipeline", "split", "--target", "orders"},
	}
	procs := map[string]*proc{}
	for _, name := range []string{"source", "sink", "run"} {
		procs[name] = start(t, bin, argv[name]...)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	names := []string{"source", "sink", "run"}
	killed := 0
	for killed < kills {
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		if done, err := procs["run"].exited(); done {
			require.NoErrorf(t, err, "coordinator failed:\n%s", procs["run"].log.String())
			break
		}
		victim := names[rng.IntN(len(names))]
		procs[victim].kill()
		killed++
		procs[victim] = start(t, bin, argv[victim]...)
	}
	t.Logf("killed a process %d times", killed)
	require.GreaterOrEqual(t, killed, kills*3/4)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	select {
	case err := <-procs["run"].doneOnce():
		require.NoError(t, err, procs["run"].log.String())
	case <-ctx.Done():
		t.Fatalf("pipeline did not finish:\n%s", procs["run"].log.String())
	}
	verifyWithPyarrow(t, filepath.Join(dir, "orders"), rows)
}
