package flightsink

import (
	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flightline/flightline/internal/ipcguard"
)

// ValidateBatch runs arrow-go's full validation on every column of rec,
// recursively (offsets, bitmaps, null counts, dictionary indices, child
// lengths, UTF-8), and checks that every column has the batch's row count.
// The error wraps flightline.ErrInvalidInput and names the column and the
// rule broken.
//
// Server.DoPut calls it on every batch a client sends, before the Writer
// sees it; in-process callers whose batches come from outside the process
// (a decoded stream, a C Data import) call it themselves: the coordinator
// does when it moves batches from a remote source into an in-process sink.
// Batches built in-process with arrow-go's builders are valid by
// construction and are not checked again. It costs one pass over the
// offsets and bitmaps, and over the bytes of string columns (UTF-8).
func ValidateBatch(rec arrow.RecordBatch) error { return ipcguard.ValidateBatch(rec) }
