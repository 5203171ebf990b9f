// Throughput of the transactional Kafka sink next to a plain franz-go
// idempotent producer, same records, same broker; figures and the command
// in bench/kafkasink.md.

package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	kafkasink "github.com/flightline/flightline/flightsink/kafka"
)

const (
	kBatchRows  = 10_000
	kValueBytes = 200
	kBatches    = 20 // 200k records, 40 MB of values per operation
	kPartitions = 3
)

var kSchema = arrow.NewSchema([]arrow.Field{{Name: "value", Type: arrow.BinaryTypes.Binary}}, nil)

func kafkaBrokers(b *testing.B) []string {
	v := os.Getenv("FLIGHTLINE_KAFKA_BROKERS")
	if v == "" {
		b.Skip("Kafka broker not available: FLIGHTLINE_KAFKA_BROKERS is unset (integration/services/services.sh up kafka)")
	}
	return strings.Split(v, ",")
}

// sinkBatches builds kBatches batches of kBatchRows 200-byte values.
func sinkBatches(mem memory.Allocator) []arrow.RecordBatch {
	out := make([]arrow.RecordBatch, kBatches)
	v := make([]byte, kValueBytes)
	for i := range out {
		bld := array.NewRecordBuilder(mem, kSchema)
		vb := bld.Field(0).(*array.BinaryBuilder)
		vb.Reserve(kBatchRows)
		vb.ReserveData(kBatchRows * kValueBytes)
		for j := range kBatchRows {
			copy(v, fmt.Sprintf("%08d-%08d-", i, j))
			vb.Append(v)
		}
		out[i] = bld.NewRecordBatch()
		bld.Release()
	}
	return out
}

func newBenchTopic(b *testing.B, adm *kadm.Client, prefix string) string {
	name := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	resp, err := adm.CreateTopic(context.Background(), kPartitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.Fatal(err)
	}
	// Wait until the topic has leaders, so neither contender pays for
	// metadata retries on a topic the broker is still creating.
	for range 1500 { // up to 30 s: a loaded broker can be slow to elect
		md, err := adm.Metadata(context.Background(), name)
		if err == nil && md.Topics[name].Err == nil && len(md.Topics[name].Partitions) == kPartitions {
			ok := true
			for _, p := range md.Topics[name].Partitions {
				ok = ok && p.Leader >= 0 && p.Err == nil
			}
			if ok {
				return name
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("topic %s has no leaders", name)
	return name
}

// BenchmarkKafkaSink produces the same 200k records of 200 bytes two ways:
// plain_idempotent, a franz-go producer (idempotent, not transactional)
// that produces every record and flushes once; and sink, the exactly-once
// sink writing 10k-record batches, each its own transaction with its
// checkpoint record. Each operation writes to a fresh topic.
func BenchmarkKafkaSink(b *testing.B) {
	brokers := kafkaBrokers(b)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	batches := sinkBatches(mem)
	defer func() {
		for _, r := range batches {
			r.Release()
		}
		mem.AssertSize(b, 0)
	}()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		b.Fatal(err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	records := float64(kBatches * kBatchRows)
	report := func(b *testing.B) {
		s := b.Elapsed().Seconds() / float64(b.N)
		b.ReportMetric(records/s, "records/s")
		b.ReportMetric(records*kValueBytes/s/1e6, "MB/s")
	}
	ctx := context.Background()

	side0 := side{"plain_idempotent", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			topic := newBenchTopic(b, adm, "bench-plain")
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.MaxBufferedRecords(100_000))
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := cl.ProducerID(ctx); err != nil { // connect outside the timer, as the sink's Open does
				b.Fatal(err)
			}
			b.StartTimer()
			var firstErr error
			promise := func(_ *kgo.Record, err error) {
				if err != nil && firstErr == nil {
					firstErr = err
				}
			}
			for _, rec := range batches {
				col := rec.Column(0).(*array.Binary)
				for j := range int(rec.NumRows()) {
					cl.Produce(ctx, &kgo.Record{Value: col.Value(j)}, promise)
				}
			}
			if err := cl.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			cl.Close()
			if firstErr != nil {
				b.Fatal(firstErr)
			}
			b.StartTimer()
		}
		report(b)
	}}

	side1 := side{"sink", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			topic := newBenchTopic(b, adm, "bench-sink")
			s, err := kafkasink.New(context.Background(), kafkasink.Config{Brokers: brokers, Topic: topic})
			if err != nil {
				b.Fatal(err)
			}
			w, _, err := s.Open(ctx, flightsink.Pipeline{ID: topic})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			for i, rec := range batches {
				if err := w.WriteBatch(ctx, rec, checkpoint.Positions{"bench/0": int64(i+1) * kBatchRows}.Encode()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			w.Close(ctx)
			s.Close()
			b.StartTimer()
		}
		report(b)
	}}
	interleave(b, comparison{wallOnly: true, unit: "MB/s", perOp: records * kValueBytes / 1e6, ratios: []pair{{"sink", "plain_idempotent"}}}, side0, side1)
}
