package bench

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/flightline/flightline/kafkadecode"
	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Run: FLIGHTLINE_BENCH_ROUNDS=5 go test -run '^$' -bench Kafkadecode ./bench/ | tee new.txt
// Every benchmark decodes the same bytes with Flightline's decoder and with
// its peer, side by side in one run, the sides interleaved round by round; SetBytes is the input size, so MB/s is
// input throughput, and records/s is reported as a metric.

func reportRecords(b *testing.B, perOp int) {
	b.ReportMetric(float64(perOp)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkKafkadecodeRaw: raw record batches → Arrow (partition, offset,
// timestamp, key, value, headers), CRC32C checked on every side. Four
// sides per codec, interleaved round by round:
//
//   - flightline-safe: Decoder.Append (keys and values copied);
//   - flightline-zerocopy: Decoder.UnsafeAppend (views into the input
//     where uncompressed);
//   - franzgo-tuned: kgo.ProcessFetchPartition → kgo.Records → Arrow
//     builders of the same schema, tuned as a careful user would: capacity
//     and value bytes reserved up front, buffers recycled across ops by a
//     free-list allocator (ours runs on the plain Go allocator);
//   - franzgo-parse: kgo.ProcessFetchPartition alone, no Arrow at all: the
//     floor of the franz-go path;
//   - flightline-parallel (compressed codecs): flightline-zerocopy with
//     WithDecompressConcurrency(GOMAXPROCS): the batches decompressed on
//     every core, then decoded in order; compare it per wall clock;
//   - bare-decompress (compressed codecs): decompression of the same
//     batches' payloads into one reused buffer and nothing else, the limit
//     of any decoder per core (kafkadecode_bare_test.go).
func BenchmarkKafkadecodeRaw(b *testing.B) {
	values := benchValues()
	for _, c := range []struct {
		name  string
		codec int16
	}{{"none", benchCodecNone}, {"gzip", benchCodecGzip}, {"snappy", benchCodecSnappy}, {"lz4", benchCodecLz4}, {"zstd", benchCodecZstd}} {
		raw := kafkaBatches(values, c.codec)
		ours := func(unsafe bool, opts ...kafkadecode.Option) func(b *testing.B) {
			return func(b *testing.B) {
				mem := memory.NewGoAllocator()
				dec, err := kafkadecode.NewDecoder(mem, append(opts, kafkadecode.WithTopic("orders"))...)
				if err != nil {
					b.Fatal(err)
				}
				defer dec.Release()
				b.SetBytes(int64(len(raw)))
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					f := kafkadecode.Fetch{Partition: 3, RecordBatches: raw}
					var p kafkadecode.Progress
					if unsafe {
						p, err = dec.UnsafeAppend(f)
					} else {
						p, err = dec.Append(f)
					}
					if err != nil || p.Records != benchRecords {
						b.Fatalf("%v %+v", err, p)
					}
					rec, err := dec.Flush()
					if err != nil {
						b.Fatal(err)
					}
					rec.Release()
				}
				reportRecords(b, benchRecords)
			}
		}
		b.Run("codec="+c.name, func(b *testing.B) {
			cmp := comparison{unit: "MB/s", perOp: float64(len(raw)) / 1e6, ratios: []pair{
				{"flightline-safe", "franzgo-tuned"}, {"flightline-zerocopy", "franzgo-tuned"},
				{"flightline-safe", "franzgo-parse"}, {"flightline-zerocopy", "franzgo-parse"},
			}}
			var limit []side
			if c.codec != benchCodecNone {
				cmp.ratios = append(cmp.ratios,
					pair{"flightline-zerocopy", "bare-decompress"}, pair{"franzgo-parse", "bare-decompress"},
					pair{"flightline-parallel", "franzgo-parse"}, pair{"flightline-parallel", "bare-decompress"})
				limit = append(limit,
					side{"flightline-parallel", ours(true, kafkadecode.WithDecompressConcurrency(runtime.GOMAXPROCS(0)))},
					bareSide(c.codec, raw))
			}
			interleave(b, cmp, append([]side{
				side{"flightline-safe", ours(false)},
				side{"flightline-zerocopy", ours(true)},
				side{"franzgo-tuned", func(b *testing.B) {
					mem := newRecyclingAllocator()
					rb := newKgoArrowBuilder(mem)
					defer rb.release()
					decomp := kgo.DefaultDecompressor()
					b.SetBytes(int64(len(raw)))
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						rp := kmsg.FetchResponseTopicPartition{Partition: 3, RecordBatches: raw}
						fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "orders", Partition: 3}, &rp, decomp, nil)
						if fp.Err != nil || len(fp.Records) != benchRecords {
							b.Fatalf("%v %d", fp.Err, len(fp.Records))
						}
						rb.reserve(fp.Records)
						for _, r := range fp.Records {
							rb.append(r)
						}
						rb.flush().Release()
					}
					reportRecords(b, benchRecords)
				}},
				side{"franzgo-parse", func(b *testing.B) {
					decomp := kgo.DefaultDecompressor()
					b.SetBytes(int64(len(raw)))
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						rp := kmsg.FetchResponseTopicPartition{Partition: 3, RecordBatches: raw}
						fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "orders", Partition: 3}, &rp, decomp, nil)
						if fp.Err != nil || len(fp.Records) != benchRecords {
							b.Fatalf("%v %d", fp.Err, len(fp.Records))
						}
					}
					reportRecords(b, benchRecords)
				}}}, limit...)...)
		})
	}
}

