package ipcguard

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/flighterr"
)

// ValidateBatch runs arrow-go's full validation on every column of rec,
// recursively: offsets non-negative, monotonic and inside their buffers,
// validity and data buffers long enough, null counts true, dictionary
// indices in range, child lengths, UTF-8 strings. It also checks that every
// column has the batch's row count. The error wraps
// flightline.ErrInvalidInput and names the column and the rule broken.
//
// It lives here, below both sides, so that sinks (flightsink.ValidateBatch
// is it), the coordinator and transform services (transform/flighttransform)
// all check a batch from outside the process the same way.
//
// Sinks rely on it: their writers read every value, and arrow-go's
// accessors and Parquet and IPC writers index buffers without checks, so an
// inconsistent batch would make them panic or write a file no reader
// accepts. flightsink.Server.DoPut calls it on every batch a client sends, before the
// Writer sees it; in-process callers whose batches come from outside the
// process (a decoded stream, a C Data import) call it themselves: the
// coordinator does when it moves batches from a remote source into an
// in-process sink. Batches built in-process with arrow-go's builders are
// valid by construction and are not checked again. It costs one pass over
// the offsets and bitmaps, and over the bytes of string columns (UTF-8).
func ValidateBatch(rec arrow.RecordBatch) (err error) {
	defer func() {
		// arrow-go's validators are meant not to panic on any input; if one
		// does, the batch is still the cause.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: batch failed validation: %v", flightline.ErrInvalidInput, r)
		}
	}()
	n := rec.NumRows()
	if n < 0 {
		return fmt.Errorf("%w: batch has %d rows", flightline.ErrInvalidInput, n)
	}
	for i, col := range rec.Columns() {
		if int64(col.Len()) != n {
			return fmt.Errorf("%w: column %d (%s) has %d rows, the batch %d", flightline.ErrInvalidInput,
				i, flighterr.Clip(rec.Schema().Field(i).Name), col.Len(), n)
		}
	}
	if err := array.ValidateRecordFull(rec); err != nil {
		return fmt.Errorf("%w: invalid batch: %s", flightline.ErrInvalidInput, flighterr.Clip(err.Error()))
	}
	return nil
}
