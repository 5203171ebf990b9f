package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
)

// TestIntegrationPostgresCrashKill9 runs generator → PostgreSQL in one
// flightline process and kill -9s it at random points (10 times; 32 under
// FLIGHTLINE_CHAOS=1),
// restarting it each time. A final run bounded a little past the committed
// checkpoint lets the pipeline finish; then plain SQL must find every id in
// [0, N) exactly once: count(*) = count(DISTINCT id) = N.
func TestIntegrationPostgresCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	dsn := Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	bin := flightlineBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())

	table := fmt.Sprintf("crash_orders_%d", time.Now().UnixNano()%1e9)
	pipeline := table + "_pipe"
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	q := u.Query()
	q.Set("table", table)
	u.RawQuery = q.Encode()
	sinkSpec := u.String()
	args := func(rows int) []string {
		return []string{"run", "--source", fmt.Sprintf("generator:?rows=%d&batch_rows=500&interval=2ms", rows),
			"--sink", sinkSpec, "--stream", "orders", "--pipeline", pipeline, "--log-level", "warn"}
	}

	kills := killCount(10, 32)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	killRuns(t, kills, func() time.Duration { return time.Duration(100+rng.IntN(500)) * time.Millisecond },
		func() *proc { return start(t, bin, args(0)...) }, // unbounded: it cannot finish before its kill
		func() bool {
			var n int
			err := conn.QueryRow(ctx, `SELECT count(*) FROM __flightline_checkpoints WHERE pipeline_id = $1 AND length(checkpoint) > 0`, pipeline).Scan(&n)
			if err != nil && !strings.Contains(err.Error(), "does not exist") {
				require.NoError(t, err)
			}
			return n > 0
		})

	// Let it finish a little past where the kills left it.
	var cp []byte
	require.NoError(t, conn.QueryRow(ctx, `SELECT checkpoint FROM __flightline_checkpoints WHERE pipeline_id = $1`, pipeline).Scan(&cp))
	pos, err := checkpoint.Parse(cp)
	require.NoError(t, err)
	committed := pos["orders/0"]
	require.Positive(t, committed, "the killed runs committed nothing")
	n := committed + 20_000
	t.Logf("killed %d times; %d rows committed by then; finishing at %d", kills, committed, n)
	final := start(t, bin, args(int(n))...)
	select {
	case err := <-final.doneOnce():
		require.NoError(t, err, final.log.String())
	case <-ctx.Done():
		t.Fatalf("final run did not finish:\n%s", final.log.String())
	}

	var count, distinct, lo, hi int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT id), min(id), max(id) FROM `+pgx.Identifier{table}.Sanitize()).
		Scan(&count, &distinct, &lo, &hi))
	require.Equal(t, n, count, "every record exactly once: count(*)")
	require.Equal(t, n, distinct, "every record exactly once: count(DISTINCT id)")
	require.Equal(t, int64(0), lo)
	require.Equal(t, n-1, hi)
	require.NoError(t, conn.QueryRow(ctx, `SELECT checkpoint FROM __flightline_checkpoints WHERE pipeline_id = $1`, pipeline).Scan(&cp))
	require.Equal(t, string(checkpoint.Positions{"orders/0": n}.Encode()), string(cp))
}