// recyclingAllocator is a free-list allocator: a freed buffer is handed
// out again (zeroed) for the next request of the same size. It lets the
// franz-go peer reuse its builders' buffers from op to op.
type recyclingAllocator struct {
	free map[int][][]byte
}

func newRecyclingAllocator() *recyclingAllocator {
	return &recyclingAllocator{free: map[int][][]byte{}}
}

func (a *recyclingAllocator) Allocate(size int) []byte {
	if l := a.free[size]; len(l) > 0 {
		buf := l[len(l)-1]
		a.free[size] = l[:len(l)-1]
		clear(buf)
		return buf
	}
	return make([]byte, size)
}

func (a *recyclingAllocator) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		return b[:size]
	}
	nb := a.Allocate(size)
	copy(nb, b)
	a.Free(b)
	return nb
}

func (a *recyclingAllocator) Free(b []byte) {
	if cap(b) == 0 {
		return
	}
	a.free[cap(b)] = append(a.free[cap(b)], b[:cap(b)])
}

// kgoArrowBuilder appends kgo.Records to Arrow builders of the same schema
// as kafkadecode's output: the franz-go record path.
type kgoArrowBuilder struct {
	schema *arrow.Schema
	b      *array.RecordBuilder
	part   *array.Int32Builder
	off    *array.Int64Builder
	ts     *array.TimestampBuilder
	key    *array.BinaryViewBuilder
	val    *array.BinaryViewBuilder
	hdrs   *array.ListBuilder
	hs     *array.StructBuilder
	hk     *array.StringBuilder
	hv     *array.BinaryBuilder
}

func newKgoArrowBuilder(mem memory.Allocator) *kgoArrowBuilder {
	s := kafkadecode.Schema("orders", nil)
	rb := array.NewRecordBuilder(mem, s)
	hdrs := rb.Field(5).(*array.ListBuilder)
	hs := hdrs.ValueBuilder().(*array.StructBuilder)
	return &kgoArrowBuilder{
		schema: s, b: rb,
		part: rb.Field(0).(*array.Int32Builder), off: rb.Field(1).(*array.Int64Builder),
		ts: rb.Field(2).(*array.TimestampBuilder), key: rb.Field(3).(*array.BinaryViewBuilder),
		val: rb.Field(4).(*array.BinaryViewBuilder), hdrs: hdrs, hs: hs,
		hk: hs.FieldBuilder(0).(*array.StringBuilder), hv: hs.FieldBuilder(1).(*array.BinaryBuilder),
	}
}

func (k *kgoArrowBuilder) append(r *kgo.Record) {
	k.part.Append(r.Partition)
	k.off.Append(r.Offset)
	k.ts.Append(arrow.Timestamp(r.Timestamp.UnixMilli()))
	if r.Key == nil {
		k.key.AppendNull()
	} else {
		k.key.Append(r.Key)
	}
	if r.Value == nil {
		k.val.AppendNull()
	} else {
		k.val.Append(r.Value)
	}
	k.hdrs.Append(true)
	for _, h := range r.Headers {
		k.hs.Append(true)
		k.hk.Append(h.Key)
		if h.Value == nil {
			k.hv.AppendNull()
		} else {
			k.hv.Append(h.Value)
		}
	}
}

// reserve sizes the builders for recs: rows and key and value bytes.
func (k *kgoArrowBuilder) reserve(recs []*kgo.Record) {
	n := len(recs)
	kb, vb := 0, 0
	for _, r := range recs {
		kb += len(r.Key)
		vb += len(r.Value)
	}
	k.part.Reserve(n)
	k.off.Reserve(n)
	k.ts.Reserve(n)
	k.key.Reserve(n)
	k.key.ReserveData(kb)
	k.val.Reserve(n)
	k.val.ReserveData(vb)
	k.hdrs.Reserve(n)
}

