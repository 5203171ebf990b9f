package kafkadecode

import (
	"errors"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

type testItem struct {
	SKU string `arrow:"sku,required"`
	Qty int32  `arrow:"qty"`
}

type testOrder struct {
	ID       int64          `arrow:"id,required"`
	Customer string         `arrow:"customer"`
	Total    float64        `arrow:"total"`
	Price    decimal128.Num `arrow:"price,decimal=10.2"`
	Created  time.Time      `arrow:"created,unit=ms"`
	Day      *int8          `arrow:"small"`
	Items    []testItem     `arrow:"items"`
	Addr     *struct {
		City string `arrow:"city"`
	} `arrow:"addr"`
	Blob    []byte `arrow:"blob"`
	private int
	Skipped string `arrow:"-"`
}

func TestSchemaOf(t *testing.T) {
	s, err := SchemaOf[*testOrder]()
	if err != nil {
		t.Fatal(err)
	}
	want := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "customer", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "total", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "price", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}, Nullable: true},
		{Name: "created", Type: arrow.FixedWidthTypes.Timestamp_ms, Nullable: true},
		{Name: "small", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "items", Type: arrow.ListOf(arrow.StructOf(
			arrow.Field{Name: "sku", Type: arrow.BinaryTypes.String},
			arrow.Field{Name: "qty", Type: arrow.PrimitiveTypes.Int32, Nullable: true})), Nullable: true},
		{Name: "addr", Type: arrow.StructOf(arrow.Field{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		{Name: "blob", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}, nil)
	if !s.Equal(want) {
		t.Fatalf("got\n%v\nwant\n%v", s, want)
	}
	if _, err := SchemaOf[int](); !errors.Is(err, ErrUnsupportedType) {
		t.Fatalf("non-struct: %v", err)
	}
	type badDec struct {
		D decimal128.Num `arrow:"d"`
	}
	if _, err := SchemaOf[badDec](); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("decimal without precision: %v", err)
	}
}

