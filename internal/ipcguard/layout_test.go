package ipcguard_test

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/internal/ipcguard"
)

// everyType is a schema with a column of every type arrow-go's IPC reader
// loads, nested ones included, and dictionaries at the top and inside a
// struct.
func everyType() *arrow.Schema {
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int16, ValueType: arrow.BinaryTypes.String}
	fields := []arrow.Field{
		{Name: "null", Type: arrow.Null, Nullable: true},
		{Name: "bool", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "u64", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
		{Name: "f16", Type: arrow.FixedWidthTypes.Float16, Nullable: true},
		{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "dec128", Type: &arrow.Decimal128Type{Precision: 20, Scale: 3}, Nullable: true},
		{Name: "dec256", Type: &arrow.Decimal256Type{Precision: 40, Scale: 3}, Nullable: true},
		{Name: "date32", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "time64", Type: arrow.FixedWidthTypes.Time64us, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
		{Name: "mdn", Type: arrow.FixedWidthTypes.MonthDayNanoInterval, Nullable: true},
		{Name: "dur", Type: arrow.FixedWidthTypes.Duration_ms, Nullable: true},
		{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "lstr", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "strview", Type: arrow.BinaryTypes.StringView, Nullable: true},
		{Name: "binview", Type: arrow.BinaryTypes.BinaryView, Nullable: true},
		{Name: "fsb", Type: &arrow.FixedSizeBinaryType{ByteWidth: 3}, Nullable: true},
		{Name: "list", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "llist", Type: arrow.LargeListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "listview", Type: arrow.ListViewOf(arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "fsl", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Int32), Nullable: true},
		{Name: "struct", Type: arrow.StructOf(
			arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "d", Type: dict, Nullable: true}), Nullable: true},
		{Name: "map", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "sparse", Type: arrow.SparseUnionOf([]arrow.Field{
			{Name: "i", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, []arrow.UnionTypeCode{0, 1})},
		{Name: "dense", Type: arrow.DenseUnionOf([]arrow.Field{
			{Name: "i", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}, []arrow.UnionTypeCode{0, 1})},
		{Name: "ree", Type: arrow.RunEndEncodedOf(arrow.PrimitiveTypes.Int32, arrow.BinaryTypes.String)},
		{Name: "dict", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.PrimitiveTypes.Float64}, Nullable: true},
		{Name: "uuid", Type: extensions.NewUUIDType(), Nullable: true},
	}
	return arrow.NewSchema(fields, nil)
}

// everyTypeStream encodes a batch of n rows (every third null where a
// column can be) of everyType.
func everyTypeStream(t testing.TB, n int, opts ...ipc.Option) []doputtest.Message {
	t.Helper()
	mem := memory.NewGoAllocator()
	b := array.NewRecordBuilder(mem, everyType())
	defer b.Release()
	for _, fb := range b.Fields() {
		for i := range n {
			switch fb := fb.(type) {
			case *array.SparseUnionBuilder:
				fb.Append(0)
				fb.Child(0).(*array.Int32Builder).Append(int32(i))
				fb.Child(1).AppendEmptyValue()
			case *array.DenseUnionBuilder:
				fb.Append(1)
				fb.Child(1).(*array.StringBuilder).Append("u")
			case *array.RunEndEncodedBuilder:
				fb.Append(1)
				fb.ValueBuilder().(*array.StringBuilder).Append("run")
			case *array.NullBuilder:
				fb.AppendNull()
			default:
				if i%3 == 0 {
					fb.AppendNull()
				} else {
					fb.AppendEmptyValue()
				}
			}
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	return doputtest.Encode(rec.Schema(), []arrow.RecordBatch{rec}, opts...)
}

// TestCheckerEveryType: streams of every type, plain and compressed, with
// rows and empty, pass the Checker, and arrow-go reads them.
func TestCheckerEveryType(t *testing.T) {
	for _, n := range []int{0, 7} {
		for name, opts := range map[string][]ipc.Option{"plain": nil, "lz4": {ipc.WithLZ4()}, "zstd": {ipc.WithZstd()}} {
			msgs := everyTypeStream(t, n, opts...)
			c := ipcguard.NewChecker(1 << 20)
			for i, m := range msgs {
				if _, err := c.Check(m.Header, m.Body); err != nil {
					t.Errorf("%s, %d rows: message %d: %v", name, n, i, err)
				}
			}
		}
	}
}

// TestCheckerRefusesShortBatches: a batch (record or dictionary) whose
// field node or buffer vector is one short of what its schema needs is
// refused, however many rows it has: arrow-go's reader would read the
// missing entry from the bytes after the vector.
func TestCheckerRefusesShortBatches(t *testing.T) {
	for _, n := range []int{0, 7} {
		msgs := everyTypeStream(t, n, ipc.WithLZ4())
		for i := 1; i < len(msgs); i++ {
			l, err := ipcguard.Locate(msgs[i].Header)
			if err != nil {
				t.Fatal(err)
			}
			for what, vec := range map[string][]int{"nodes": l.Nodes, "buffers": l.Buffers} {
				if len(vec) == 0 {
					continue
				}
				h := append([]byte(nil), msgs[i].Header...)
				binary.LittleEndian.PutUint32(h[vec[0]-4:], uint32(len(vec)-1))
				c := ipcguard.NewChecker(1 << 20)
				for _, m := range msgs[:i] {
					if _, err := c.Check(m.Header, m.Body); err != nil {
						t.Fatal(err)
					}
				}
				_, err := c.Check(h, msgs[i].Body)
				if err == nil || !strings.Contains(err.Error(), "its schema needs more") {
					t.Errorf("%d rows, message %d with one of its %d %s missing: %v", n, i, len(vec), what, err)
				}
			}
		}
	}
}

// TestCheckerNeedsTheSchema: a batch the Checker has no schema for is
// refused.
func TestCheckerNeedsTheSchema(t *testing.T) {
	msgs := everyTypeStream(t, 3)
	if _, err := ipcguard.NewChecker(1<<20).Check(msgs[len(msgs)-1].Header, msgs[len(msgs)-1].Body); err == nil {
		t.Error("record batch without a schema accepted")
	}
	if _, err := ipcguard.NewChecker(1<<20).Check(msgs[1].Header, msgs[1].Body); err == nil {
		t.Error("dictionary batch without a schema accepted")
	}
}
