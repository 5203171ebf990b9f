package kafka

import (
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/kafkadecode"
	"github.com/flightline/flightline/transform"
)

// ValueColumns returns a transform.Func that replaces the decoded value
// column (a struct, with ValueDecoder) by its fields as top-level columns,
// so a table gets one column per value field: partition, offset,
// timestamp, key, <value fields...>, headers. It is transform.Flatten of
// the value column (see there for nulls, collisions and ownership); the
// CLI names it builtin:flatten?column=value.
func ValueColumns(mem memory.Allocator) transform.Func {
	return transform.Flatten(kafkadecode.ColValue, mem)
}
