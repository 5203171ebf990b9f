package rowenc_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/rowenc"
)

// TestCSVRefusesWhatItCannotHold: a column of a type arrow-go's CSV writer
// panics on is ErrInvalidInput naming the column, and the types it takes
// (lists of them included) encode.
func TestCSVRefusesWhatItCannotHold(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, c := range []struct {
		dt arrow.DataType
		ok bool
	}{
		{arrow.PrimitiveTypes.Int64, true},
		{arrow.BinaryTypes.String, true},
		{arrow.ListOf(arrow.PrimitiveTypes.Int32), true},
		{arrow.FixedWidthTypes.Timestamp_us, true},
		{arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64}), false},
		{arrow.ListOf(arrow.StructOf(arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64})), false},
		{arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64), false},
		{&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, false},
		{arrow.BinaryTypes.StringView, false},
	} {
		sc := arrow.NewSchema([]arrow.Field{{Name: "c", Type: c.dt, Nullable: true}}, nil)
		b := array.NewRecordBuilder(mem, sc)
		b.Field(0).AppendNull()
		rec := b.NewRecordBatch()
		b.Release()
		var out bytes.Buffer
		err := rowenc.NewCSV(sc).Encode(&out, rec)
		rec.Release()
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.dt, err)
		}
		if !c.ok && (!errors.Is(err, flightline.ErrInvalidInput) || !bytes.Contains([]byte(err.Error()), []byte(`column "c"`))) {
			t.Errorf("%s: got %v, want ErrInvalidInput naming the column", c.dt, err)
		}
	}
}

// TestJSONLAppendRow: one row as one object without a newline, the same
// bytes Encode writes for it; equal values encode to equal bytes.
func TestJSONLAppendRow(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v<&>", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2, 1}, nil)
	b.Field(1).(*array.StringBuilder).AppendValues([]string{"a<b", "", "a<b"}, []bool{true, false, true})
	rec := b.NewRecordBatch()
	defer rec.Release()
	e := rowenc.NewJSONL(sc)
	var rows [3]string
	for i := range rows {
		var buf bytes.Buffer
		if err := e.AppendRow(&buf, rec.Columns(), i); err != nil {
			t.Fatal(err)
		}
		rows[i] = buf.String()
	}
	if rows[0] != `{"id":1,"v<&>":"a<b"}` || rows[1] != `{"id":2,"v<&>":null}` || rows[2] != rows[0] {
		t.Fatalf("rows %q", rows)
	}
	var all bytes.Buffer
	if err := e.Encode(&all, rec); err != nil {
		t.Fatal(err)
	}
	if want := rows[0] + "\n" + rows[1] + "\n" + rows[2] + "\n"; all.String() != want {
		t.Fatalf("Encode %q, want %q", all.String(), want)
	}
}
