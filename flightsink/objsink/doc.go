// Package objsink is the exactly-once sink for stores that have a
// create-if-absent primitive: local files (link(2)), and, on the same
// protocol, object stores (GCS ifGenerationMatch=0, Azure If-None-Match: *,
// S3 If-None-Match: *) and SFTP (hardlink@openssh.com). A Backend gives the
// store's few operations; the protocol here is the same for all.
//
// Layout of a target (pipeline.Target, "default" when empty) under the
// sink's root:
//
//	<root>/<target>/part-<seq>.<ext>                the data of commit <seq>
//	<root>/<target>/<col>=<v>/part-<seq>-<i>.<ext>  … partitioned (Config.PartitionBy)
//	<root>/<target>/_flightline/commits/<seq>.json  the commit records
//	<root>/<target>/_flightline/staging/…           data not yet committed
//	<root>/<target>/_flightline/snapshots/<seq>.json what the records up to <seq> say
//
// Readers (pyarrow.dataset, DuckDB, Spark) skip names starting with '_' or
// '.', so they see the part files only. With DataDir the part files go
// under <root>/<target>/<dir>/ (the partition directories below it), and
// the bookkeeping stays at <root>/<target>/_flightline/, outside it: a
// reader given <dir> (an Athena table's LOCATION, which Athena reads
// whole) sees the part files only, without relying on the '_' rule.
//
// Commit protocol, per batch:
//  1. The batch is encoded (Parquet, JSON lines or CSV) and checked
//     (schema) before any I/O.
//  2. It is staged under _flightline/staging/ and made durable (fsync).
//  3. The writer reads the commit records after the last it has seen: a
//     record of its pipeline with its own or a newer epoch fences it
//     (ErrFenced); one of an older epoch that landed after its Open breaks
//     it (ErrConflict).
//  4. It creates the record <seq>.json for seq = the highest seen + 1 with
//     create-if-absent. This is the commit point: the record names the
//     pipeline, the writer's epoch, the checkpoint, the schema and the part
//     file. When the name is taken (another pipeline committed to the
//     target), it goes back to 3 with the next number. Sequence numbers are
//     therefore dense, and every writer examines every record before it
//     can commit after it.
//  5. It publishes the staged data as part-<seq>.<ext> (link, or a
//     server-side copy; create-if-absent, so a repeat is harmless) and
//     removes the staged object. A partitioned batch stages one part file
//     per partition in step 2, named by its one record in step 4.
//
// A BeforeCommit hook runs between steps 1 and 2, once per batch (or
// group) with rows: whatever it makes true (a catalog's partitions) holds
// before the batch can be committed.
//
// Open claims a pipeline by committing a record without data (an epoch
// marker) whose epoch is one above every epoch the pipeline's records
// hold; an older writer's next commit examines it and is fenced, its
// replays included. Open also finishes step 5 of any record whose part
// file is missing (a writer that died between 4 and 5), so a reader sees
// every committed batch once the pipeline (or any pipeline of the target)
// is reopened, and removes staged objects no record names that are older
// than StaleAfter (a writer that died before 4: nothing a reader picks up).
//
// Before its first commit, Open probes a Backend that is a Prober (S3,
// whose compatible servers do not all honour If-None-Match: *): a store
// that lets a second create-if-absent of one key succeed is refused with
// flightline.ErrFailedPrecondition, since the protocol's commit point
// rests on that primitive.
//
// The checkpoint of a pipeline is read back from what was published: the
// Next-merge of its records' checkpoints in sequence order. Checkpoint
// reads the records and fences nothing.
//
// Cost: records are dense and never change, so nobody lists them: a reader
// of the records after seq reads seq+1, seq+2, … up to the first missing
// one. A commit reads the records since its writer's last; Checkpoint
// those since the process's last look (a summary per target is kept in
// memory); Open those after the newest snapshot, a summary of every
// record up to its number that Open writes once it has published every
// record up to it (the newest three are kept). A snapshot is a shortcut
// only: without one, the records are read from the first.
//
// Pitfalls:
//   - A reader that lists the target between steps 4 and 5 does not see
//     that batch yet. Unpartitioned, it never sees part of one (one part
//     file per batch); partitioned, it may see some of a batch's part
//     files while they are linked one after another.
//   - The first Open of a target in a process reads every record since
//     the last Open's snapshot: a pipeline that ran for days without a
//     restart pays for its days once.
//   - The local backend fsyncs the staged file, the record and the
//     directories it links into; a full disk is ErrUnavailable, and
//     nothing of the batch is committed.
package objsink