func orderDecoder(t *testing.T) *JSONDecoder {
	t.Helper()
	s, err := SchemaOf[testOrder]()
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewJSONDecoder(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestJSONDecodeValues(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	d := orderDecoder(t)
	b := array.NewStructBuilder(mem, d.Type())
	defer b.Release()
	inputs := []string{
		`{"id": 1, "customer": "ann\u00e9 \"q\"", "total": 12.5, "price": 12.34, "created": "2026-12-02T13:25:06.5+01:00",
		  "small": -3, "items": [{"sku": "a", "qty": 2}, {"sku": "b"}], "addr": {"city": "Oslo", "zip": 1}, "blob": "AAEC",
		  "unknown": {"deep": [1, {"x": null}, "s"]}}`,
		` {"id": "2", "created": 1764681906000, "price": "-0.5", "total": 1e2, "items": [], "addr": null} `,
		`{"id": 3.0, "customer": null, "id": 99}`,
		` null `,
	}
	for i, in := range inputs {
		if err := d.AppendValue(b, []byte(in)); err != nil {
			t.Fatalf("input %d: %v", i, err)
		}
	}
	arr := b.NewStructArray()
	defer arr.Release()
	id := arr.Field(0).(*array.Int64)
	cust := arr.Field(1).(*array.String)
	total := arr.Field(2).(*array.Float64)
	price := arr.Field(3).(*array.Decimal128)
	created := arr.Field(4).(*array.Timestamp)
	small := arr.Field(5).(*array.Int8)
	items := arr.Field(6).(*array.List)
	addr := arr.Field(7).(*array.Struct)
	blob := arr.Field(8).(*array.Binary)
	if arr.IsValid(3) || arr.Len() != 4 {
		t.Fatalf("a JSON null value must be a null row")
	}
	if id.Value(0) != 1 || id.Value(1) != 2 || id.Value(2) != 3 {
		t.Fatalf("ids %v (first duplicate key wins)", id.Int64Values())
	}
	if cust.Value(0) != `anné "q"` || cust.IsValid(1) || cust.IsValid(2) {
		t.Fatalf("customer %v", cust)
	}
	if total.Value(0) != 12.5 || total.Value(1) != 100 || total.IsValid(2) {
		t.Fatalf("total %v", total)
	}
	if price.Value(0) != decimal128.FromI64(1234) || price.Value(1) != decimal128.FromI64(-50) {
		t.Fatalf("price %v", price)
	}
	if created.Value(0) != arrow.Timestamp(time.Date(2026, 12, 2, 12, 25, 6, 5e8, time.UTC).UnixMilli()) || created.Value(1) != 1764681906000 {
		t.Fatalf("created %v", created)
	}
	if small.Value(0) != -3 || small.IsValid(1) {
		t.Fatalf("small %v", small)
	}
	if s, e := items.ValueOffsets(0); e-s != 2 {
		t.Fatalf("items %v", items)
	}
	if s, e := items.ValueOffsets(1); e-s != 0 || !items.IsValid(1) || items.IsValid(2) {
		t.Fatalf("items %v", items)
	}
	qty := items.ListValues().(*array.Struct).Field(1)
	if qty.IsValid(1) == true || qty.(*array.Int32).Value(0) != 2 {
		t.Fatalf("qty %v", qty)
	}
	if addr.Field(0).(*array.String).Value(0) != "Oslo" || addr.IsValid(1) || addr.IsValid(2) {
		t.Fatalf("addr %v", addr)
	}
	if string(blob.Value(0)) != "\x00\x01\x02" {
		t.Fatalf("blob %v", blob)
	}
}

func TestJSONBadValues(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	d := orderDecoder(t)
	b := array.NewStructBuilder(mem, d.Type())
	defer b.Release()
	for _, tc := range []struct {
		in   string
		kind error
	}{
		{`[1]`, ErrJSONSyntax},
		{`{"id": 1`, ErrJSONSyntax},
		{`{"id": 1} x`, ErrJSONSyntax},
		{`{"customer": "x"}`, ErrMissingField},
		{`{"id": null}`, ErrMissingField},
		{`{"id": "x"}`, ErrJSONType},
		{`{"id": 1.5}`, ErrJSONType},
		{`{"id": 1, "small": 300}`, ErrJSONType},
		{`{"id": 1, "price": 123456789.1}`, ErrJSONType},
		{`{"id": 1, "created": "yesterday"}`, ErrJSONType},
		{`{"id": 1, "items": [{"sku": "a"}, {"qty": 1}]}`, ErrMissingField},
		{`{"id": 1, "items": {"sku": "a"}}`, ErrJSONType},
		{"{\"id\": 1, \"customer\": \"\xff\"}", ErrJSONType},
		{`{"id": 1, "customer": "\xff"}`, ErrJSONSyntax},
		{`{"id": 1, "blob": "!!"}`, ErrJSONType},
		{`{"id": 1, "x": [[[[`, ErrJSONSyntax},
	} {
		before := b.Len()
		err := d.AppendValue(b, []byte(tc.in))
		var je *JSONError
		if !errors.Is(err, tc.kind) || !errors.As(err, &je) {
			t.Fatalf("%s: err %v, want %v", tc.in, err, tc.kind)
		}
		if b.Len() != before+1 {
			t.Fatalf("%s: appended %d rows, the contract is exactly 1", tc.in, b.Len()-before)
		}
	}
	arr := b.NewStructArray() // all children stay aligned
	defer arr.Release()
	if err := arr.ValidateFull(); err != nil {
		t.Fatal(err)
	}
}

func TestJSONInDecoderDeadLetters(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	vals := []string{`{"id": 1, "customer": "a"}`, `{"id": "bad"}`, `{"id": 3, "items": [{"sku": "x"}]}`, "", `{"id": 5}`}
	recs := make([]trec, len(vals))
	for i, v := range vals {
		recs[i] = trec{key: []byte("k"), val: []byte(v)}
	}
	recs[3].val = nil // tombstone: null struct, not a dead letter
	raw := tbatch{base: 10, recs: recs}.build()

	rec, ps, err := decodeAll(t, mem, []Option{WithValueDecoder(orderDecoder(t))}, Fetch{Partition: 2, FetchOffset: 10, RecordBatches: raw})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	if got := offsets(rec); !slicesEqual(got, []int64{10, 12, 13, 14}) || ps[0].DeadLetters != 1 || ps[0].NextOffset != 15 {
		t.Fatalf("offsets %v progress %+v", got, ps[0])
	}
	v := rec.Column(4).(*array.Struct)
	if err := v.ValidateFull(); err != nil {
		t.Fatal(err)
	}
	if ids := v.Field(0).(*array.Int64); ids.Value(0) != 1 || ids.Value(1) != 3 || v.IsValid(2) || ids.Value(3) != 5 {
		t.Fatalf("value column %v", v)
	}

	dec, err := NewDecoder(mem, WithValueDecoder(orderDecoder(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Release()
	if _, err := dec.Append(Fetch{Partition: 2, FetchOffset: 10, RecordBatches: raw}); err != nil {
		t.Fatal(err)
	}
	dl := dec.TakeDeadLetters(nil)
	var je *JSONError
	if len(dl) != 1 || dl[0].Offset != 11 || dl[0].Partition != 2 || string(dl[0].Value) != `{"id": "bad"}` || string(dl[0].Key) != "k" ||
		!errors.Is(dl[0].Err, ErrBadRecord) || !errors.As(dl[0].Err, &je) {
		t.Fatalf("dead letters %+v", dl)
	}
	if len(dec.TakeDeadLetters(nil)) != 0 {
		t.Fatal("dead letters not forgotten after Take")
	}
	r2, err := dec.Flush()
	if err != nil {
		t.Fatal(err)
	}
	r2.Release()

	// Fail fast: the rows before the bad record stay, NextOffset is the bad record.
	rec3, ps3, err := decodeAll(t, mem, []Option{WithValueDecoder(orderDecoder(t)), WithFailFast()}, Fetch{Partition: 2, FetchOffset: 10, RecordBatches: raw})
	defer rec3.Release()
	var re *RecordError
	if !errors.As(err, &re) || re.Offset != 11 || re.Partition != 2 || !errors.Is(err, ErrJSONType) {
		t.Fatalf("fail fast: %v", err)
	}
	if rec3.NumRows() != 1 || ps3[0].NextOffset != 11 {
		t.Fatalf("fail fast: rows %d progress %+v", rec3.NumRows(), ps3[0])
	}
}

func TestJSONEpochUnit(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := arrow.NewSchema([]arrow.Field{{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true}, {Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true}}, nil)
	d, err := NewJSONDecoder(s, JSONEpochUnit(arrow.Second))
	if err != nil {
		t.Fatal(err)
	}
	b := array.NewStructBuilder(mem, d.Type())
	defer b.Release()
	for _, in := range []string{`{"ts": 2, "d": "1970-01-03"}`, `{"d": "1969-12-31T23:00:00Z"}`} {
		if err := d.AppendValue(b, []byte(in)); err != nil {
			t.Fatal(err)
		}
	}
	arr := b.NewStructArray()
	defer arr.Release()
	if v := arr.Field(0).(*array.Timestamp).Value(0); v != 2_000_000 {
		t.Fatalf("ts %d", v)
	}
	if d := arr.Field(1).(*array.Date32); d.Value(0) != 2 || d.Value(1) != -1 {
		t.Fatalf("dates %v", d)
	}
	if _, err := NewJSONDecoder(arrow.NewSchema([]arrow.Field{{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String)}}, nil)); !errors.Is(err, ErrUnsupportedType) {
		t.Fatalf("map: %v", err)
	}
}

// A batch that turns out corrupt after its values were decoded is rolled
// back in every column, the value column included.
func TestValueRowsRolledBackWithCorruptBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	recs := []trec{{val: []byte(`{"id": 1}`)}, {val: []byte(`{"id": 2}`)}}
	good := tbatch{base: 0, recs: recs}.build()
	bad := tbatch{base: 2, recs: recs, numRecords: 3}.build()
	later := tbatch{base: 4, recs: recs}.build()
	rec, ps, err := decodeAll(t, mem, []Option{WithValueDecoder(orderDecoder(t))},
		Fetch{RecordBatches: append(append([]byte{}, good...), bad...)},
		Fetch{FetchOffset: 4, RecordBatches: later})
	defer rec.Release()
	if !errors.Is(err, ErrCorruptBatch) || ps[0].NextOffset != 2 || ps[0].Records != 2 {
		t.Fatalf("err %v progress %+v", err, ps[0])
	}
	if got := offsets(rec); !slicesEqual(got, []int64{0, 1, 4, 5}) {
		t.Fatalf("offsets %v", got)
	}
	ids := rec.Column(4).(*array.Struct).Field(0).(*array.Int64)
	if ids.Len() != 4 || ids.Value(1) != 2 || ids.Value(2) != 1 || ids.Value(3) != 2 {
		t.Fatalf("value ids %v", ids)
	}
}