func (k *kgoArrowBuilder) flush() arrow.RecordBatch { return k.b.NewRecordBatch() }
func (k *kgoArrowBuilder) release()                 { k.b.Release() }

// ordersSchema is the Arrow schema of the orders JSON values.
var ordersSchema = arrow.NewSchema([]arrow.Field{
	{Name: "order_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "customer_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "sku", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "quantity", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "price", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "total", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "status", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "created_at", Type: arrow.FixedWidthTypes.Timestamp_ms, Nullable: true},
	{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// BenchmarkKafkadecodeJSON: orders JSON values → typed Arrow columns.
func BenchmarkKafkadecodeJSON(b *testing.B) {
	values := benchValues()
	total := 0
	for _, v := range values {
		total += len(v)
	}
	ndjson := bytes.Join(values, []byte{'\n'})
	side0 := side{"flightline", func(b *testing.B) {
		mem := memory.NewGoAllocator()
		d, err := kafkadecode.NewJSONDecoder(ordersSchema)
		if err != nil {
			b.Fatal(err)
		}
		sb := array.NewStructBuilder(mem, d.Type())
		defer sb.Release()
		b.SetBytes(int64(total))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			for _, v := range values {
				if err := d.AppendValue(sb, v); err != nil {
					b.Fatal(err)
				}
			}
			sb.NewArray().Release()
		}
		reportRecords(b, len(values))
	}}
	side1 := side{"arrowjson", func(b *testing.B) {
		mem := memory.NewGoAllocator()
		b.SetBytes(int64(total))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			r := array.NewJSONReader(bytes.NewReader(ndjson), ordersSchema, array.WithAllocator(mem), array.WithChunk(len(values)))
			n := 0
			for r.Next() {
				n += int(r.RecordBatch().NumRows())
			}
			if r.Err() != nil || n != len(values) {
				b.Fatalf("%v: %d rows", r.Err(), n)
			}
			r.Release()
		}
		reportRecords(b, len(values))
	}}
	interleave(b, comparison{unit: "MB/s", perOp: float64(total) / 1e6}, side0, side1)
}

const benchAvroSchema = `{"type": "record", "name": "Order", "fields": [
	{"name": "order_id", "type": "long"}, {"name": "customer_id", "type": "long"},
	{"name": "sku", "type": "string"}, {"name": "quantity", "type": "int"},
	{"name": "price", "type": "double"}, {"name": "total", "type": "double"},
	{"name": "status", "type": "string"},
	{"name": "created_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
	{"name": "note", "type": ["null", "string"]}]}`

type avroBenchOrder struct {
	OrderID    int64     `avro:"order_id"`
	CustomerID int64     `avro:"customer_id"`
	SKU        string    `avro:"sku"`
	Quantity   int32     `avro:"quantity"`
	Price      float64   `avro:"price"`
	Total      float64   `avro:"total"`
	Status     string    `avro:"status"`
	CreatedAt  time.Time `avro:"created_at"`
	Note       *string   `avro:"note"`
}

// BenchmarkKafkadecodeAvro: the same orders as Avro binary → Arrow.
func BenchmarkKafkadecodeAvro(b *testing.B) {
	schema := avro.MustParse(benchAvroSchema)
	jd, err := kafkadecode.NewJSONDecoder(ordersSchema)
	if err != nil {
		b.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	sb := array.NewStructBuilder(mem, jd.Type())
	for _, v := range benchValues() {
		if err := jd.AppendValue(sb, v); err != nil {
			b.Fatal(err)
		}
	}
	arr := sb.NewStructArray()
	sb.Release()
	values := make([][]byte, arr.Len())
	total := 0
	for i := range values {
		note := arr.Field(8).(*array.String).Value(i)
		o := avroBenchOrder{
			OrderID: arr.Field(0).(*array.Int64).Value(i), CustomerID: arr.Field(1).(*array.Int64).Value(i),
			SKU: arr.Field(2).(*array.String).Value(i), Quantity: arr.Field(3).(*array.Int32).Value(i),
			Price: arr.Field(4).(*array.Float64).Value(i), Total: arr.Field(5).(*array.Float64).Value(i),
			Status: arr.Field(6).(*array.String).Value(i), Note: &note,
			CreatedAt: time.UnixMilli(int64(arr.Field(7).(*array.Timestamp).Value(i))).UTC(),
		}
		if values[i], err = avro.Marshal(schema, o); err != nil {
			b.Fatal(err)
		}
		total += len(values[i])
	}
	arr.Release()
	side0 := side{"flightline", func(b *testing.B) {
		d, err := kafkadecode.NewAvroDecoder(benchAvroSchema)
		if err != nil {
			b.Fatal(err)
		}
		sb := array.NewStructBuilder(mem, d.Type())
		defer sb.Release()
		b.SetBytes(int64(total))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			for _, v := range values {
				if err := d.AppendValue(sb, v); err != nil {
					b.Fatal(err)
				}
			}
			sb.NewArray().Release()
		}
		reportRecords(b, len(values))
	}}
	side1 := side{"hamba", func(b *testing.B) {
		d, err := kafkadecode.NewAvroDecoder(benchAvroSchema) // for the output type only
		if err != nil {
			b.Fatal(err)
		}
		sb := array.NewStructBuilder(mem, d.Type())
		defer sb.Release()
		f := make([]array.Builder, sb.NumField())
		for i := range f {
			f[i] = sb.FieldBuilder(i)
		}
		b.SetBytes(int64(total))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			for _, v := range values {
				var o avroBenchOrder
				if err := avro.Unmarshal(schema, v, &o); err != nil {
					b.Fatal(err)
				}
				sb.Append(true)
				f[0].(*array.Int64Builder).Append(o.OrderID)
				f[1].(*array.Int64Builder).Append(o.CustomerID)
				f[2].(*array.StringBuilder).Append(o.SKU)
				f[3].(*array.Int32Builder).Append(o.Quantity)
				f[4].(*array.Float64Builder).Append(o.Price)
				f[5].(*array.Float64Builder).Append(o.Total)
				f[6].(*array.StringBuilder).Append(o.Status)
				f[7].(*array.TimestampBuilder).Append(arrow.Timestamp(o.CreatedAt.UnixMilli()))
				if o.Note == nil {
					f[8].AppendNull()
				} else {
					f[8].(*array.StringBuilder).Append(*o.Note)
				}
			}
			sb.NewArray().Release()
		}
		reportRecords(b, len(values))
	}}
	interleave(b, comparison{unit: "MB/s", perOp: float64(total) / 1e6}, side0, side1)
}

