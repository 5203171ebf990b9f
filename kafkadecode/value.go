package kafkadecode

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// ValueDecoder decodes one record value into one row of a struct column.
// JSONDecoder and AvroDecoder implement it; users may supply their own.
//
// Contract: AppendValue appends exactly one row to b, also when it returns
// an error (typically by appending nulls for whatever it did not fill). The
// Decoder relies on this to keep columns aligned and removes the rows of
// failed records before it returns a record batch. value aliases the fetch
// buffer: it is valid only during the call and must not be retained.
// A ValueDecoder is used by one goroutine at a time.
type ValueDecoder interface {
	// Type is the struct type of the decoded value column. It must not
	// change over the decoder's life.
	Type() *arrow.StructType
	// AppendValue decodes value into a new row of b, a builder of Type().
	AppendValue(b *array.StructBuilder, value []byte) error
}

// DeadLetter is a record whose value failed to decode. Key and Value are
// copies owned by the DeadLetter (nil when the record's were null), so
// dead letters outlive the fetch buffer and the record batches.
type DeadLetter struct {
	Partition int32
	Offset    int64
	Timestamp int64 // milliseconds since the Unix epoch
	Key       []byte
	Value     []byte
	Err       error // why decoding failed; wraps the decoder's typed error
}
