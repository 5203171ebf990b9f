package kafkadecode

import "fmt"

// Isolation selects which transactional records a Decoder returns.
type Isolation int8

const (
	// ReadUncommitted returns every data record, including those of
	// aborted transactions (Kafka's read_uncommitted).
	ReadUncommitted Isolation = iota
	// ReadCommitted drops the batches of aborted transactions, using the
	// aborted-transactions list of the fetch response (read_committed).
	// The fetch itself must also have been made with isolation level 1 so
	// that the broker stops at the last stable offset.
	ReadCommitted
)

// DefaultMaxDecompressedBytes bounds what one batch may decompress to.
const DefaultMaxDecompressedBytes = 256 << 20

// DefaultMaxParkedBytes bounds the freed buffers a Decoder keeps for reuse.
const DefaultMaxParkedBytes = 2 << 20

// Option configures a Decoder. Options are validated once, in NewDecoder.
type Option func(*config)

type config struct {
	topic           string
	skipCRC         bool
	isolation       Isolation
	maxDecompressed int
	value           ValueDecoder
	failFast        bool
	capacityHint    int
	maxParked       int

	decompressConcurrency int
}

func defaultConfig() config {
	return config{maxDecompressed: DefaultMaxDecompressedBytes, capacityHint: 1024, maxParked: DefaultMaxParkedBytes}
}

func (c *config) validate() error {
	if c.maxDecompressed <= 0 || c.maxDecompressed > maxViewOffset {
		return fmt.Errorf("%w: max decompressed bytes %d not in (0, %d]", ErrInvalidOption, c.maxDecompressed, maxViewOffset)
	}
	if c.isolation != ReadCommitted && c.isolation != ReadUncommitted {
		return fmt.Errorf("%w: isolation %d", ErrInvalidOption, c.isolation)
	}
	if c.maxParked < 0 {
		return fmt.Errorf("%w: negative max parked bytes", ErrInvalidOption)
	}
	if c.decompressConcurrency < 0 || c.decompressConcurrency > MaxDecompressConcurrency {
		return fmt.Errorf("%w: decompress concurrency %d not in [0, %d]", ErrInvalidOption, c.decompressConcurrency, MaxDecompressConcurrency)
	}
	if c.capacityHint < 0 {
		return fmt.Errorf("%w: negative capacity hint", ErrInvalidOption)
	}
	return nil
}

// WithTopic records the topic name in the output schema's metadata under
// MetadataKeyTopic. A Decoder serves one topic; partitions vary per Append.
func WithTopic(topic string) Option { return func(c *config) { c.topic = topic } }

// WithSkipCRC disables CRC32C validation. Use it only when the bytes were
// already validated (for example re-reading a verified log segment).
func WithSkipCRC() Option { return func(c *config) { c.skipCRC = true } }

// WithIsolation sets the isolation level; the default is ReadUncommitted.
func WithIsolation(level Isolation) Option { return func(c *config) { c.isolation = level } }

// WithMaxDecompressedBytes bounds the decompressed size of one batch, a
// guard against decompression bombs. The default is
// DefaultMaxDecompressedBytes; the upper limit is 2 GiB - 1 because Arrow
// view offsets are int32.
func WithMaxDecompressedBytes(n int) Option { return func(c *config) { c.maxDecompressed = n } }

// WithValueDecoder decodes each record value with vd into a struct column
// named "value" (instead of the raw binary view column). Records whose value
// fails to decode become DeadLetters, or stop Append under WithFailFast.
// The Decoder owns vd from then on: vd must not be shared with another
// Decoder or used concurrently.
func WithValueDecoder(vd ValueDecoder) Option { return func(c *config) { c.value = vd } }

// WithFailFast makes Append stop at the first record whose value fails to
// decode, returning a *RecordError, instead of dead-lettering it.
func WithFailFast() Option { return func(c *config) { c.failFast = true } }

// WithCapacityHint sets the number of rows column buffers are first sized
// for. Later flushes size buffers from the previous flush's row count.
func WithCapacityHint(rows int) Option { return func(c *config) { c.capacityHint = rows } }

// WithMaxParkedBytes bounds the bytes of freed buffers (column buffers,
// decompression buffers, Append's input copies) the Decoder keeps for reuse
// once the record batches using them are released; a buffer that does not
// fit goes back to the allocator. The default is DefaultMaxParkedBytes; 0
// keeps none. Buffers still referenced by record batches are not counted:
// they are bounded by what the caller holds. Besides these bytes, the one
// most recently freed buffer larger than n is kept (unless n is 0): a
// decompression arena, one Append's decompressed batches, so that the next
// Append reuses it instead of allocating as much afresh.
func WithMaxParkedBytes(n int) Option { return func(c *config) { c.maxParked = n } }

// MaxDecompressConcurrency bounds WithDecompressConcurrency.
const MaxDecompressConcurrency = 64

// WithDecompressConcurrency decompresses the compressed batches of one
// Append (one fetch of one partition) on up to n goroutines, the caller's
// included, before their records are decoded in order: a fetch of many
// compressed batches then decodes in less wall time on several cores. The
// output, the errors and Progress are the same as without it; memory is
// too (every decompressed batch of an Append is held until the record
// batch is released, either way), in up to n buffers. 0 or 1 (the
// default) decompresses each batch on the caller's goroutine as its
// records are decoded. An Append with fewer than two compressed batches
// runs on the caller's goroutine alone.
func WithDecompressConcurrency(n int) Option {
	return func(c *config) { c.decompressConcurrency = n }
}
