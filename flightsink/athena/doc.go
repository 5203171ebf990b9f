// Package athena is the sink of Athena tables over S3: Parquet part files
// committed exactly once to S3 by objsink (If-None-Match: * commit
// records, flightsink/objsink/s3), each table registered in the AWS Glue
// Data Catalog by schemasink/glue, so that one sink yields a table Athena
// (or Trino, Spark) can query without a crawler.
//
// Layout, for a table T (the pipeline's target, or the default table) of
// a sink on s3://BUCKET/PREFIX:
//
//	PREFIX/T/data/part-<seq>.parquet               the table's LOCATION: data only
//	PREFIX/T/data/<col>=<v>/part-<seq>-<i>.parquet  … partitioned by value
//	PREFIX/T/data/<col>_day=YYYY-MM-DD/…            … partitioned by day
//	PREFIX/T/_flightline/…                          objsink's commit records, staging, snapshots
//
// Athena reads every object under a table's LOCATION; the commit records,
// staged (uncommitted) data and epoch markers are outside it, so Athena
// and any other reader of LOCATION sees published part files only.
//
// Before a batch with rows is staged (objsink.BeforeCommit), the sink
// makes the Glue table match it: created on the first batch, new nullable
// columns added, and, when partitioned, every partition the batch writes
// into registered (BatchCreatePartition), or, with partition projection
// (day partitions only), nothing per batch: the table's projection.*
// parameters describe every day. So a batch is committed only after its
// table and partitions exist; a crash in between leaves at most an empty
// partition registered.
//
// The pairing is checked: Open compares an existing Glue table with the
// sink's settings (location, partition keys, Parquet SerDe, projection
// parameters) and refuses the pipeline (flightline.ErrFailedPrecondition)
// naming every difference.
//
// Guarantee: exactly once. A batch's rows are in exactly one published
// part file once its commit record is written; the acknowledgement comes
// after that. Visibility: a reader listing LOCATION sees a batch when its
// part files are published, right after its commit; a writer that dies in
// between leaves them to the next Open of any pipeline of the table. A
// partitioned batch's part files are published one after another, so a
// query may see some of a batch's partitions before the others (Hive
// tables have no multi-file commit; the iceberg sink has one).
//
// Pitfalls:
//   - A table name is the pipeline's target: lowercase letters, digits
//     and '_' (Glue's and Athena's rule); anything else is refused.
//   - Partitions are registered by the process that writes into them and
//     remembered in memory; a table dropped and re-created by the sink
//     lacks the partitions of earlier batches (MSCK REPAIR TABLE, or
//     partition projection, restores them).
//   - Partition projection shows no day outside its range and no null
//     day (__HIVE_DEFAULT_PARTITION__).
package athena
