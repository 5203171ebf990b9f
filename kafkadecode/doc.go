// Package kafkadecode decodes Kafka record batches, as they arrive in a
// FetchResponse, straight into Arrow record batches, without creating a Go
// object per record.
//
// A Decoder appends the records of one or more fetched partitions (Append
// or UnsafeAppend) and returns them as one record batch (Flush) with the
// columns partition int32, offset int64, timestamp timestamp[ms, UTC], key
// binary_view, value binary_view (or a struct decoded by a ValueDecoder),
// and headers list<struct<key: utf8, value: binary>>. The topic is schema
// metadata (MetadataKeyTopic): one Decoder serves one topic.
//
// # Ownership and aliasing
//
// Keys and values are BinaryView columns: values of up to 12 bytes are
// inlined in the view, longer ones point into a data buffer without a copy.
// The data buffers are
//   - for uncompressed batches after UnsafeAppend, the caller's fetch bytes
//     themselves: they must stay valid and unmodified until every record
//     batch and array derived from them is released, and Release does not
//     free them;
//   - for uncompressed batches after Append, one private copy of the fetch
//     bytes per Append;
//   - for compressed batches, the buffer the batch was decompressed into.
//
// Private copies, decompression buffers and the Kafka columns' buffers are
// reference counted by the arrays that use them and come back to the
// Decoder for reuse when the last of them is released (or to the
// allocator, once the Decoder is released). A Decoder therefore keeps up
// to a few dozen buffers of its last flushes parked until Release, at most
// WithMaxParkedBytes of them (DefaultMaxParkedBytes, 2 MiB), plus the
// last decompression buffer too large for that bound (one per goroutine
// of WithDecompressConcurrency), which the next Append decompresses into;
// all are accounted to the allocator passed to NewDecoder.
// A key or value column holds only the data buffers its own views point
// into: a column of inline values (keys of up to 12 bytes) holds none.
// With a ValueDecoder, longer keys are copied at Flush into one buffer of
// their own, so a flushed batch keeps no fetch or decompression buffer
// alive at all.
// Holding even a small slice of a record batch keeps a whole fetch
// (or decompressed payload) alive; copy values out (for example with
// array.Concatenate into a fresh array) before retaining them for long.
// Header keys and values are copied. DeadLetter keys and values are copies.
//
// # Pitfalls
//
//   - NextOffset, not the last offset seen, is where to fetch next: it
//     steps over control batches, aborted transactions and compaction gaps.
//     A Progress with Truncated set and Batches == 0 means the fetch size is
//     smaller than one batch: fetch again with a larger limit.
//   - Read committed needs both the broker (fetch with isolation level 1,
//     so it stops at the last stable offset) and the Decoder (ReadCommitted
//     plus the response's aborted-transactions list).
//   - Magic v0/v1 message sets are rejected with *LegacyMagicError.
//   - Header keys are utf8 in the schema but Kafka does not enforce UTF-8;
//     invalid bytes are passed through unchanged.
//   - A Decoder and its ValueDecoder are single-goroutine. Record batches
//     returned by Flush are independent and may move across goroutines.
//   - Rows whose value failed to decode are removed from the value column
//     at Flush, which then copies that column once (array.Concatenate).
//     Records with a null value (tombstones) get a null struct, not a
//     dead letter.
package kafkadecode
