package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/bqrest"
)

// TestIntegrationBigQuerySourceToDelta runs BigQuery (the emulator) →
// Delta Lake as one `flightline run` process: the source reads a table by
// (cursor, tiebreak) with four rows on each cursor value, inserted in
// random order; the process is kill -9ed once after the first batches
// landed (mid-read: more than a batch behind) and restarted after more rows
// were inserted. delta-rs (an independent reader) must then find every id
// exactly once.
//
// Named TestIntegrationBigQuery… so `make test` runs it in its last phase,
// once the emulator is up (see the Makefile).
func TestIntegrationBigQuerySourceToDelta(t *testing.T) {
	if testing.Short() {
		t.Skip("process test: skipped in -short mode")
	}
	py := Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	endpoint := Need(t, "FLIGHTLINE_BQ_ENDPOINT", "the BigQuery emulator")
	grpcAddr := Need(t, "FLIGHTLINE_BQ_GRPC", "the BigQuery emulator")
	project := Need(t, "FLIGHTLINE_BQ_PROJECT", "the BigQuery emulator")
	bin := flightlineBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()

	dataset := fmt.Sprintf("srcpipe_%d", time.Now().UnixNano())
	require.NoError(t, bqrest.CreateDataset(ctx, endpoint, project, dataset))
	t.Cleanup(func() { _ = bqrest.DeleteDataset(context.Background(), endpoint, project, dataset) })
	table := fmt.Sprintf("`%s.%s.events`", project, dataset)
	exec1 := func(sql string) {
		for {
			_, err := bqrest.Query(ctx, endpoint, project, sql)
			if err == nil || !strings.Contains(err.Error(), "database is locked") || ctx.Err() != nil {
				require.NoError(t, err)
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	exec1(`CREATE TABLE ` + table + ` (id INT64 NOT NULL, wm INT64 NOT NULL, v STRING)`)
	insert := func(from, to int) {
		ids := rand.Perm(to - from)
		var vals []string
		for _, i := range ids {
			vals = append(vals, fmt.Sprintf("(%d, %d, 'v%d')", from+i, (from+i)/4, from+i))
		}
		exec1(`INSERT INTO ` + table + ` (id, wm, v) VALUES ` + strings.Join(vals, ", "))
	}

	uri := filepath.Join(t.TempDir(), "events")
	src := fmt.Sprintf("bigquery:%s/%s?table=events&cursor=wm&tiebreak=id&batch_rows=100&poll=200ms&emulator_endpoint=%s&emulator_grpc=%s",
		project, dataset, endpoint, grpcAddr)
	args := []string{"run", "--source", src, "--sink", "delta:" + uri, "--stream", "events", "--pipeline", dataset + "-pipe", "--log-level", "warn"}
	ids := func() []string {
		keys, err := readKeys(ctx, t, py, "delta", uri, "id", nil)
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
			case <-time.After(300 * time.Millisecond):
			}
		}
	}

	const first, total = 1000, 1600
	insert(0, first)
	p := start(t, bin, args...)
	landed := waitFor(p, 200) // a few batches of ten: the kill lands mid-read
	p.kill()
	t.Logf("killed with %d of %d rows in Delta", len(landed), first)
	require.Less(t, len(landed), first, "the kill must land mid-read")
	insert(first, total)
	p = start(t, bin, args...)
	waitFor(p, total)
	// A sentinel past the last cursor value: the source reads in cursor
	// order, so once it is in Delta every poll that could have re-read
	// earlier rows (a wrong resume point, the cursor's boundary read
	// again) has written them. No time window.
	exec1(fmt.Sprintf("INSERT INTO %s (id, wm, v) VALUES (%d, %d, 'sentinel')", table, total, total))
	waitFor(p, total+1)
	p.kill()
	got := ids()
	seen := map[string]int{}
	for _, id := range got {
		seen[id]++
	}
	for i := range total + 1 {
		require.Equal(t, 1, seen[strconv.Itoa(i)], "id %d", i)
	}
	require.Len(t, got, total+1)
}
