// Package changes reads batches of a change stream: rows of a table plus
// the change columns that the postgres-cdc source adds (_op, _lsn,
// _commit_time). Sinks that apply changes by key (the PostgreSQL and
// ADBC sinks' upsert mode, the Delta sink's merge mode, the Kafka sink's
// keyed mode) share it, so a change means the same thing in every one.
//
// The rules, said once:
//   - _op is utf8: "insert", "update" or "delete". A null _op, or a batch
//     without the column, is an upsert (insert or update) of the row.
//     Any other value is refused (flightline.ErrInvalidInput).
//   - _lsn and _commit_time are read by nobody here and never written to
//     the target.
//   - Within one batch the last change of a key wins (Last); a primary-key
//     update arrives as a delete of the old key then an upsert of the new.
//   - Key columns may not be null: a null key names no row.
package changes

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/flightline/flightline"
)

// The change columns, and the values of _op.
const (
	ColOp         = "_op"
	ColLSN        = "_lsn"
	ColCommitTime = "_commit_time"

	OpInsert = "insert"
	OpUpdate = "update"
	OpDelete = "delete"
)

// Columns are the change columns, never written to a target.
var Columns = []string{ColOp, ColLSN, ColCommitTime}

// IsChangeColumn reports whether name is one of Columns.
func IsChangeColumn(name string) bool { return slices.Contains(Columns, name) }

// Split returns rec without the change Columns and its _op column (nil when
// rec has none). data shares rec's columns; the caller releases data. op
// is not retained: it lives as long as rec. A batch without data columns,
// or whose _op is not utf8, wraps flightline.ErrInvalidInput.
func Split(rec arrow.RecordBatch) (data arrow.RecordBatch, op *array.String, err error) {
	var fields []arrow.Field
	var cols []arrow.Array
	for i, f := range rec.Schema().Fields() {
		switch {
		case f.Name == ColOp:
			s, ok := rec.Column(i).(*array.String)
			if !ok {
				return nil, nil, fmt.Errorf("%w: column %s has type %s, want utf8 (%s, %s, %s)",
					flightline.ErrInvalidInput, f.Name, f.Type, OpInsert, OpUpdate, OpDelete)
			}
			op = s
		case IsChangeColumn(f.Name):
		default:
			fields = append(fields, f)
			cols = append(cols, rec.Column(i))
		}
	}
	if len(fields) == 0 {
		return nil, nil, fmt.Errorf("%w: a batch of changes without data columns", flightline.ErrInvalidInput)
	}
	md := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &md), cols, rec.NumRows()), op, nil
}

// IsDelete reports whether row i of op (from Split; nil: no _op column)
// is a delete. A value other than the three ops, checked by Check, is
// not a delete.
func IsDelete(op *array.String, i int) bool {
	return op != nil && op.IsValid(i) && op.Value(i) == OpDelete
}

// Check refuses an _op value that is not one of the three (null is an
// upsert), naming the first such row.
func Check(op *array.String) error {
	if op == nil {
		return nil
	}
	for i := 0; i < op.Len(); i++ {
		if !op.IsValid(i) {
			continue
		}
		switch op.Value(i) {
		case OpInsert, OpUpdate, OpDelete:
		default:
			return fmt.Errorf("%w: row %d: %s %q: want %s, %s or %s",
				flightline.ErrInvalidInput, i, ColOp, op.Value(i), OpInsert, OpUpdate, OpDelete)
		}
	}
	return nil
}

