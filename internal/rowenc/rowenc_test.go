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
