package integration

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestServeSourceStopsOnSIGTERM: what docs/chaining.md says of a
// serve-source stopped while a coordinator reads an unbounded stream from
// it: it logs that it stops, refuses new calls, cuts the open stream
// after about 10 s, logs that it stopped, and exits 0; the coordinator
// retries instead of stopping.
func TestServeSourceStopsOnSIGTERM(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	bin := flightlineBin(t)
	dir := t.TempDir()
	addr := freePort(t)
	src := start(t, bin, "serve-source", "--listen", addr, "--source", "generator:?rows=0&batch_rows=100&interval=20ms")
	run := start(t, bin, "run", "--source", "grpc://"+addr, "--sink", "dir:"+dir, "--pipeline", "stop", "--target", "orders",
		"--stream", "orders")
	deadline := time.Now().Add(60 * time.Second)
	for countFiles(filepath.Join(dir, "orders")) < 3 {
		require.True(t, time.Now().Before(deadline), "pipeline never committed:\n%s\n%s", src.log, run.log)
		time.Sleep(20 * time.Millisecond)
	}

	require.NoError(t, src.cmd.Process.Signal(syscall.SIGTERM))
	sent := time.Now()
	select {
	case err := <-src.doneOnce():
		require.NoError(t, err, "serve-source exits 0:\n%s", src.log)
	case <-time.After(30 * time.Second):
		t.Fatalf("serve-source did not stop on SIGTERM:\n%s", src.log)
	}
	took := time.Since(sent)
	t.Logf("serve-source stopped %v after SIGTERM", took.Round(100*time.Millisecond))
	require.GreaterOrEqual(t, took, 9*time.Second, "the open stream gets about 10 s to end")
	require.Contains(t, src.log.String(), "stopping: new calls are refused; open streams end within 10s")
	require.Contains(t, src.log.String(), "streams_cut=true")

	require.Eventually(t, func() bool {
		if done, _ := run.exited(); done {
			return false
		}
		return strings.Contains(run.log.String(), "pipeline interrupted")
	}, 15*time.Second, 100*time.Millisecond, "the coordinator retries:\n%s", run.log)
}
