// Package rowenc encodes Arrow record batches as text rows: JSON lines
// (keys in column order) and CSV. The stdout and file sinks share it.
//
// Encoders append to a bytes.Buffer; on error the buffer may hold part of
// the batch, which the caller drops. An Encoder is not safe for concurrent
// use.
package rowenc

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/csv"

	"github.com/flightline/flightline"
)

// Encoder appends the rows of a batch to dst.
type Encoder interface {
	Encode(dst *bytes.Buffer, rec arrow.RecordBatch) error
}

// JSONL prints one JSON object per row, keys in column order, HTML
// characters unescaped.
type JSONL struct {
	keys    [][]byte // `"name":`
	names   []string
	scratch bytes.Buffer
	enc     *json.Encoder
}

// NewJSONL returns a JSON-lines encoder for batches of schema sc.
func NewJSONL(sc *arrow.Schema) *JSONL {
	e := &JSONL{}
	e.enc = json.NewEncoder(&e.scratch)
	e.enc.SetEscapeHTML(false)
	for _, f := range sc.Fields() {
		e.scratch.Reset()
		_ = e.enc.Encode(f.Name) // a string always encodes
		k := bytes.TrimRight(e.scratch.Bytes(), "\n")
		e.keys = append(e.keys, append(append([]byte(nil), k...), ':'))
		e.names = append(e.names, f.Name)
	}
	return e
}

// Encode implements Encoder.
func (e *JSONL) Encode(dst *bytes.Buffer, rec arrow.RecordBatch) error {
	cols := rec.Columns()
	for i := range int(rec.NumRows()) {
		if err := e.AppendRow(dst, cols, i); err != nil {
			return err
		}
		dst.WriteByte('\n')
	}
	return nil
}

// AppendRow appends row i of cols, the columns of a batch of the encoder's
// schema in its order, as one JSON object without a newline. Equal values
// always encode to equal bytes (the Kafka sink's record keys rely on it).
func (e *JSONL) AppendRow(dst *bytes.Buffer, cols []arrow.Array, i int) error {
	dst.WriteByte('{')
	for j, col := range cols {
		if j > 0 {
			dst.WriteByte(',')
		}
		dst.Write(e.keys[j])
		e.scratch.Reset()
		if err := e.enc.Encode(col.GetOneForMarshal(i)); err != nil {
			return fmt.Errorf("%w: column %s row %d as JSON: %v", flightline.ErrInvalidInput, e.names[j], i, err)
		}
		dst.Write(bytes.TrimRight(e.scratch.Bytes(), "\n"))
	}
	dst.WriteByte('}')
	return nil
}

// CSV prints RFC 4180 CSV with arrow-go's writer: a header line before the
// first batch, nulls as empty fields.
type CSV struct {
	buf bytes.Buffer
	w   *csv.Writer
	err error // a column CSV cannot hold
}

// NewCSV returns a CSV encoder for batches of schema sc. A schema with a
// column of a type CSV cannot hold (a struct, a map, a union, a dictionary,
// a view type) makes every Encode fail with ErrInvalidInput naming the
// column: arrow-go's writer panics on such a column.
func NewCSV(sc *arrow.Schema) *CSV {
	e := &CSV{}
	for _, f := range sc.Fields() {
		if !csvType(f.Type) {
			e.err = fmt.Errorf("%w: column %q: type %s cannot be written as CSV (write it as JSON lines or Parquet)", flightline.ErrInvalidInput, f.Name, f.Type)
			return e
		}
	}
	e.w = csv.NewWriter(&e.buf, sc, csv.WithHeader(true), csv.WithNullWriter(""))
	return e
}

// csvType reports whether arrow-go's CSV writer takes a column of type dt
// (arrow/csv transformer.go; it panics on any other).
func csvType(dt arrow.DataType) bool {
	switch dt := dt.(type) {
	case *arrow.BooleanType,
		*arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type,
		*arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type,
		*arrow.Float16Type, *arrow.Float32Type, *arrow.Float64Type,
		*arrow.StringType, *arrow.LargeStringType, *arrow.Date32Type, *arrow.Date64Type,
		*arrow.TimestampType, *arrow.Decimal128Type, *arrow.Decimal256Type,
		*arrow.BinaryType, *arrow.LargeBinaryType, *arrow.FixedSizeBinaryType,
		arrow.ExtensionType, *arrow.NullType:
		return true
	case arrow.ListLikeType:
		return csvType(dt.Elem())
	}
	return false
}

// Encode implements Encoder.
func (e *CSV) Encode(dst *bytes.Buffer, rec arrow.RecordBatch) error {
	if e.err != nil {
		return e.err
	}
	e.buf.Reset()
	if err := e.w.Write(rec); err != nil {
		return fmt.Errorf("%w: as CSV: %v", flightline.ErrInvalidInput, err)
	}
	if err := e.w.Flush(); err != nil {
		return fmt.Errorf("CSV: %w", err)
	}
	dst.Write(e.buf.Bytes())
	return nil
}
