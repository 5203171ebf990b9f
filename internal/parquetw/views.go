package parquetw

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/internal/viewcopy"
)

// Parquet has no view types. Top-level binary_view and string_view columns
// (the Kafka source's key and raw value) are stored as binary and string:
// the values are copied once into contiguous buffers (internal/viewcopy).
// Sinks that write Parquet treat StoredSchema as the schema of what they
// store.

// StoredSchema is sc with its top-level view types replaced by the types
// their Parquet columns have; sc itself (the same pointer) when nothing
// changes. See viewcopy.Schema.
func StoredSchema(sc *arrow.Schema) *arrow.Schema { return viewcopy.Schema(sc) }

// Storable returns rec with its top-level view columns copied from mem into
// their stored types, as a new batch of schema sc (StoredSchema of rec's),
// or rec Retained when sc is rec's own schema. The caller releases the
// result. See viewcopy.Copy.
func Storable(mem memory.Allocator, rec arrow.RecordBatch, sc *arrow.Schema) arrow.RecordBatch {
	return viewcopy.Copy(mem, rec, sc)
}
