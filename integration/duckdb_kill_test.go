package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/internal/testkit/duckdbtest"
)

// TestIntegrationDuckDBCrashKill9 runs generator → duckdb: sink in one
// flightline process and kill -9s it at random points (5 times; 100 under
// FLIGHTLINE_CHAOS=1), restarting it each time on the same file (the dead
// process's lock goes with it). A final run bounded a little past the
// committed checkpoint lets the pipeline finish; then DuckDB's Python
// package, in a process of its own, must find every id in [0, N) exactly
// once, and the checkpoint at N.
func TestIntegrationDuckDBCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	duckdbtest.Lib(t) // the flightline processes find it through FLIGHTLINE_DUCKDB_LIB
	duckdbtest.Python(t)
	bin := flightlineBin(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	path := filepath.Join(t.TempDir(), "crash.duckdb")
	pipeline := "duckdb_crash"
	args := func(rows int) []string {
		return []string{"run", "--source", fmt.Sprintf("generator:?rows=%d&batch_rows=500&interval=2ms", rows),
			"--sink", "duckdb:" + path + "?table=orders", "--stream", "orders", "--pipeline", pipeline, "--log-level", "info"}
	}
	cpQuery := "select coalesce(decode(checkpoint), '') from __flightline_checkpoints where pipeline_id = '" + pipeline + "'"

	kills := killCount(5, 100)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 38))
	for i := range kills {
		p := start(t, bin, args(0)...) // unbounded: it cannot finish before its kill
		// Kill it while it writes, not while it loads libduckdb.so.
		require.Eventually(t, func() bool { return strings.Contains(p.log.String(), "pipeline resuming") }, time.Minute, 10*time.Millisecond, "run %d never started", i)
		time.Sleep(time.Duration(150+rng.IntN(600)) * time.Millisecond)
		if done, err := p.exited(); done {
			t.Fatalf("run %d exited before its kill (%v):\n%s", i, err, p.log.String())
		}
		p.kill()
	}

	pos, err := checkpoint.Parse([]byte(duckdbtest.PyQuery(t, path, cpQuery)))
	require.NoError(t, err)
	committed := pos["orders/0"]
	require.Positive(t, committed, "the killed runs committed nothing")
	n := committed + 5_000
	t.Logf("killed %d times; %d rows committed by then; finishing at %d", kills, committed, n)
	final := start(t, bin, args(int(n))...)
	select {
	case err := <-final.doneOnce():
		require.NoError(t, err, final.log.String())
	case <-ctx.Done():
		t.Fatalf("final run did not finish:\n%s", final.log.String())
	}

	ids := duckdbtest.PyIDs(t, path, "orders")
	seen := make(map[int64]int, len(ids))
	for _, id := range ids {
		seen[id]++
	}
	for id := range n {
		require.Equalf(t, 1, seen[id], "id %d: every record exactly once", id)
	}
	require.Len(t, ids, int(n), "no record outside [0, N)")
	require.Equal(t, string(checkpoint.Positions{"orders/0": n}.Encode()), duckdbtest.PyQuery(t, path, cpQuery))
	t.Logf("%d records each once after %d kills, in %s (without the build)", n, kills, time.Since(began).Round(time.Millisecond))
}
