package integration

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStopsCleanlyOnSignals: SIGINT and SIGTERM stop `flightline run` and
// `flightline serve-sink` with exit status 0, and the pipeline resumes after
// what was committed.
func TestStopsCleanlyOnSignals(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	bin := flightlineBin(t)
	dir := t.TempDir()
	sinkAddr := freePort(t)
	sink := start(t, bin, "serve-sink", "--listen", sinkAddr, "--sink", "dir:"+dir)
	args := []string{"run", "--source", "generator:?rows=0&batch_rows=500&interval=5ms",
		"--sink", "grpc://" + sinkAddr, "--pipeline", "sig", "--target", "orders"}
	for i, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		run := start(t, bin, args...)
		// Signal once the pipeline is committing, however slow the start.
		before := countFiles(filepath.Join(dir, "orders"))
		deadline := time.Now().Add(60 * time.Second)
		for countFiles(filepath.Join(dir, "orders")) < before+3 {
			require.True(t, time.Now().Before(deadline), "pipeline never committed:\n%s", run.log.String())
			time.Sleep(20 * time.Millisecond)
		}
		require.NoError(t, run.cmd.Process.Signal(sig))
		select {
		case err := <-run.doneOnce():
			require.NoErrorf(t, err, "run after %v:\n%s", sig, run.log.String())
		case <-time.After(30 * time.Second):
			t.Fatalf("run did not stop on %v", sig)
		}
		require.Contains(t, run.log.String(), "pipeline stopped")
		if i == 1 { // the second run resumed after what the first committed
			require.Contains(t, run.log.String(), `orders/0`, run.log.String())
		}
	}
	require.NoError(t, sink.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-sink.doneOnce():
		require.NoError(t, err, sink.log.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve-sink did not stop on SIGTERM")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "orders", "*.arrow"))
	require.NotEmpty(t, files)
}

func countFiles(dir string) int {
	files, _ := filepath.Glob(filepath.Join(dir, "*.arrow"))
	return len(files)
}
