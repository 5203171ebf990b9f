package kafkadecode

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hamba/avro/v2"
)

const avroOrderSchema = `{
  "type": "record", "name": "Order", "namespace": "shop",
  "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": ["null", "string"], "default": null},
    {"name": "total", "type": "double"},
    {"name": "qty", "type": "int"},
    {"name": "ok", "type": "boolean"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "attrs", "type": {"type": "map", "values": "long"}},
    {"name": "addr", "type": ["null", {"type": "record", "name": "Addr", "fields": [{"name": "city", "type": "string"}]}]},
    {"name": "hash", "type": {"type": "fixed", "name": "H", "size": 2}},
    {"name": "ratio", "type": "float"}
  ]}`

type avroAddr struct {
	City string `avro:"city"`
}

type avroOrder struct {
	ID       int64            `avro:"id"`
	Customer *string          `avro:"customer"`
	Total    float64          `avro:"total"`
	Qty      int32            `avro:"qty"`
	OK       bool             `avro:"ok"`
	Price    *big.Rat         `avro:"price"`
	Created  time.Time        `avro:"created"`
	Status   string           `avro:"status"`
	Tags     []string         `avro:"tags"`
	Attrs    map[string]int64 `avro:"attrs"`
	Addr     *avroAddr        `avro:"addr"`
	Hash     [2]byte          `avro:"hash"`
	Ratio    float32          `avro:"ratio"`
}

func sampleAvroOrder(i int) avroOrder {
	name := fmt.Sprintf("customer-%d", i)
	o := avroOrder{
		ID: int64(i), Total: float64(i) * 1.5, Qty: int32(i % 7), OK: i%2 == 0,
		Price: big.NewRat(int64(i*100+37), 100), Created: time.UnixMilli(1_764_000_000_000 + int64(i)).UTC(),
		Status: "PAID", Tags: []string{"a", "b"}, Attrs: map[string]int64{"w": int64(i)},
		Hash: [2]byte{1, byte(i)}, Ratio: 0.25,
	}
	if i%3 != 0 {
		o.Customer = &name
		o.Addr = &avroAddr{City: "Oslo"}
	}
	return o
}

func TestSchemaFromAvro(t *testing.T) {
	s, err := SchemaFromAvro(avroOrderSchema)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"customer": "utf8", "price": "decimal(10, 2)", "created": "timestamp[ms, tz=UTC]", "status": "utf8",
		"tags": "list<item: utf8>", "attrs": "map<utf8, int64, items_nullable>", "hash": "fixed_size_binary[2]",
	} {
		f, ok := s.FieldsByName(name)
		if !ok {
			t.Fatalf("no field %s", name)
		}
		if f[0].Type.String() != want {
			t.Fatalf("%s: %s, want %s", name, f[0].Type, want)
		}
	}
	if f, _ := s.FieldsByName("customer"); !f[0].Nullable {
		t.Fatal("union with null must be nullable")
	}
	if _, err := SchemaFromAvro(`{"type": "record", "name": "X", "fields": [{"name": "u", "type": ["int", "string"]}]}`); !errors.Is(err, ErrUnsupportedType) {
		t.Fatalf("non-null union: %v", err)
	}
	if _, err := SchemaFromAvro(`"string"`); !errors.Is(err, ErrUnsupportedType) {
		t.Fatalf("non-record: %v", err)
	}
	if _, err := SchemaFromAvro(`{`); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("bad schema: %v", err)
	}
}

