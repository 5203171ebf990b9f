// Package bigquery is a Flightline sink writing Google BigQuery tables:
// at-least-once with idempotent writes, through a MERGE on key columns.
//
// # Guarantee
//
// BigQuery has no transaction that covers a Storage Write API stream, so a
// batch's rows and its checkpoint cannot become visible in one commit with
// the write itself. The sink is therefore at-least-once (Guarantee), made
// idempotent by a key: every row has one (one or more columns, the Key
// option, required by New: a sink without a key is refused there, not at
// the first batch), and a batch lands through a MERGE on it, so a replayed
// batch updates its rows to the values they already have instead of adding
// copies. Checkpoint and Open return nil, as the flightsink contract asks
// of an at-least-once sink: the source's own position decides where a
// pipeline resumes.
//
// # Write path
//
// For each batch:
//
//  1. The target is created from the first batch's Arrow schema when
//     absent (see Types), and the checkpoint table (CheckpointTable) at
//     the first Open.
//  2. The rows go to a staging table whose name is fixed by (pipeline,
//     target, checkpoint) — the batch's sequence position — so a replay
//     rewrites the same table: it is dropped and created again (with a
//     24-hour expiration, so one orphaned by a crash goes away), then
//     written through the Storage Write API: a pending stream, the rows
//     appended as protobuf messages (descriptor derived from the Arrow
//     schema; the wire format is written straight into one reused buffer,
//     with no per-value allocation), finalize, batch commit. Only the
//     last row of each key goes in (see below).
//  3. One script: BEGIN TRANSACTION; the MERGE of the staging table into
//     the target on the key (WHEN MATCHED THEN UPDATE every column, WHEN
//     NOT MATCHED THEN INSERT); the replacement (DELETE, INSERT) of the checkpoint row of
//     (pipeline, target); COMMIT TRANSACTION. The checkpoint row never
//     runs ahead of the data.
//  4. The staging table is dropped.
//
// Duplicate keys inside one batch: the last row by position wins. The sink
// keeps only that row of each key when it encodes the batch (a MERGE whose
// source holds a key twice is an error in BigQuery; and the emulator's
// MERGE accepts only a plain table as its source, which rules out doing it
// with ROW_NUMBER() in the MERGE). Rows with a NULL key column are refused
// (they would never match, so every replay would add them again).
//
// The checkpoint row is what the sink has merged (Committed reads it). A
// batch whose checkpoint it covers is a replay and is skipped without
// writing, so a source that resumes from an older position than the sink
// has reached does not set rows back to older values while it catches up.
// The sink does not fence: two writers of one pipeline both merge, and the
// later MERGE of a key wins.
//
// # Types
//
// Arrow → BigQuery, exactly: int8/16/32/64 and uint8/16/32 → INT64;
// float32/64 → FLOAT64; bool → BOOL; utf8, large_utf8, utf8_view →
// STRING; binary, large_binary, binary_view, fixed_size_binary → BYTES;
// date32 → DATE; timestamp with a time zone in s, ms or µs → TIMESTAMP (an
// instant: it reads back in UTC); struct → RECORD; list → REPEATED (of a
// scalar or of a struct of scalars: one level of nesting). A NULL list is
// stored as an empty ARRAY (BigQuery does not tell them apart) and a list
// holding a NULL element is refused at write time (ErrInvalidInput naming
// the column). Refused with ErrSchemaMismatch (INVALID_ARGUMENT) naming the
// column: uint64 (does not fit), timestamps without a zone (DATETIME is
// not mapped yet) or in ns (finer than BigQuery's µs), decimals, times,
// maps, large and fixed-size lists, lists of lists and nesting deeper than
// a list of structs. Non-nullable Arrow columns become REQUIRED. A batch
// must match an existing target's columns by name, type and order.
//
// # Auth and errors
//
// Application default credentials by default; Config.CredentialsFile for
// a service-account key file; Config.EmulatorEndpoint and EmulatorGRPC for
// an emulator's HTTP endpoint and gRPC address without authentication.
// Credentials are never logged.
// Permission denied → ErrPermissionDenied (PERMISSION_DENIED); a missing
// dataset → ErrNotFound naming it, from New; a schema the table cannot hold
// → ErrSchemaMismatch (INVALID_ARGUMENT) naming the column; quota and 5xx
// errors are retried with exponential backoff (Retry), then
// ErrUnavailable (UNAVAILABLE).
//
// # Why not the ADBC BigQuery driver
//
// The ADBC BigQuery driver (arrow-adbc v1.11.0) has no bulk ingest, so a
// batch would go in as row-by-row INSERTs, and no endpoint override, so it
// cannot reach an emulator to be tested here. Google's client
// (cloud.google.com/go/bigquery, with its managedwriter for the Storage
// Write API) has both.
//
// What only the emulator has seen is listed in docs/sinks/bigquery.md.
package bigquery
