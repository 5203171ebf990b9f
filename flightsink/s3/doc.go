// Package s3 is Flightline's at-least-once S3 sink: every batch becomes
// one snappy-compressed Parquet object at a key derived from the batch's
// checkpoints, so a replay of the same batch after a crash overwrites the
// object it wrote before instead of adding a second one.
//
// It is the s3: kind with commit=at-least-once, for stores that do not
// honour If-None-Match: * on PutObject. The kind's default is exactly-once
// on any source: flightsink/objsink's protocol on flightsink/objsink/s3.
//
//	sink, err := s3.New(ctx, s3.Config{Location: "my-bucket/events",
//		Storage: map[string]string{"AWS_REGION": "eu-west-1"}})
//
// # Layout
//
// The location is "bucket/prefix", without a scheme. Pipeline p writes
// under bucket/prefix/<p.ID>/ (bucket/prefix/<p.Target>/<p.ID>/ when p has
// a target):
//
//	bucket/prefix/<pipeline>/_common_metadata                     the pipeline's schema (0-row Parquet)
//	bucket/prefix/<pipeline>/orders!2F0~00000000000000012000.parquet
//	bucket/prefix/<pipeline>/orders!2F1~00000000000000009000.parquet
//
// Read the directory as one dataset, e.g. pyarrow.dataset.dataset(
// "bucket/prefix/<pipeline>", format="parquet", filesystem=S3FileSystem(…)):
// readers skip names starting with '_' or '.'.
//
// # Key scheme
//
// The object of a batch with checkpoint cp, written after checkpoint prev
// (the last checkpoint this Writer saw, zero-row batches included; nil for
// the first batch of a Writer), is named ObjectName(prev, cp):
//
//   - cp in the mergeable Positions form: the partitions whose position
//     differs between prev and cp — the partitions the batch advanced; all of
//     cp's when prev is nil — in key order, each as the escaped partition key
//     ('/' and other unsafe bytes become !XX), '~', and the position cp
//     reached in it, as 20 digits so names sort by position. Fields are
//     joined with '~'. A Kafka batch (rows of one partition) is thus named by
//     its partition and its end offset: orders!2F3~00000000000000012000.
//   - a name longer than 200 bytes: '~' and the SHA-256 (hex) of the
//     canonical Positions encoding of those partitions' positions.
//   - an opaque checkpoint: '~' and the SHA-256 of cp.
//
// The name records where the batch ended, not where it started. A replay
// that starts at a different position but ends at the same one (the Kafka
// source steps over transaction markers with 0-row batches whose timing
// varies) still hits the same key. Overwriting never loses rows: a Writer
// writes contiguously from where its source started, and its source starts
// at a position some earlier batch ended at (the acknowledged checkpoint the
// coordinator advised it of), so the rows of an overwritten object that the
// new one lacks are in objects named by earlier ends.
//
// Never rotate on wall-clock time: nothing in a name depends on time.
//
// # What the source must provide
//
// Replays are absorbed, and every record lands exactly once, only when the
// source cuts the same batch boundaries when it reads the same records
// again from a given start position (deterministic boundaries), and starts
// each read at a position where a batch it emitted before ended. The
// generator source does both. The Kafka source does for batches cut by
// BatchRows or BatchBytes and announces its start positions with a 0-row
// batch; batches cut by the BatchWait timer depend on timing, so a replay
// across such a boundary may write records twice (each still at least
// once). Give BatchWait a value well above the time a partition takes to
// fill a batch when duplicates matter, and read deduplicating by the Kafka
// (partition, offset) columns when they must be impossible.
//
// # Guarantee
//
// At-least-once (Guarantee). The sink writes data only: Checkpoint and
// Open always return a nil checkpoint, so the coordinator reads the source
// from the source's own committed position — for Kafka the consumer group's
// offsets, which the coordinator's advisory commit moves only after the
// sink acknowledged the batches. That commit is the resume authority for
// this sink. A crash between an object's write and the group commit replays
// the batches since the last group commit; with deterministic boundaries
// they overwrite their own objects.
//
// Open fences nothing. Two writers of one pipeline both write; with the same
// source positions they write the same keys.
//
// # Schema
//
// The pipeline's schema is the _common_metadata object in its directory: a
// 0-row snappy Parquet file of the first batch's schema (the convention
// Spark and pyarrow use for a dataset's schema), created with put-if-absent
// before the first data object, so concurrent writers agree on one. Open
// reads it. Schemas are compared as readers see them: the Arrow schema
// derived from the Parquet schema (names, types, nullability, in order;
// metadata ignored), so two batch schemas that store alike are alike
// (timestamp[ms] and timestamp[us] both store as microseconds;
// binary_view and string_view store as binary and string). A batch that
// would store differently fails with flightline.ErrSchemaMismatch before
// anything is written. Delete the object to change a pipeline's schema on
// purpose.
//
// # Errors
//
//   - wrong credentials: flightline.ErrUnauthenticated, naming the storage
//     options to check (reported by Open);
//   - a missing bucket: flightline.ErrNotFound, naming the bucket (by Open);
//   - a location with a scheme: flightline.ErrInvalidInput showing
//     bucket/prefix (by New);
//   - a failed upload leaves no object: single PUTs are atomic, and an
//     object above the multipart threshold (32 MiB by default, Multipart)
//     is uploaded in parts and the upload aborted on any failure, so neither
//     a partial object nor orphaned parts remain.
//
// Pitfalls:
//   - Buckets with versioning keep every overwritten replay as an old
//     version; add a lifecycle rule expiring noncurrent versions.
//   - A Writer is used by one goroutine at a time; the Sink by any number.
package s3
