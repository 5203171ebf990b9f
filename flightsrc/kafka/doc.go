// Package kafka is Flightline's Kafka source: each topic is a stream, read
// from raw Fetch responses decoded straight into Arrow by kafkadecode, and
// served over Flight DoGet by flightsrc.Server like any other Source.
//
// # Fetch path
//
// kgo's consumer is not used for records: it would build a kgo.Record per
// record. A kgo client (no consumer) answers metadata and admin requests
// (kadm: committed offsets, list offsets, commits); each Reader runs a
// fetcher goroutine that sends plain, sessionless kmsg.FetchRequests to
// every partition leader, concurrently, one per leader per round, with the
// topic id (Fetch v13+) and the leader epoch. A partition's record bytes go,
// as they came off the wire (kgo allocates a fresh buffer per response), to
// one kafkadecode.Decoder per partition with UnsafeAppend, a piece of at
// most DecodeBytes (whole record batches) at a time: key and value columns
// are views into the fetch buffer or into the piece's decompressed
// records, nothing is copied per record.
// The fetcher advances by reading batch headers, so it never waits for
// decoding; it stops while MaxBufferedBytes of fetched bytes wait for Next
// (back-pressure), which bounds memory together with the coordinator's
// window. Every buffer's bound: docs/sources/kafka.md#memory.
//
// Errors: NOT_LEADER / FENCED_LEADER_EPOCH / UNKNOWN_TOPIC_ID and other
// retriable codes refresh metadata and retry; OFFSET_OUT_OF_RANGE applies
// auto_offset_reset, logged at error level, and emits a 0-row batch with
// the new position; an unreachable broker is retried with backoff (each
// attempt logged with the broker address) until UnavailableAfter, then Next
// fails with flightline.ErrUnavailable and the coordinator restarts from
// the sink's checkpoint. Resolving start positions retries retriable
// protocol errors (COORDINATOR_NOT_AVAILABLE from a broker still creating
// __consumer_offsets, LEADER_NOT_AVAILABLE on a new topic) the same way.
//
// # Resume and checkpoints
//
// The checkpoint is checkpoint.Positions: "<topic>/<partition>" → next
// offset, for every partition the Reader serves. On Read, a partition
// starts at the ticket's checkpoint; else at the group's committed offset;
// else at auto_offset_reset. Positions that did not come from the
// checkpoint are pinned first with a 0-row batch, so a restart resumes at
// exactly the same place even under "latest". Commit (advisory) commits the
// acknowledged offsets to the consumer group; the sink's checkpoint stays
// the resume authority.
//
// # Batches and determinism
//
// A batch holds rows of one partition. Per partition, a batch ends after
// BatchRows rows or, in the raw format, after the row that brings its keys
// plus values to BatchBytes, counted from the partition's start position;
// its checkpoint position is its last offset + 1. Given the same start
// position, such batches have the same rows and the same position whatever
// the fetch sizes or timing. Batches cut by the BatchWait timer (a quiet
// partition) or by an offset reset are not deterministic: they hold what
// had arrived, and their position steps over trailing control records and
// aborted transactions. A sink needing deterministic object keys should key
// on (partition, first offset, last offset) of the rows, which the Positions
// of other partitions in the same checkpoint do not affect.
//
// # Consumer groups and rebalances
//
// With group membership (the default) one kgo group member per (group,
// topic) joins with the cooperative-sticky balancer and never fetches; the
// Readers serve its assignment. Any assignment change ends open Readers
// with ErrRebalanced (retryable, wraps flightline.ErrConflict), so the
// coordinator re-opens the sink and reads after its merged checkpoint. A
// revocation is held until the Reader of the revoked partitions is closed
// and the pipeline has re-opened its sink (fencing its old writer), and a
// new assignment is served only by a Reader whose sink checkpoint was read
// after it (the coordinator calls Prepare, which waits for the assignment,
// before it opens the sink, so a clean start serves its first assignment
// without a restart): together these
// keep a partition's rows from being written by two instances, provided
// the sink merges per-partition positions across its instances' commits
// (docs/sources/kafka.md). One pipeline per (group, topic) per process.
//
// # Pitfalls
//
//   - Batches returned by Next point into fetch buffers; holding one slice
//     keeps its whole fetch response alive.
//   - Never keep rows across flushes as a plain slice: array.Concatenate of
//     binary_view columns keeps every data buffer of its inputs, so a
//     carried slice re-joined with each flush chains every fetch buffer of
//     the partition (issue 20). The carry is trimmed to the buffers its rows
//     use (trimmedSlice). Memory bounds: docs/sources/kafka.md#memory.
//   - Dead letters (undecodable values, corrupt batches) go to the
//     DeadLetters handler at least once; without one they fail the Reader.
//   - A Reader is used by one goroutine; Close releases everything it holds.
package kafka
