package kafkadecode

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers branch on them with errors.Is; the typed errors
// below wrap them and carry the partition and offset involved.
var (
	// ErrCorruptBatch means a record batch is structurally invalid: a bad
	// length, a record that overruns its batch, an unknown codec, or a
	// payload that fails to decompress.
	ErrCorruptBatch = errors.New("kafkadecode: corrupt record batch")

	// ErrCRCMismatch means a batch's CRC32C does not match its contents.
	ErrCRCMismatch = errors.New("kafkadecode: record batch CRC32C mismatch")

	// ErrLegacyMagic means the input holds a magic v0 or v1 message set,
	// which this package does not decode. Upgrade the topic's message
	// format (Kafka ≥ 0.11 writes magic v2) or consume it with kgo.
	ErrLegacyMagic = errors.New("kafkadecode: legacy message format (magic v0/v1) not supported")

	// ErrTooLarge means a batch decompresses to more than the configured
	// maximum, or the input exceeds what Arrow view offsets can address.
	ErrTooLarge = errors.New("kafkadecode: batch too large")

	// ErrBadRecord marks a record whose value could not be decoded. Such
	// records become DeadLetter entries unless fail-fast is on, in which
	// case Append returns a *RecordError wrapping it.
	ErrBadRecord = errors.New("kafkadecode: bad record")

	// ErrUnsupportedType means a schema contains a type the value
	// decoders cannot produce. It is returned by constructors only.
	ErrUnsupportedType = errors.New("kafkadecode: unsupported type")

	// ErrInvalidOption means an option value was rejected by a constructor.
	ErrInvalidOption = errors.New("kafkadecode: invalid option")

	// ErrValueDecoderContract means a ValueDecoder did not append exactly
	// one row for a record. It is a programming error in the ValueDecoder.
	ErrValueDecoderContract = errors.New("kafkadecode: value decoder did not append exactly one row")

	// ErrSchemaRegistry means a schema-registry lookup failed. It is
	// retryable: the decoder stops at the record instead of dead-lettering it.
	ErrSchemaRegistry = errors.New("kafkadecode: schema registry lookup failed")
)

// CorruptBatchError reports a structurally invalid batch.
type CorruptBatchError struct {
	Partition  int32
	BaseOffset int64
	Reason     string
	Err        error // underlying cause, if any (e.g. from a codec)
}

func (e *CorruptBatchError) Error() string {
	s := fmt.Sprintf("kafkadecode: corrupt record batch (partition %d, base offset %d): %s", e.Partition, e.BaseOffset, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns ErrCorruptBatch and the underlying cause.
func (e *CorruptBatchError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorruptBatch, e.Err}
	}
	return []error{ErrCorruptBatch}
}

// CRCError reports a batch whose CRC32C does not match.
type CRCError struct {
	Partition  int32
	BaseOffset int64
	Want, Got  uint32
}

func (e *CRCError) Error() string {
	return fmt.Sprintf("kafkadecode: CRC32C mismatch in batch (partition %d, base offset %d): header says %#08x, computed %#08x",
		e.Partition, e.BaseOffset, e.Want, e.Got)
}

// Unwrap returns ErrCRCMismatch.
func (e *CRCError) Unwrap() error { return ErrCRCMismatch }

// LegacyMagicError reports a magic v0/v1 message set.
type LegacyMagicError struct {
	Partition int32
	Offset    int64
	Magic     int8
}

func (e *LegacyMagicError) Error() string {
	return fmt.Sprintf("kafkadecode: legacy message format magic v%d at partition %d, offset %d is not supported", e.Magic, e.Partition, e.Offset)
}

// Unwrap returns ErrLegacyMagic.
func (e *LegacyMagicError) Unwrap() error { return ErrLegacyMagic }

// RecordError reports one record whose value failed to decode, returned by
// Append in fail-fast mode or when the value decoder's error is retryable.
type RecordError struct {
	Partition int32
	Offset    int64
	Err       error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("kafkadecode: record at partition %d, offset %d: %v", e.Partition, e.Offset, e.Err)
}

// Unwrap returns ErrBadRecord and the decoder's error.
func (e *RecordError) Unwrap() []error { return []error{ErrBadRecord, e.Err} }

// IsRetryable reports whether err is worth retrying unchanged: today, only
// schema-registry failures are. Corrupt data, CRC mismatches and bad records
// fail the same way on every attempt.
func IsRetryable(err error) bool { return errors.Is(err, ErrSchemaRegistry) }
