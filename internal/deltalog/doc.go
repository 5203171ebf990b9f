// Package deltalog implements the parts of the Delta Lake transaction
// protocol Flightline needs: reading a table's state (_last_checkpoint, a
// classic Parquet checkpoint, then the JSON commits after it), appending
// commits with put-if-absent, and writing classic checkpoints. It is shared
// by the Delta sink (flightsink/delta) and the Delta source
// (flightsrc/delta).
//
// What it supports is stated by Snapshot.CheckRead and CheckWrite: reader
// versions 1–3 with the timestampNtz (and harmless vacuumProtocolCheck)
// reader features; appends to unpartitioned tables at writer versions ≤ 2
// or 7 with appendOnly, domainMetadata, timestampNtz. Column mapping,
// deletion vectors, v2 checkpoints, type widening, check constraints,
// generated and identity columns are refused with ErrUnsupportedFeature
// naming the feature, whether the protocol lists it or only the metadata
// enables it (MetadataFeatures).
//
// Writers commit the protocol ProtocolFor returns with any metaData: the
// table's protocol widened by every feature the metadata uses (invariants
// for a NOT NULL field, timestampNtz, ...), as Spark and delta-rs refuse a
// table whose metadata uses a feature its protocol does not list.
//
// Pitfalls:
//   - Never write a commit file with anything but Table.Commit: log
//     entries must be put-if-absent, or two writers can both "win" a version.
//   - A Snapshot is a value owned by one goroutine; Clone it to share.
//   - Commit errors other than ErrVersionExists leave the outcome unknown:
//     re-read the version before concluding anything.
//   - A LeanSnapshot's files loaded from a checkpoint have no Stats and it
//     holds none of that checkpoint's tombstones: WriteCheckpoint streams
//     them from that checkpoint file, which must not be deleted while the
//     snapshot lives (if it is, the next checkpoint goes without them).
//   - A StreamedSnapshot's Files are only the files the commits since its
//     checkpoint added: use FileCount and EachFile, never len(Files) or a
//     range over it, for the table's files. Its next checkpoint needs the
//     checkpoint it was loaded from (it fails without it: load anew).
//   - A log cleanup (LogFiles) must never overtake a writer: put-if-absent
//     of a deleted version's file succeeds, and the commit is invisible.
package deltalog
