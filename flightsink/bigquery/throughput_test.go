package bigquery

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
)

// TestIntegrationBigQueryThroughput measures rows/s into the emulator at
// 10k- and 100k-row batches, split between the staging write (create the
// staging table, pending stream, append, finalize, commit) and the
// transaction (MERGE + checkpoint). Each batch goes into a fresh, empty
// target: the emulator runs a MERGE into a non-empty table as a nested
// loop (10k rows into 10k took over 400 s before it dropped the
// connection), so only the insert path is measurable there. Opt-in:
// FLIGHTLINE_BQ_THROUGHPUT=1 (figures in docs/sinks/bigquery.md).
func TestIntegrationBigQueryThroughput(t *testing.T) {
	if os.Getenv("FLIGHTLINE_BQ_THROUGHPUT") != "1" {
		t.Skip("throughput run: set FLIGHTLINE_BQ_THROUGHPUT=1")
	}
	e := needEmulator(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	}, nil)
	build := func(from, n int64) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		for i := from; i < from+n; i++ {
			b.Field(0).(*array.Int64Builder).Append(i)
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("customer-%d", i))
			b.Field(2).(*array.Float64Builder).Append(float64(i) * 0.25)
			b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + i))
		}
		return b.NewRecordBatch()
	}
	for _, size := range []int64{10_000, 10_000, 100_000, 100_000} {
		ctx := t.Context()
		p := flightsink.Pipeline{ID: "tp", Target: name(fmt.Sprintf("tp%d", size))}
		wr, _, err := e.sink(t).Open(ctx, p)
		require.NoError(t, err)
		w := wr.(*writer)
		rec := build(0, size)
		t0 := time.Now()
		err = w.WriteBatch(ctx, rec, sinktest.CP(size))
		total := time.Since(t0)
		rec.Release()
		require.NoError(t, err)
		rows := float64(size)
		t.Logf("batch %7d rows: %8.0f rows/s overall (%.2fs); staging write %6.2fs (%8.0f rows/s), MERGE+checkpoint %6.2fs (%8.0f rows/s), other %5.2fs",
			size, rows/total.Seconds(), total.Seconds(), w.lastStage.Seconds(), rows/w.lastStage.Seconds(), w.lastMerge.Seconds(), rows/w.lastMerge.Seconds(), (total - w.lastStage - w.lastMerge).Seconds())
		require.NoError(t, w.Close(ctx))
	}
}
