// Throughput of the stdout sink's jsonl format against arrow-go's own
// JSON-lines writer on the same batches into the same writer; figures and
// the command in bench/destinations.md.

package bench

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/stdout"
)

// stdoutRows rows per op, in batches of stdoutBatchRows: the PostgreSQL
// benchmark's rows (bigint, double, 20-char text, timestamptz).
const (
	stdoutRows      = 100_000
	stdoutBatchRows = 10_000
)

// BenchmarkStdoutJSONL writes the same batches as JSON lines to
// io.Discard two ways, both in this process alone (rows per CPU second is
// reported too):
//
//   - arrowgo-recordtojson: arrow-go's array.RecordToJSON per batch (a
//     json.Encoder over a map per row: the JSON-lines writer arrow-go
//     offers);
//   - sink: flightsink/stdout with format jsonl, Open then WriteBatch per
//     batch (replay check, internal/rowenc's encoder into a buffer, one
//     Write per batch).
//
// The outputs hold the same values, written alike (a timestamp as
// "2026-01-01T00:00:00.001Z"), and differ in key order only: arrow-go sorts
// each row's keys (a Go map), the sink keeps the column order.
func BenchmarkStdoutJSONL(b *testing.B) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(b, 0)
	big := pgBatches(mem, stdoutRows)
	var batches []arrow.RecordBatch
	for _, r := range big {
		for from := int64(0); from < r.NumRows(); from += stdoutBatchRows {
			batches = append(batches, r.NewSlice(from, min(from+stdoutBatchRows, r.NumRows())))
		}
		r.Release()
	}
	defer func() {
		for _, r := range batches {
			r.Release()
		}
	}()
	ctx := context.Background()
	peer := side{"arrowgo-recordtojson", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			for _, r := range batches {
				if err := array.RecordToJSON(r, io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		}
	}}
	sink := side{"sink", func(b *testing.B) {
		s, err := stdout.New(context.Background(), stdout.Config{Format: stdout.JSONL}, stdout.WithWriter(io.Discard))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			// A pipeline per op: the sink skips a pipeline's replays.
			w, _, err := s.Open(ctx, flightsink.Pipeline{ID: fmt.Sprintf("bench-%d", objsinkOp.Add(1))})
			if err != nil {
				b.Fatal(err)
			}
			writeAll(b, w, batches)
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}}
	interleave(b, comparison{unit: "rows/s", perOp: stdoutRows, ratios: []pair{{"sink", "arrowgo-recordtojson"}}}, peer, sink)
}