// KeyColumns returns the indices in rec's schema of the key columns, in
// key's order. A key column missing from the batch wraps
// flightline.ErrSchemaMismatch; a key column of a type Keys cannot compare
// (nested, dictionary, float) wraps flightline.ErrInvalidInput.
func KeyColumns(sc *arrow.Schema, key []string) ([]int, error) {
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: no key columns", flightline.ErrInvalidInput)
	}
	idx := make([]int, len(key))
	for j, k := range key {
		ii := sc.FieldIndices(k)
		if len(ii) == 0 {
			var names []string
			for _, f := range sc.Fields() {
				names = append(names, f.Name)
			}
			return nil, fmt.Errorf("%w: key column %q is not in the batch (columns %s)",
				flightline.ErrSchemaMismatch, k, strings.Join(names, ", "))
		}
		if len(ii) > 1 {
			return nil, fmt.Errorf("%w: key column %q appears %d times in the batch", flightline.ErrInvalidInput, k, len(ii))
		}
		if !keyType(sc.Field(ii[0]).Type) {
			return nil, fmt.Errorf("%w: key column %q has type %s, which cannot be a key (want an integer, string, binary, boolean, date, time, timestamp or decimal)",
				flightline.ErrInvalidInput, k, sc.Field(ii[0]).Type)
		}
		idx[j] = ii[0]
	}
	return idx, nil
}

func keyType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW,
		arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW, arrow.FIXED_SIZE_BINARY,
		arrow.BOOL, arrow.DATE32, arrow.DATE64, arrow.TIME32, arrow.TIME64, arrow.TIMESTAMP,
		arrow.DECIMAL128, arrow.DECIMAL256:
		return true
	}
	return false
}

// Keys returns each row's key as a string that is equal for two rows
// exactly when their key values are equal: the key columns' values
// appended in order, each length-prefixed. Values compare within a type:
// an int32 1 and an int64 1 give different keys, so the batches and the
// table rows compared must have the same key types (the sinks' schema
// checks see to that). A null key value wraps flightline.ErrInvalidInput
// naming the row. idx is from KeyColumns.
func Keys(rec arrow.RecordBatch, idx []int) ([]string, error) {
	n := int(rec.NumRows())
	out := make([]string, n)
	var buf []byte
	for i := 0; i < n; i++ {
		buf = buf[:0]
		for _, c := range idx {
			a := rec.Column(c)
			if a.IsNull(i) {
				return nil, fmt.Errorf("%w: row %d: key column %q is null", flightline.ErrInvalidInput, i, rec.Schema().Field(c).Name)
			}
			buf = appendValue(buf, a, i)
		}
		out[i] = string(buf)
	}
	return out, nil
}

func appendValue(buf []byte, a arrow.Array, i int) []byte {
	switch a := a.(type) {
	case *array.Int8:
		return binary.BigEndian.AppendUint64(buf, uint64(a.Value(i)))
	case *array.Int16:
		return binary.BigEndian.AppendUint64(buf, uint64(a.Value(i)))
	case *array.Int32:
		return binary.BigEndian.AppendUint64(buf, uint64(a.Value(i)))
	case *array.Int64:
		return binary.BigEndian.AppendUint64(buf, uint64(a.Value(i)))
	case *array.Uint8:
		return binary.BigEndian.AppendUint64(buf, uint64(a.Value(i)))
	case *array.Uint16:
		return binary.BigEndian.AppendUint64(buf, uint64(a.Value(i)))
	case *array.Uint32:
		return binary.BigEndian.AppendUint64(buf, uint64(a.Value(i)))
	case *array.Uint64:
		return binary.BigEndian.AppendUint64(buf, a.Value(i))
	case *array.String:
		return appendBytes(buf, a.Value(i))
	case *array.LargeString:
		return appendBytes(buf, a.Value(i))
	case *array.Binary:
		return appendBytes(buf, string(a.Value(i)))
	case *array.LargeBinary:
		return appendBytes(buf, string(a.Value(i)))
	}
	// The other key types: their canonical text, unambiguous within a type.
	return appendBytes(buf, a.ValueStr(i))
}

// appendBytes appends s's length, then s: integers are fixed-width and
// variable values length-prefixed, so two columns' values never run into
// each other.
func appendBytes(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// Last returns, for rows whose keys are keys (from Keys), the rows that
// hold each key's last change of the batch, in the order of those rows.
// Applying those rows alone (a delete deletes the key, anything else
// replaces its row) leaves a target as applying every row in order would.
func Last(keys []string) []int {
	last := make(map[string]int, len(keys))
	for i, k := range keys {
		last[k] = i
	}
	rows := make([]int, 0, len(last))
	for i, k := range keys {
		if last[k] == i {
			rows = append(rows, i)
		}
	}
	return rows
}
