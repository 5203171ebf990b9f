package transform

import (
	"context"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
)

// The built-in transforms: Funcs a user names without writing code
// (flightline's --transform builtin:…). Each is stateless, takes 0-row
// batches, and fails with flightline.ErrInvalidInput (the pipeline stops)
// when a batch lacks a column it names.

// Select keeps the named columns, in the order given. The columns are
// shared with the input, not copied.
func Select(columns ...string) (Func, error) {
	if len(columns) == 0 {
		return nil, fmt.Errorf("%w: select needs at least one column", flightline.ErrInvalidInput)
	}
	return func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		fields := make([]arrow.Field, len(columns))
		cols := make([]arrow.Array, len(columns))
		for i, name := range columns {
			j, err := column(rec, name, "select")
			if err != nil {
				return nil, err
			}
			fields[i], cols[i] = rec.Schema().Field(j), rec.Column(j)
		}
		md := rec.Schema().Metadata()
		return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows()), nil
	}, nil
}

// Rename renames columns: from old name to new name. Other columns keep
// theirs; data is shared. A rename that would leave two columns with one
// name is refused.
func Rename(names map[string]string) (Func, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: rename needs at least one old=new pair", flightline.ErrInvalidInput)
	}
	return func(_ context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		fields := append([]arrow.Field(nil), rec.Schema().Fields()...)
		for old := range names {
			if _, err := column(rec, old, "rename"); err != nil {
				return nil, err
			}
		}
		seen := map[string]bool{}
		for i := range fields {
			if n, ok := names[fields[i].Name]; ok {
				fields[i].Name = n
			}
			if seen[fields[i].Name] {
				return nil, fmt.Errorf("%w: rename: two columns would be named %q", flightline.ErrInvalidInput, fields[i].Name)
			}
			seen[fields[i].Name] = true
		}
		md := rec.Schema().Metadata()
		return array.NewRecordBatch(arrow.NewSchema(fields, &md), rec.Columns(), rec.NumRows()), nil
	}, nil
}

// Op is a comparison of Filter.
type Op string

// Filter's comparisons. The ordered ones compare numbers as numbers and
// strings byte-wise; null values never match them.
const (
	Eq      Op = "eq"
	Ne      Op = "ne"
	Lt      Op = "lt"
	Le      Op = "le"
	Gt      Op = "gt"
	Ge      Op = "ge"
	IsNull  Op = "is_null"  // no value
	NotNull Op = "not_null" // no value
)

// Filter keeps the rows whose column compares to value by op, e.g.
// Filter("amount", Gt, "100", nil). The column may be a signed or
// unsigned integer, a float, a string (plain, large or view) or a
// boolean; value is parsed as that type at the first batch, and a value
// that does not parse is ErrInvalidInput. Kept rows are copied into mem
// (nil: the default allocator); a batch whose rows all match is passed on
// as it is.
func Filter(col string, op Op, value string, mem memory.Allocator) (Func, error) {
	switch op {
	case Eq, Ne, Lt, Le, Gt, Ge:
	case IsNull, NotNull:
		if value != "" {
			return nil, fmt.Errorf("%w: filter %s takes no value", flightline.ErrInvalidInput, op)
		}
	default:
		return nil, fmt.Errorf("%w: filter op %q; want eq, ne, lt, le, gt, ge, is_null or not_null", flightline.ErrInvalidInput, op)
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		j, err := column(rec, col, "filter")
		if err != nil {
			return nil, err
		}
		keep, err := match(rec.Column(j), op, value)
		if err != nil {
			return nil, fmt.Errorf("filter on %q: %w", col, err)
		}
		n := 0
		for _, k := range keep {
			if k {
				n++
			}
		}
		if n == len(keep) {
			rec.Retain()
			return rec, nil
		}
		b := array.NewBooleanBuilder(mem)
		defer b.Release()
		b.AppendValues(keep, nil)
		mask := b.NewArray()
		defer mask.Release()
		return compute.FilterRecordBatch(compute.WithAllocator(ctx, mem), rec, mask, compute.DefaultFilterOptions())
	}, nil
}

