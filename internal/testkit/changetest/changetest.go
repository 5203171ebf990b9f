// Package changetest builds batches of a change stream, as the postgres-cdc
// source sends them, for the tests of the sinks that apply changes by key
// (internal/changes says what a change means).
package changetest

import (
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Schema is the schema of Batch's batches: a key id, a value v and the
// change columns.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "_op", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "_lsn", Type: arrow.PrimitiveTypes.Int64},
	{Name: "_commit_time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
}, nil)

// Batch builds a batch of Schema from rows of the form "op id v": op "-"
// is a null _op (an upsert), an id that is not an integer ("null") a null
// key, v "-" a null value. Row i gets _lsn 100+i and a null _commit_time.
// The caller releases the batch.
func Batch(mem memory.Allocator, rows ...string) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, Schema)
	defer b.Release()
	for i, r := range rows {
		f := strings.Fields(r)
		if len(f) != 3 {
			panic("changetest.Batch: want \"op id v\", got " + strconv.Quote(r))
		}
		if id, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			b.Field(0).(*array.Int64Builder).Append(id)
		} else {
			b.Field(0).AppendNull()
		}
		appendOrNull(b.Field(1).(*array.StringBuilder), f[2])
		appendOrNull(b.Field(2).(*array.StringBuilder), f[0])
		b.Field(3).(*array.Int64Builder).Append(int64(100 + i))
		b.Field(4).AppendNull()
	}
	return b.NewRecordBatch()
}

func appendOrNull(b *array.StringBuilder, s string) {
	if s == "-" {
		b.AppendNull()
		return
	}
	b.Append(s)
}
