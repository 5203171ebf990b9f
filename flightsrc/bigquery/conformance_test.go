package bigquery

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/srctest"
	"github.com/flightline/flightline/internal/bqrest"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// emu is the emulator `services.sh up bigquery` (then `wait bigquery`)
// started, with a dataset of the test's own.
type emu struct{ endpoint, grpc, project, dataset string }

var datasets atomic.Int64

// needEmulator returns the emulator and a fresh dataset on it, deleted
// with its tables when t ends (the emulator slows as state accumulates).
func needEmulator(t testing.TB) emu {
	t.Helper()
	e := emu{
		endpoint: servicetest.Need(t, "FLIGHTLINE_BQ_ENDPOINT", "the BigQuery emulator"),
		grpc:     servicetest.Need(t, "FLIGHTLINE_BQ_GRPC", "the BigQuery emulator"),
		project:  servicetest.Need(t, "FLIGHTLINE_BQ_PROJECT", "the BigQuery emulator"),
	}
	e.dataset = fmt.Sprintf("src_%d_%d", time.Now().UnixNano(), datasets.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, bqrest.CreateDataset(ctx, e.endpoint, e.project, e.dataset))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = bqrest.DeleteDataset(ctx, e.endpoint, e.project, e.dataset)
	})
	return e
}

// exec runs DDL or DML through the REST API with plain HTTP (not the
// source's client), retrying while the emulator's database is locked by a
// concurrent reader.
func (e emu) exec(t testing.TB, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		_, err := bqrest.Query(ctx, e.endpoint, e.project, sql)
		if err == nil || !strings.Contains(err.Error(), "database is locked") || ctx.Err() != nil {
			require.NoError(t, err, sql)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e emu) table(name string) string { return fmt.Sprintf("`%s.%s.%s`", e.project, e.dataset, name) }

// source reads cfg's table on the emulator (cfg's project, dataset and
// emulator fields are set here).
func (e emu) source(t testing.TB, cfg Config, opts ...Option) *Source {
	t.Helper()
	cfg.Project, cfg.Dataset, cfg.EmulatorEndpoint, cfg.EmulatorGRPC = e.project, e.dataset, e.endpoint, e.grpc
	s, err := New(context.Background(), cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// The source on the emulator: one table per stream, read by a cursor with
// ties (three rows share each value, inserted in random order) and the id
// as the tiebreak, in batches of 7 rows.
func TestIntegrationBigQuerySourceConformance(t *testing.T) {
	e := needEmulator(t)
	var n atomic.Int64
	srctest.Run(t, srctest.Harness{
		NewStream: func(t *testing.T) string {
			table := fmt.Sprintf("srctest_%d", n.Add(1))
			e.exec(t, `CREATE TABLE `+e.table(table)+` (id INT64 NOT NULL, wm INT64 NOT NULL, v STRING)`)
			return table
		},
		Append: func(t *testing.T, table string, from, to int64) {
			ids := make([]int64, 0, to-from)
			for i := from; i < to; i++ {
				ids = append(ids, i)
			}
			rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			vals := make([]string, len(ids))
			for i, id := range ids {
				vals[i] = fmt.Sprintf("(%d, %d, 'v%d')", id, id/3, id)
			}
			e.exec(t, `INSERT INTO `+e.table(table)+` (id, wm, v) VALUES `+strings.Join(vals, ", "))
		},
		NewSource: func(t *testing.T, mem memory.Allocator, table string) flightsrc.Source {
			return e.source(t, Config{Table: table, Cursor: "wm", Tiebreak: "id", BatchRows: 7, PollInterval: 20 * time.Millisecond}, Allocator(mem))
		},
		Records: func(t *testing.T, _ string, rec arrow.RecordBatch) []srctest.Record {
			col := rec.Column(0).(*array.Int64)
			out := make([]srctest.Record, rec.NumRows())
			for i := range out {
				out[i].ID = col.Value(i)
			}
			return out
		},
		DeterministicBoundaries: true,
	})
}