// match returns, per row of a, whether it passes op value.
func match(a arrow.Array, op Op, value string) ([]bool, error) {
	keep := make([]bool, a.Len())
	if op == IsNull || op == NotNull {
		for i := range keep {
			keep[i] = a.IsNull(i) == (op == IsNull)
		}
		return keep, nil
	}
	bad := func(err error) error {
		return fmt.Errorf("%w: value %q is not a %s: %v", flightline.ErrInvalidInput, value, a.DataType(), err)
	}
	var cmp func(i int) int
	switch c := a.(type) {
	case *array.Int8, *array.Int16, *array.Int32, *array.Int64:
		v, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return nil, bad(err)
		}
		get := signed(c)
		cmp = func(i int) int { return compare(get(i), v) }
	case *array.Uint8, *array.Uint16, *array.Uint32, *array.Uint64:
		v, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return nil, bad(err)
		}
		get := unsigned(c)
		cmp = func(i int) int { return compare(get(i), v) }
	case *array.Float32, *array.Float64:
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, bad(err)
		}
		get := float(c)
		cmp = func(i int) int { return compare(get(i), v) }
	case *array.String:
		cmp = func(i int) int { return compare(c.Value(i), value) }
	case *array.LargeString:
		cmp = func(i int) int { return compare(c.Value(i), value) }
	case *array.StringView:
		cmp = func(i int) int { return compare(c.Value(i), value) }
	case *array.Boolean:
		v, err := strconv.ParseBool(value)
		if err != nil {
			return nil, bad(err)
		}
		cmp = func(i int) int { return compare(b2i(c.Value(i)), b2i(v)) }
	default:
		return nil, fmt.Errorf("%w: filter does not take a %s column: it compares integer, unsigned, float, boolean and string (utf8, large_utf8, utf8_view) columns; is_null and not_null take any", flightline.ErrInvalidInput, a.DataType())
	}
	for i := range keep {
		if a.IsNull(i) {
			continue
		}
		r := cmp(i)
		switch op {
		case Eq:
			keep[i] = r == 0
		case Ne:
			keep[i] = r != 0
		case Lt:
			keep[i] = r < 0
		case Le:
			keep[i] = r <= 0
		case Gt:
			keep[i] = r > 0
		case Ge:
			keep[i] = r >= 0
		}
	}
	return keep, nil
}

func compare[T int64 | uint64 | float64 | string](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func signed(a arrow.Array) func(int) int64 {
	switch c := a.(type) {
	case *array.Int8:
		return func(i int) int64 { return int64(c.Value(i)) }
	case *array.Int16:
		return func(i int) int64 { return int64(c.Value(i)) }
	case *array.Int32:
		return func(i int) int64 { return int64(c.Value(i)) }
	}
	c := a.(*array.Int64)
	return func(i int) int64 { return c.Value(i) }
}

func unsigned(a arrow.Array) func(int) uint64 {
	switch c := a.(type) {
	case *array.Uint8:
		return func(i int) uint64 { return uint64(c.Value(i)) }
	case *array.Uint16:
		return func(i int) uint64 { return uint64(c.Value(i)) }
	case *array.Uint32:
		return func(i int) uint64 { return uint64(c.Value(i)) }
	}
	c := a.(*array.Uint64)
	return func(i int) uint64 { return c.Value(i) }
}

func float(a arrow.Array) func(int) float64 {
	if c, ok := a.(*array.Float32); ok {
		return func(i int) float64 { return float64(c.Value(i)) }
	}
	c := a.(*array.Float64)
	return func(i int) float64 { return c.Value(i) }
}

// column is the index of the column named name in rec, or ErrInvalidInput.
func column(rec arrow.RecordBatch, name, what string) (int, error) {
	idx := rec.Schema().FieldIndices(name)
	switch len(idx) {
	case 1:
		return idx[0], nil
	case 0:
		return 0, fmt.Errorf("%w: %s: the batch has no column %q (it has %s)", flightline.ErrInvalidInput, what, name, fieldNames(rec.Schema()))
	}
	return 0, fmt.Errorf("%w: %s: the batch has %d columns named %q", flightline.ErrInvalidInput, what, len(idx), name)
}

func fieldNames(s *arrow.Schema) string {
	out := ""
	for i, f := range s.Fields() {
		if i > 0 {
			out += ", "
		}
		out += strconv.Quote(f.Name)
	}
	return out
}
