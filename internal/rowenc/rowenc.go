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
	}
	return e
}

// Encode implements Encoder.
func (e *JSONL) Encode(dst *bytes.Buffer, rec arrow.RecordBatch) error {
	cols := rec.Columns()
	for i := range int(rec.NumRows()) {
		dst.WriteByte('{')
		for j, col := range cols {
			if j > 0 {
				dst.WriteByte(',')
			}
			dst.Write(e.keys[j])
			e.scratch.Reset()
			if err := e.enc.Encode(col.GetOneForMarshal(i)); err != nil {
				return fmt.Errorf("%w: column %s row %d as JSON: %v", flightline.ErrInvalidInput, rec.ColumnName(j), i, err)
			}
			dst.Write(bytes.TrimRight(e.scratch.Bytes(), "\n"))
		}
		dst.WriteString("}\n")
	}
	return nil
}

// CSV prints RFC 4180 CSV with arrow-go's writer: a header line before the
// first batch, nulls as empty fields.
type CSV struct {
	buf bytes.Buffer
	w   *csv.Writer
}

// NewCSV returns a CSV encoder for batches of schema sc.
func NewCSV(sc *arrow.Schema) *CSV {
	e := &CSV{}
	e.w = csv.NewWriter(&e.buf, sc, csv.WithHeader(true), csv.WithNullWriter(""))
	return e
}

// Encode implements Encoder.
func (e *CSV) Encode(dst *bytes.Buffer, rec arrow.RecordBatch) error {
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
