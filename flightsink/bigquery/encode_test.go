package bigquery

import (
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/flightline/flightline"
)

var typesSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "u32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
}, nil)

// typesBatch: row 0 holds extreme values, row 1 NULLs in every nullable
// column, row 2 ordinary values.
func typesBatch(mem memory.Allocator) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, typesSchema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{-9223372036854775808, 1, 9223372036854775807}, nil)
	b.Field(1).(*array.Int8Builder).AppendValues([]int8{-128, 0, 127}, []bool{true, false, true})
	b.Field(2).(*array.Int32Builder).AppendValues([]int32{-2147483648, 0, 7}, []bool{true, false, true})
	b.Field(3).(*array.Uint32Builder).AppendValues([]uint32{4294967295, 0, 7}, []bool{true, false, true})
	b.Field(4).(*array.Float32Builder).AppendValues([]float32{1.5, 0, -0.25}, []bool{true, false, true})
	b.Field(5).(*array.Float64Builder).AppendValues([]float64{1e308, 0, -2.5}, []bool{true, false, true})
	b.Field(6).(*array.BooleanBuilder).AppendValues([]bool{true, false, false}, []bool{true, false, true})
	b.Field(7).(*array.StringBuilder).AppendValues([]string{"héllo 'q' \\ \n", "", ""}, []bool{true, false, true})
	b.Field(8).(*array.BinaryBuilder).AppendValues([][]byte{{0, 1, 255}, nil, {}}, []bool{true, false, true})
	b.Field(9).(*array.Date32Builder).AppendValues([]arrow.Date32{-719162, 0, 20000}, []bool{true, false, true})
	b.Field(10).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{-1000, 0, 1_700_000_000_123}, []bool{true, false, true})
	return b.NewRecordBatch()
}

// TestEncodeDecodes decodes the encoder's rows with the descriptor it
// sends, through protobuf's own dynamic messages.
func TestEncodeDecodes(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := typesBatch(mem)
	defer rec.Release()
	lay, err := newLayout(typesSchema)
	require.NoError(t, err)
	fd, err := protodesc.NewFile(&descriptorpb.FileDescriptorProto{
		Name: proto.String("row.proto"), Syntax: proto.String("proto2"), MessageType: []*descriptorpb.DescriptorProto{lay.desc},
	}, nil)
	require.NoError(t, err)
	md := fd.Messages().Get(0)
	var e encoder
	rows, err := e.encode(lay, rec, nil)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	get := func(r int, name string) any {
		m := dynamicpb.NewMessage(md)
		require.NoError(t, proto.Unmarshal(rows[r], m))
		f := md.Fields().ByName(protoreflectName(name))
		if !m.Has(f) {
			return nil
		}
		return m.Get(f).Interface()
	}
	require.Equal(t, int64(-9223372036854775808), get(0, "id"))
	require.Equal(t, int64(-128), get(0, "i8"))
	require.Equal(t, int64(-2147483648), get(0, "i32"))
	require.Equal(t, int64(4294967295), get(0, "u32"))
	require.Equal(t, 1.5, get(0, "f32"))
	require.Equal(t, 1e308, get(0, "f64"))
	require.Equal(t, true, get(0, "b"))
	require.Equal(t, "héllo 'q' \\ \n", get(0, "s"))
	require.Equal(t, []byte{0, 1, 255}, get(0, "bin"))
	require.Equal(t, int32(-719162), get(0, "d"))
	require.Equal(t, int64(-1_000_000), get(0, "ts"), "ms to µs")
	for _, name := range []string{"i8", "i32", "u32", "f32", "f64", "b", "s", "bin", "d", "ts"} {
		require.Nil(t, get(1, name), "NULL %s is an absent field", name)
	}
	require.Equal(t, int64(1), get(1, "id"))
	require.Equal(t, "", get(2, "s"), "an empty string is not NULL")
	require.Equal(t, []byte{}, get(2, "bin"))
}

// TestEncodeAllocationLean: once its buffer has grown, encoding a batch
// allocates nothing.
func TestEncodeAllocationLean(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := typesBatch(mem)
	defer rec.Release()
	lay, err := newLayout(typesSchema)
	require.NoError(t, err)
	var e encoder
	_, _ = e.encode(lay, rec, nil)
	allocs := testing.AllocsPerRun(100, func() { _, _ = e.encode(lay, rec, nil) })
	require.Zero(t, allocs)
}

func TestMapRefusesNamingTheColumn(t *testing.T) {
	for _, f := range []arrow.Field{
		{Name: "u", Type: arrow.PrimitiveTypes.Uint64},
		{Name: "ns", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
		{Name: "local", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
		{Name: "ll", Type: arrow.ListOf(arrow.ListOf(arrow.PrimitiveTypes.Int64))},
		{Name: "sl", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)})},
		{Name: "m", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64)},
		{Name: "dec", Type: &arrow.Decimal128Type{Precision: 10, Scale: 2}},
	} {
		_, err := newLayout(arrow.NewSchema([]arrow.Field{f}, nil))
		require.Error(t, err, f.Name)
		require.True(t, errors.Is(err, flightline.ErrSchemaMismatch), "%v", err)
		require.Contains(t, err.Error(), `"`+f.Name+`"`)
		t.Log(err)
	}
}

func TestNewRequiresKey(t *testing.T) {
	ctx := t.Context()
	_, err := New(ctx, Config{Project: "p", Dataset: "d", EmulatorEndpoint: "http://127.0.0.1:1", EmulatorGRPC: "127.0.0.1:1"})
	require.True(t, errors.Is(err, flightline.ErrInvalidInput), "%v", err)
	require.Contains(t, err.Error(), "key")
	_, err = New(ctx, Config{Project: "p", Dataset: "d", Key: []string{""}, EmulatorEndpoint: "http://127.0.0.1:1", EmulatorGRPC: "127.0.0.1:1"})
	require.True(t, errors.Is(err, flightline.ErrInvalidInput), "%v", err)
	_, err = New(ctx, Config{Project: "p", Dataset: "d", Key: []string{"id", " "}, EmulatorEndpoint: "http://127.0.0.1:1", EmulatorGRPC: "127.0.0.1:1"})
	require.True(t, errors.Is(err, flightline.ErrInvalidInput), "%v", err)
}

func protoreflectName(s string) protoreflect.Name { return protoreflect.Name(s) }

// TestLastPerKey: the last row of each (composite) key wins, in position
// order; a batch without duplicates writes every row.
func TestLastPerKey(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.BinaryTypes.String}, {Name: "b", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	// ("x",1) at 0, 2, 4; ("x",2) at 1; ("xy",1) — not ("x", …) — at 3.
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"x", "x", "x", "xy", "x"}, nil)
	b.Field(1).(*array.Int64Builder).AppendValues([]int64{1, 2, 1, 1, 1}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()
	lay, err := newLayout(sc)
	require.NoError(t, err)
	var d dedup
	require.Equal(t, []int{1, 3, 4}, d.lastPerKey(lay, rec, []int{0, 1}))
	require.Equal(t, []int{3, 4}, d.lastPerKey(lay, rec, []int{0}))
	head := rec.NewSlice(0, 2)
	defer head.Release()
	require.Nil(t, d.lastPerKey(lay, head, []int{0, 1}))
}
