// Throughput of the S3 sink against versitygw, side by side with plain
// PutObject calls of the same Parquet bytes encoded beforehand; figures and
// the command in bench/s3.md.

package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/util"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	s3sink "github.com/flightline/flightline/flightsink/s3"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/parquetw"
	"github.com/flightline/flightline/internal/testkit/s3test"
)

// s3Rows rows per operation, in batches of pgBatchRows (the PostgreSQL
// benchmark's rows: bigint, double, 20-char text, timestamptz).
const s3Rows = 1_000_000

// BenchmarkS3 writes the same batches two ways to the same server. MB/s
// is Arrow bytes in per second for both, so the ratio of the two is the
// ratio of their times:
//
//   - path=put_preencoded: each batch's Parquet bytes, encoded before the
//     timer by the sink's own encoder settings, sent with one plain
//     PutObject each (the ceiling: the upload alone);
//   - path=sink: flightsink/s3 Open + WriteBatch per batch (view/schema
//     check, Parquet encoding, the PUT).
func BenchmarkS3(b *testing.B) {
	opts := s3test.Options(b)
	mem := memory.NewGoAllocator()
	batches := pgBatches(mem, s3Rows)
	defer func() {
		for _, r := range batches {
			r.Release()
		}
	}()
	var arrowBytes int64
	encoded := make([][]byte, len(batches))
	var parquetBytes int
	for i, r := range batches {
		arrowBytes += int64(util.TotalRecordSize(r))
		data, _, err := parquetw.Bytes(r, parquetw.Allocator(mem))
		if err != nil {
			b.Fatal(err)
		}
		encoded[i] = data
		parquetBytes += len(data)
	}
	prefix := fmt.Sprintf("bench-%d", rand.Uint32())
	ctx := context.Background()

	side0 := side{"put_preencoded", func(b *testing.B) {
		st, err := objstore.NewS3(ctx, s3test.Bucket, "", opts)
		if err != nil {
			b.Fatal(err)
		}
		client := st.Client()
		b.SetBytes(arrowBytes)
		b.ReportAllocs()
		b.ResetTimer()
		for op := range b.N {
			for i, data := range encoded {
				key := fmt.Sprintf("%s/put/%d/%05d.parquet", prefix, op, i)
				_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s3test.Bucket), Key: aws.String(key),
					Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))})
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(parquetBytes), "parquet_bytes/op")
	}}

	side1 := side{"sink", func(b *testing.B) {
		s, err := s3sink.New(context.Background(), s3sink.Config{Location: s3test.Bucket + "/" + prefix, Storage: opts}, s3sink.Allocator(mem))
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(arrowBytes)
		b.ReportAllocs()
		b.ResetTimer()
		for op := range b.N {
			w, _, err := s.Open(ctx, flightsink.Pipeline{ID: fmt.Sprintf("sink-%d", op)})
			if err != nil {
				b.Fatal(err)
			}
			writeAll(b, w, batches)
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(parquetBytes), "parquet_bytes/op")
	}}
	interleave(b, comparison{wallOnly: true, unit: "MB/s", perOp: float64(arrowBytes) / 1e6, ratios: []pair{{"sink", "put_preencoded"}}}, side0, side1)
}

func writeAll(b *testing.B, w flightsink.Writer, batches []arrow.RecordBatch) {
	ctx := context.Background()
	var at int64
	for _, r := range batches {
		at += r.NumRows()
		if err := w.WriteBatch(ctx, r, checkpoint.Positions{"bench/0": at}.Encode()); err != nil {
			b.Fatal(err)
		}
	}
}
