package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/testkit/snowtest"
)

// TestIntegrationSnowflakeToDelta runs Snowflake (the emulator) → Delta
// Lake as one flightline process: the source reads a table by (cursor,
// tiebreak) with ties on the cursor, the process is kill -9ed after the
// first rows landed and restarted after more were inserted, and delta-rs
// must then find every id exactly once. (Kafka → Snowflake is the
// snowflake entry of TestIntegrationSplitKill9.)
func TestIntegrationSnowflakeToDelta(t *testing.T) {
	if testing.Short() {
		t.Skip("process test: skipped in -short mode")
	}
	py := Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	cfg := snowtest.Config(t)
	db := snowtest.DB(t)
	bin := flightlineBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	table := strings.ToUpper(snowtest.Name("to_delta"))
	_, err := db.ExecContext(ctx, `CREATE TABLE `+table+` (ID NUMBER(19,0) NOT NULL, WM NUMBER(19,0) NOT NULL, V VARCHAR)`)
	require.NoError(t, err)
	insert := func(from, to int) {
		var vals []string
		for i := from; i < to; i++ {
			vals = append(vals, fmt.Sprintf("(%d, %d, 'v%d')", i, i/4, i))
		}
		_, err := db.ExecContext(ctx, `INSERT INTO `+table+` VALUES `+strings.Join(vals, ", "))
		require.NoError(t, err)
	}
	uri := filepath.Join(t.TempDir(), "events")
	t.Setenv("SNOWFLAKE_PASSWORD", cfg.Password)
	src := fmt.Sprintf("snowflake://%s@%s/%s/%s?host=%s&port=%d&protocol=http&warehouse=%s&table=%s&cursor=WM&tiebreak=ID&batch_rows=300&poll=200ms&timeout=30s&retries=1",
		cfg.User, cfg.Account, cfg.Database, cfg.Schema, cfg.Host, cfg.Port, cfg.Warehouse, table)
	args := []string{"run", "--source", src, "--sink", "delta:" + uri, "--stream", table, "--pipeline", table + "-pipe", "--log-level", "warn"}
	ids := func() []string {
		keys, err := readKeys(ctx, t, py, "delta", uri, "ID", nil)
		require.NoError(t, err)
		return keys
	}
	waitFor := func(p *proc, n int) []string {
		for {
			got := ids()
			if len(got) >= n {
				return got
			}
			if done, err := p.exited(); done {
				t.Fatalf("run exited (%v):\n%s", err, p.log.String())
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%d of %d rows in Delta:\n%s", len(got), n, p.log.String())
			case <-time.After(500 * time.Millisecond):
			}
		}
	}

	insert(0, 1500)
	p := start(t, bin, args...)
	waitFor(p, 600) // part of the table: the kill lands mid-read
	p.kill()
	insert(1500, 2500)
	p = start(t, bin, args...)
	waitFor(p, 2500)
	// A sentinel past the last cursor value: the source reads in cursor
	// order, so once the sentinel is in Delta every poll that could have
	// re-read rows of the first 2500 (a wrong resume point, the cursor's
	// boundary read again) has written them. No time window.
	insert(2500, 2504)
	const total = 2504
	waitFor(p, total)
	p.kill()
	got := ids()
	seen := map[string]int{}
	for _, id := range got {
		seen[id]++
	}
	for i := range total {
		require.Equal(t, 1, seen[strconv.Itoa(i)], "id %d", i)
	}
	require.Len(t, got, total)
}