func TestAvroDecodeMatchesHamba(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	d, err := NewAvroDecoder(avroOrderSchema)
	if err != nil {
		t.Fatal(err)
	}
	schema := avro.MustParse(avroOrderSchema)
	b := array.NewStructBuilder(mem, d.Type())
	defer b.Release()
	const n = 30
	for i := range n {
		raw, err := avro.Marshal(schema, sampleAvroOrder(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.AppendValue(b, raw); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	arr := b.NewStructArray()
	defer arr.Release()
	if err := arr.ValidateFull(); err != nil {
		t.Fatal(err)
	}
	f := func(name string) arrow.Array {
		i, _ := d.Type().FieldIdx(name)
		return arr.Field(i)
	}
	for i := range n {
		o := sampleAvroOrder(i)
		if f("id").(*array.Int64).Value(i) != o.ID || f("total").(*array.Float64).Value(i) != o.Total ||
			f("qty").(*array.Int32).Value(i) != o.Qty || f("ok").(*array.Boolean).Value(i) != o.OK ||
			f("ratio").(*array.Float32).Value(i) != o.Ratio {
			t.Fatalf("row %d: scalars differ", i)
		}
		if c := f("customer").(*array.String); (o.Customer == nil) != c.IsNull(i) || (o.Customer != nil && c.Value(i) != *o.Customer) {
			t.Fatalf("row %d: customer", i)
		}
		if p := f("price").(*array.Decimal128).Value(i); p != decimal128.FromI64(int64(i*100+37)) {
			t.Fatalf("row %d: price %v", i, p)
		}
		if ts := f("created").(*array.Timestamp).Value(i); int64(ts) != o.Created.UnixMilli() {
			t.Fatalf("row %d: created %v", i, ts)
		}
		if f("status").(*array.String).Value(i) != "PAID" {
			t.Fatalf("row %d: status", i)
		}
		tags := f("tags").(*array.List)
		if s, e := tags.ValueOffsets(i); e-s != 2 || tags.ListValues().(*array.String).Value(int(s)+1) != "b" {
			t.Fatalf("row %d: tags", i)
		}
		attrs := f("attrs").(*array.Map)
		if s, e := attrs.ValueOffsets(i); e-s != 1 || attrs.Keys().(*array.String).Value(int(s)) != "w" || attrs.Items().(*array.Int64).Value(int(s)) != int64(i) {
			t.Fatalf("row %d: attrs", i)
		}
		addr := f("addr").(*array.Struct)
		if (o.Addr == nil) != addr.IsNull(i) || (o.Addr != nil && addr.Field(0).(*array.String).Value(i) != "Oslo") {
			t.Fatalf("row %d: addr", i)
		}
		if h := f("hash").(*array.FixedSizeBinary).Value(i); h[0] != 1 || h[1] != byte(i) {
			t.Fatalf("row %d: hash %v", i, h)
		}
	}
}

func TestAvroBadData(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	d, err := NewAvroDecoder(avroOrderSchema)
	if err != nil {
		t.Fatal(err)
	}
	good, err := avro.Marshal(avro.MustParse(avroOrderSchema), sampleAvroOrder(1))
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewStructBuilder(mem, d.Type())
	defer b.Release()
	for i := 0; i < len(good); i++ { // every truncation fails and keeps the row count
		before := b.Len()
		err := d.AppendValue(b, good[:i])
		var ae *AvroError
		if !errors.Is(err, ErrAvroData) || !errors.As(err, &ae) || b.Len() != before+1 {
			t.Fatalf("truncated at %d: err %v rows +%d", i, err, b.Len()-before)
		}
	}
	if err := d.AppendValue(b, append(good[:len(good):len(good)], 0)); !errors.Is(err, ErrAvroData) {
		t.Fatalf("trailing byte: %v", err)
	}
	arr := b.NewStructArray()
	defer arr.Release()
	if err := arr.ValidateFull(); err != nil {
		t.Fatal(err)
	}
}

// confluent frames an Avro payload in the Confluent wire format.
func confluent(id uint32, payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, id), payload...)
}

func TestAvroRegistry(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const reader = `{"type": "record", "name": "R", "fields": [
		{"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"]}, {"name": "score", "type": "double"},
		{"name": "region", "type": "string", "default": "eu"}, {"name": "n", "type": "int", "default": 3}]}`
	// Writer v1 lacks name and has score as int (promoted); v2 adds a field.
	const v1 = `{"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "score", "type": "int"}]}`
	const v2 = `{"type": "record", "name": "R", "fields": [{"name": "extra", "type": {"type": "array", "items": "string"}},
		{"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "score", "type": "double"},
		{"name": "region", "type": "string"}, {"name": "n", "type": "int"}]}`
	const v3 = `{"type": "record", "name": "R", "fields": [{"name": "id", "type": "string"}]}`
	const v4 = `{"type": "record", "name": "R", "fields": [{"name": "score", "type": "double"}]}` // lacks id: no default
	var fail atomic.Bool
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if fail.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		schemas := map[string]string{"/schemas/ids/1": v1, "/schemas/ids/2": v2, "/schemas/ids/3": v3, "/schemas/ids/4": v4}
		s, ok := schemas[r.URL.Path]
		if !ok {
			http.Error(w, `{"error_code": 40403}`, http.StatusNotFound)
			return
		}
		fmt.Fprintf(w, `{"schema": %q}`, s)
	}))
	defer srv.Close()
	reg, err := NewRegistry(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	vd, err := NewAvroDecoder(reader, AvroRegistry(reg, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	enc := func(s string, v any) []byte {
		b, err := avro.Marshal(avro.MustParse(s), v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	vals := [][]byte{
		confluent(1, enc(v1, map[string]any{"id": int64(1), "score": 7})),
		confluent(2, enc(v2, map[string]any{"extra": []string{"x", "y"}, "id": int64(2), "name": "bo", "score": 2.5, "region": "us", "n": 8})),
		confluent(9, enc(v1, map[string]any{"id": int64(3), "score": 1})), // unknown id
		confluent(3, enc(v3, map[string]any{"id": "4"})),                  // incompatible
		confluent(4, enc(v4, map[string]any{"score": 1.0})),               // incompatible: id has no default
		{1, 2, 3}, // not wire format
		confluent(1, enc(v1, map[string]any{"id": int64(5), "score": 9})),
	}
	recs := make([]trec, len(vals))
	for i, v := range vals {
		recs[i] = trec{val: v}
	}
	raw := tbatch{base: 0, recs: recs}.build()
	dec, err := NewDecoder(mem, WithValueDecoder(vd))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Release()
	p, err := dec.Append(Fetch{RecordBatches: raw})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := dec.Flush()
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if got := offsets(rec); !slicesEqual(got, []int64{0, 1, 6}) || p.DeadLetters != 4 {
		t.Fatalf("offsets %v progress %+v", got, p)
	}
	v := rec.Column(4).(*array.Struct)
	id, name, score := v.Field(0).(*array.Int64), v.Field(1).(*array.String), v.Field(2).(*array.Float64)
	region, nn := v.Field(3).(*array.String), v.Field(4).(*array.Int32)
	if id.Value(0) != 1 || name.IsValid(0) || score.Value(0) != 7 || id.Value(1) != 2 || name.Value(1) != "bo" || score.Value(1) != 2.5 || id.Value(2) != 5 {
		t.Fatalf("resolved values: %v", v)
	}
	if region.Value(0) != "eu" || nn.Value(0) != 3 || region.Value(1) != "us" || nn.Value(1) != 8 {
		t.Fatalf("defaults for fields the writer lacks: %v %v", region, nn)
	}
	dl := dec.TakeDeadLetters(nil)
	if len(dl) != 4 || !errors.Is(dl[0].Err, ErrUnknownSchema) || !errors.Is(dl[1].Err, ErrAvroIncompatible) ||
		!errors.Is(dl[2].Err, ErrAvroIncompatible) || !errors.Is(dl[3].Err, ErrWireFormat) {
		t.Fatalf("dead letters %+v", dl)
	}
	before := calls.Load()

	// A registry outage stops Append at the record (retryable), no dead letter.
	fail.Store(true)
	raw2 := tbatch{base: 6, recs: []trec{{val: vals[0]}, {val: confluent(5, nil)}}}.build()
	p, err = dec.Append(Fetch{FetchOffset: 6, RecordBatches: raw2})
	var re *RecordError
	if !errors.As(err, &re) || !IsRetryable(err) || re.Offset != 7 || p.NextOffset != 7 || p.Records != 1 {
		t.Fatalf("outage: err %v progress %+v", err, p)
	}
	if calls.Load() != before+1 {
		t.Fatalf("schemas are cached: %d calls after the first pass, want 1", calls.Load()-before)
	}
	if len(dec.TakeDeadLetters(nil)) != 0 {
		t.Fatal("a retryable failure must not dead-letter")
	}
	r2, err := dec.Flush()
	if err != nil {
		t.Fatal(err)
	}
	r2.Release()
}