// BenchmarkKafkadecodeJSONPipeline: lz4 record batches with orders JSON
// values → one Arrow batch with Kafka columns and typed value columns.
// Peer: franz-go's record path, values fed to arrow-go's JSON reader.
func BenchmarkKafkadecodeJSONPipeline(b *testing.B) {
	values := benchValues()
	raw := kafkaBatches(values, benchCodecLz4)
	side0 := side{"flightline", func(b *testing.B) {
		jd, err := kafkadecode.NewJSONDecoder(ordersSchema)
		if err != nil {
			b.Fatal(err)
		}
		dec, err := kafkadecode.NewDecoder(memory.NewGoAllocator(), kafkadecode.WithTopic("orders"), kafkadecode.WithValueDecoder(jd))
		if err != nil {
			b.Fatal(err)
		}
		defer dec.Release()
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			p, err := dec.UnsafeAppend(kafkadecode.Fetch{Partition: 3, RecordBatches: raw})
			if err != nil || p.Records != benchRecords {
				b.Fatalf("%v %+v", err, p)
			}
			rec, err := dec.Flush()
			if err != nil {
				b.Fatal(err)
			}
			rec.Release()
		}
		reportRecords(b, benchRecords)
	}}
	side1 := side{"franzgo+arrowjson", func(b *testing.B) {
		mem := memory.NewGoAllocator()
		rb := newKgoArrowBuilder(mem)
		defer rb.release()
		decomp := kgo.DefaultDecompressor()
		var ndjson bytes.Buffer
		b.SetBytes(int64(len(raw)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			rp := kmsg.FetchResponseTopicPartition{Partition: 3, RecordBatches: raw}
			fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "orders", Partition: 3}, &rp, decomp, nil)
			if fp.Err != nil || len(fp.Records) != benchRecords {
				b.Fatalf("%v %d", fp.Err, len(fp.Records))
			}
			ndjson.Reset()
			for _, r := range fp.Records {
				rb.append(r)
				ndjson.Write(r.Value)
				ndjson.WriteByte('\n')
			}
			meta := rb.flush()
			jr := array.NewJSONReader(bytes.NewReader(ndjson.Bytes()), ordersSchema, array.WithAllocator(mem), array.WithChunk(benchRecords))
			if !jr.Next() || jr.RecordBatch().NumRows() != benchRecords {
				b.Fatalf("json reader: %v", jr.Err())
			}
			jr.Release()
			meta.Release()
		}
		reportRecords(b, benchRecords)
	}}
	interleave(b, comparison{unit: "MB/s", perOp: float64(len(raw)) / 1e6}, side0, side1)
}
