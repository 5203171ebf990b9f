// Throughput of the Kafka source against a plain franz-go consumer, both
// reading the same topic of a real broker in the same run; figures and the
// command in bench/kafkasrc.md.

package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/internal/testkit/servicetest"
	"github.com/flightline/flightline/kafkadecode"
)

const (
	kbPartitions = 4
	kbValueLen   = 100 // bytes per value; keys are 8-12 bytes
)

func kbRecords() int {
	if v := os.Getenv("FLIGHTLINE_BENCH_KAFKA_RECORDS"); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil && n > 0 {
			return n
		}
	}
	return 1_000_000
}

func kbBrokers(b *testing.B) []string {
	return strings.Split(servicetest.Need(b, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker"), ",")
}

var (
	kbOnce  sync.Once
	kbTopic string
	kbBytes int64
	kbErr   error
)

// kbSetup creates (once per broker) a topic of kbRecords() uncompressed
// records spread over kbPartitions partitions.
func kbSetup(b *testing.B, brokers []string, n int) {
	kbOnce.Do(func() {
		ctx := context.Background()
		kbTopic = fmt.Sprintf("bench-kafkasrc-%d", n)
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(kbTopic),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.ProducerLinger(10*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
		if err != nil {
			kbErr = err
			return
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		value := []byte(strings.Repeat("v", kbValueLen))
		for i := range n {
			kbBytes += int64(len(value) + len(fmt.Sprintf("key-%d", i)))
		}
		ends, err := adm.ListEndOffsets(ctx, kbTopic)
		if err == nil && ends.Error() == nil {
			total := int64(0)
			ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
			if total == int64(n) {
				return // produced by an earlier run
			}
		}
		if _, err := adm.CreateTopic(ctx, kbPartitions, 1, nil, kbTopic); err != nil {
			kbErr = err
			return
		}
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "key-%d", i), Value: value}, func(_ *kgo.Record, err error) {
				if err != nil && kbErr == nil {
					kbErr = err
				}
				wg.Done()
			})
		}
		wg.Wait()
	})
	if kbErr != nil {
		b.Fatal(kbErr)
	}
}

// BenchmarkKafkaSource reads the whole topic per op: the Flightline source
// (raw fetches decoded by kafkadecode into 10k-row batches) against a plain
// franz-go consumer that PollFetches and appends each kgo.Record to Arrow
// builders of the same schema, flushing every 10k rows. Both read
// read_committed, uncompressed, from offset 0, without a group.
func BenchmarkKafkaSource(b *testing.B) {
	brokers := kbBrokers(b)
	n := kbRecords()
	kbSetup(b, brokers, n)
	start := checkpoint.Positions{}
	for p := range kbPartitions {
		start[fmt.Sprintf("%s/%d", kbTopic, p)] = 0
	}
	side0 := side{"flightline", func(b *testing.B) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(b, 0)
		b.SetBytes(kbBytes)
		b.ReportAllocs()
		for b.Loop() {
			src, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{kbTopic}, GroupID: "bench", WithoutGroupMembership: true, BatchRows: 10_000},
				kafka.Allocator(mem), kafka.Logger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				b.Fatal(err)
			}
			rd, err := src.Read(context.Background(), flightsrc.ReadRequest{Stream: kbTopic, After: start.Encode()})
			if err != nil {
				b.Fatal(err)
			}
			rows := 0
			for rows < n {
				rec, _, err := rd.Next(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				rows += int(rec.NumRows())
				rec.Release()
			}
			rd.Close()
			src.Close()
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	}}
	side1 := side{"franz-go", func(b *testing.B) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(b, 0)
		b.SetBytes(kbBytes)
		b.ReportAllocs()
		schema := kafkadecode.Schema(kbTopic, nil)
		for b.Loop() {
			offs := map[int32]kgo.Offset{}
			for p := range kbPartitions {
				offs[int32(p)] = kgo.NewOffset().At(0)
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{kbTopic: offs}),
				kgo.FetchMaxBytes(50<<20), kgo.FetchMaxPartitionBytes(8<<20))
			if err != nil {
				b.Fatal(err)
			}
			bld := array.NewRecordBuilder(mem, schema)
			part := bld.Field(0).(*array.Int32Builder)
			off := bld.Field(1).(*array.Int64Builder)
			ts := bld.Field(2).(*array.TimestampBuilder)
			key := bld.Field(3).(*array.BinaryViewBuilder)
			val := bld.Field(4).(*array.BinaryViewBuilder)
			hdrs := bld.Field(5).(*array.ListBuilder)
			hst := hdrs.ValueBuilder().(*array.StructBuilder)
			hk := hst.FieldBuilder(0).(*array.StringBuilder)
			hv := hst.FieldBuilder(1).(*array.BinaryBuilder)
			rows, pending := 0, 0
			flush := func() {
				rec := bld.NewRecordBatch()
				rec.Release()
				pending = 0
			}
			for rows < n {
				fs := cl.PollFetches(context.Background())
				if err := fs.Err0(); err != nil {
					b.Fatal(err)
				}
				fs.EachRecord(func(r *kgo.Record) {
					part.Append(r.Partition)
					off.Append(r.Offset)
					ts.Append(arrow.Timestamp(r.Timestamp.UnixMilli()))
					key.Append(r.Key)
					val.Append(r.Value)
					hdrs.Append(true)
					for _, h := range r.Headers {
						hst.Append(true)
						hk.Append(h.Key)
						hv.Append(h.Value)
					}
					rows++
					if pending++; pending == 10_000 {
						flush()
					}
				})
			}
			flush()
			bld.Release()
			cl.Close()
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
	}}
	interleave(b, comparison{wallOnly: true, unit: "MB/s", perOp: float64(kbBytes) / 1e6}, side0, side1)
}
