// Package kafka is Flightline's exactly-once Kafka sink.
//
// Each WriteBatch is one Kafka transaction of the pipeline's transactional
// producer (transactional.id = prefix + pipeline id, and "|" + target for
// an explicit target; stable across restarts):
//
//  1. BeginTransaction.
//  2. One record per row to the target topic: the value from the binary
//     (binary, large_binary, binary_view) "value" column, or with
//     ValueFormat json the row as a JSON object; the key from an optional
//     "key" column, or from Config.Key's columns (keyed change mode:
//     _op = "delete" is a tombstone, see Config.Key); headers from an
//     optional "headers" column (list<struct<key: utf8, value: binary>>,
//     the kafkadecode schema), the partition from an optional int32
//     column (PartitionColumn) or the default partitioner. Other columns
//     are ignored in raw format.
//  3. One checkpoint record on the compacted checkpoint topic: key
//     CheckpointKey (the pipeline id, or [pipeline id, target]), value the
//     checkpoint merged with the last one (checkpoint.Next), header
//     flightline.target.
//  4. Flush, then EndTransaction(TryCommit). Any failure before the commit
//     aborts the transaction: read_committed consumers see all of it or
//     none of it.
//
// Open creates the checkpoint topic (cleanup.policy=compact) if missing,
// checks the target topic, starts the producer — its InitProducerID bumps
// the producer epoch, which fences every older producer of the pipeline
// and completes its open transaction — and then reads the checkpoint: the
// last record with the pipeline's key in its partition of the checkpoint
// topic, read_committed, up to the high watermark of that moment.
// Checkpoint waits for open transactions at most 2 s, then answers from
// below the last stable offset (a dead writer's transaction would hold it
// for the transaction timeout). A zombie's
// next produce or commit fails with ProducerFenced / InvalidProducerEpoch,
// reported as flightline.ErrFenced (gRPC FAILED_PRECONDITION).
//
// Validation happens before anything is produced: a batch without a usable
// value column (or with a key, headers or partition column of the wrong
// type) wraps flightline.ErrSchemaMismatch and ErrInvalidInput; in keyed
// mode a missing key column wraps ErrSchemaMismatch, a null key or an
// unknown _op ErrInvalidInput; a row whose
// record would exceed the topic's max.message.bytes, or names a partition
// the topic lacks, fails the batch with ErrInvalidInput naming the row.
// Replays (checkpoint.Replayed) produce no data: a transaction holding the
// unchanged checkpoint record, which fails if the writer is fenced. A 0-row batch is a
// transaction holding the checkpoint record alone.
//
// Errors: a missing topic the broker does not auto-create → ErrNotFound
// (unless Config.CreateTopics); SASL failures → ErrUnauthenticated; ACL
// denials → ErrPermissionDenied; a broker that goes away mid-transaction →
// the transaction is aborted (by the broker's transaction timeout or the
// next Open if the abort cannot reach it) and the error is ErrUnavailable,
// retryable after reopening.
//
// Pitfalls:
//   - The pipeline id is the identity: two pipelines with the same id fence
//     each other, whatever their targets.
//   - Never add partitions to the checkpoint topic: a pipeline's checkpoint
//     is read from the partition its id hashes to.
//   - If EndTransaction itself fails, the outcome is unknown; the writer
//     refuses further batches (ErrUnavailable) and the next Open's
//     checkpoint tells the truth.
//   - Records alias the batch's buffers; the batch is retained until every
//     record's promise has fired.
//   - Reading the checkpoint waits for transactions that other pipelines
//     have open on the same checkpoint partition (at most one batch each,
//     or the transaction timeout for a crashed writer).
package kafka
