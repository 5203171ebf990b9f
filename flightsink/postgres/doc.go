// Package postgres is Flightline's exactly-once PostgreSQL sink.
//
// Each WriteBatch is one transaction:
//
//  1. SELECT instance, epoch, checkpoint FROM __flightline_checkpoints
//     WHERE pipeline_id = $1 AND target = $2 — every instance's row of the
//     (pipeline, target); a different epoch in the writer's instance row
//     than the writer's means a newer Open of that instance: ErrFenced.
//  2. A checkpoint already committed (checkpoint.Replayed against the
//     checkpoint merged over the instances) ends the transaction with
//     nothing written; a partition another instance moved since the
//     writer's Open is ErrConflict.
//  3. The target table is created from the Arrow schema if missing, or its
//     columns are checked against the schema (ErrSchemaMismatch naming the
//     column and both types) — before any row is sent.
//  4. COPY target (cols) FROM STDIN (FORMAT binary), the stream encoded
//     directly from the Arrow columns (internal/pgarrow). In upsert mode
//     (Mode, Key) the batch is a stream of changes: it is COPYed into a
//     temporary stage table, and the last change of each key in the batch
//     is applied, DELETE for an _op of "delete", INSERT … ON CONFLICT (key)
//     DO UPDATE otherwise; the change columns (_op, _lsn, _commit_time)
//     are not written.
//  5. The rows of step 1 again FOR UPDATE (instance order), its checks
//     again, then UPDATE the instance's row with checkpoint.Next (positions
//     merged per key) WHERE the epoch is still the writer's (zero rows:
//     ErrFenced); COMMIT.
//
// Open creates its instance's row if absent (INSERT … ON CONFLICT DO
// NOTHING), then bumps its epoch in a transaction of its own. Because
// WriteBatch holds the row lock from step 5 until it commits, a writer's
// batch either commits before the new Open reads the checkpoint (and is
// covered by it) or fails with ErrFenced. The checkpoint statements are
// internal/sqlcheckpoint's Instances. Without the Instance option the sink
// is the unnamed instance (the empty name), whose rows a checkpoint table
// from before instances holds: Open migrates such a table in place.
//
// Errors are classified into flightline's sentinels (internal/pgerr):
// unreachable server → ErrUnavailable, SQLSTATE 28P01/28000 →
// ErrUnauthenticated, 42501 → ErrPermissionDenied, data errors (22xxx,
// 23xxx) → ErrInvalidInput. Passwords never appear in errors or logs.
//
// Pitfalls:
//   - pgconn's CopyFrom can return (cancelled, server error) while its
//     goroutine still reads the COPY stream, i.e. the batch: the stream is
//     closed, and the read in progress waited for, before WriteBatch
//     returns and the caller may release the batch.
//   - If COMMIT itself fails with a lost connection, the outcome is unknown;
//     the error is ErrUnavailable and the next Open's checkpoint tells the
//     truth (a replay of the batch is then a no-op).
//   - Identifiers from users (tables, columns) only reach SQL through
//     pgx.Identifier.Sanitize; values only as parameters.
//
// The type map is documented in internal/pgarrow and docs/sinks/postgres.md.
package postgres
