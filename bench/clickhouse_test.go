// Throughput of the ClickHouse sink against the chdb front, next to a
// plain INSERT … FORMAT ArrowStream of the same IPC bytes into the same
// kind of table (no token, no checkpoint rows); figures and the command in
// bench/clickhouse.md.

package bench

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/clickhouse"
	"github.com/flightline/flightline/internal/testkit/chtest"
)

// BenchmarkClickHouseSink writes 400k rows per operation in 100k-row
// batches: "sink" through the sink (per batch: checkpoint read, intent
// row, INSERT with its token, commit row), "plain" as one INSERT … FORMAT
// ArrowStream per batch of the same IPC bytes. It reports rows/s; the
// ratio sink/plain is the sink's cost.
func BenchmarkClickHouseSink(b *testing.B) {
	f := chtest.Need(b)
	mem := memory.NewGoAllocator()
	const rows, size = 400_000, 100_000
	batches, arrowBytes := sfBatches(mem, rows, size)
	defer func() {
		for _, r := range batches {
			r.Release()
		}
	}()
	ctx := context.Background()
	b.Run("sink", func(b *testing.B) {
		s, err := clickhouse.New(context.Background(), clickhouse.Config{Endpoint: f.URL, User: f.User, Password: f.Password}, clickhouse.Logger(slog.New(slog.DiscardHandler)))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.SetBytes(arrowBytes)
		for i := 0; b.Loop(); i++ {
			p := flightsink.Pipeline{ID: fmt.Sprintf("bench_%d_%d", rand.IntN(1e6), i), Target: fmt.Sprintf("bench_sink_%d_%d", rand.IntN(1e6), i)}
			w, _, err := s.Open(ctx, p)
			if err != nil {
				b.Fatal(err)
			}
			for j, r := range batches {
				if err := w.WriteBatch(ctx, r, checkpoint.Positions{"bench/0": int64(j+1) * size}.Encode()); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("plain", func(b *testing.B) {
		var bodies [][]byte
		for _, r := range batches {
			var buf bytes.Buffer
			w := ipc.NewWriter(&buf, ipc.WithSchema(r.Schema()))
			if err := w.Write(r); err != nil {
				b.Fatal(err)
			}
			_ = w.Close()
			bodies = append(bodies, buf.Bytes())
		}
		b.SetBytes(arrowBytes)
		for i := 0; b.Loop(); i++ {
			table := fmt.Sprintf("bench_plain_%d_%d", rand.IntN(1e6), i)
			f.Query(b, "CREATE TABLE "+table+" (id Int64, x Float64, s String, ts DateTime64(6, 'UTC')) ENGINE = MergeTree ORDER BY tuple() SETTINGS non_replicated_deduplication_window = 1000")
			for _, body := range bodies {
				q := url.Values{"query": {"INSERT INTO " + table + " (id, x, s, ts) FORMAT ArrowStream"}}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.URL+"/?"+q.Encode(), bytes.NewReader(body))
				req.SetBasicAuth(f.User, f.Password)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("plain insert: HTTP %d", resp.StatusCode)
				}
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}
