// Package snowflake is Flightline's exactly-once Snowflake sink (kind
// snowflake: on the command line).
//
// # How a batch commits
//
// Snowflake commits the open transaction implicitly before every DDL
// statement, so nothing that runs DDL may sit between a batch's data and
// its checkpoint. A WriteBatch is:
//
//  1. Outside any transaction, once: the checkpoint table
//     (internal/sqlcheckpoint, one row per pipeline and target: pipeline_id,
//     target, checkpoint, epoch, updated_at), the internal stage, and the
//     target table from the Arrow schema (types below) are created if
//     absent.
//  2. BEGIN; Lock (internal/sqlcheckpoint): the writer's epoch is compared
//     with the row's, so a fenced writer fails with flightline.ErrFenced
//     before anything else, its replays included; a batch whose checkpoint
//     is already covered is a replay and writes nothing. The table's
//     columns are checked against the batch (ErrSchemaMismatch naming the
//     column).
//  3. The batch is encoded as Parquet (internal/parquetw, timestamps in
//     their own unit) and PUT, on another session, outside the
//     transaction, to @stage/flightline/<pipeline>-<hash>/e<epoch>/s<n>.parquet:
//     a name fixed by pipeline, target, epoch and sequence, so a retry of
//     the batch overwrites its own file (OVERWRITE = TRUE).
//  4. In the transaction: COPY INTO table FROM @stage/<that file>
//     FILE_FORMAT = (TYPE = PARQUET) MATCH_BY_COLUMN_NAME = CASE_SENSITIVE
//     FORCE = TRUE. The rows_loaded of COPY's result must equal the
//     batch's rows, or the batch fails (ErrConflict) and rolls back.
//  5. Advance (internal/sqlcheckpoint): UPDATE the checkpoint row to
//     checkpoint.Next(last, cp) WHERE pipeline_id = ? AND target = ? AND
//     epoch = ? AND checkpoint = <the one Lock read>. Zero rows changed
//     means a newer writer claimed the target: roll back, ErrFenced
//     (FAILED_PRECONDITION at the Flight boundary); or, with the epoch
//     still the writer's, that another transaction of the same writer (an
//     earlier try of the batch) committed since Lock: ErrConflict, and the
//     retry finds the batch covered (Snowflake's reads take no row lock).
//     COMMIT.
//  6. After the commit, REMOVE the staged file (best effort). A crash
//     leaves at most orphaned files; the next Open of the pipeline removes
//     every file of earlier epochs once its claim has committed (a writer
//     of an earlier epoch still loading one then fails its compare-and-set
//     anyway).
//
// Open creates the checkpoint row if absent with a MERGE in autocommit
// (Snowflake enforces no primary key, and MERGE inside an explicit
// transaction is not what the emulator can run), aborts the transactions
// killed writers of the pipeline left open (dead.go), then raises its
// epoch, which fences every earlier writer, with a compare-and-set in
// autocommit (sqlcheckpoint.Table.ClaimAutocommit): a writer killed while
// claiming leaves no transaction holding the row.
//
// Session and network failures are retried with backoff (Config.RetryFor)
// as a whole batch, from BEGIN: if a COMMIT landed but its answer was lost,
// the retry finds the batch covered by the checkpoint and writes nothing.
//
// # Why not ADBC bulk ingest
//
// The ADBC Snowflake driver's ingest (adbc.OptionKeyIngestTargetTable)
// runs CREATE OR REPLACE TEMPORARY STAGE, then PUT and COPY. CREATE …
// STAGE is DDL: it commits whatever transaction the session had open, so
// the data and a checkpoint UPDATE cannot share one transaction, and a
// crash between the ingest and the checkpoint commit writes the batch
// twice on replay. (On the emulator its ingest also fails: the COPY reads
// the Parquet files as CSV.) This sink does the same PUT and COPY itself,
// with the stage created once beforehand, outside any transaction.
//
// # COPY load metadata and FORCE
//
// Snowflake remembers for 64 days which staged files a table loaded (by
// name and checksum) and silently skips them unless FORCE = TRUE. File
// names here are deterministic, so a batch whose transaction rolled back
// (fenced, crashed, a failed COMMIT) is PUT again under the same name with
// the same content; if the rolled-back COPY had left load metadata behind,
// the retry would load nothing and still advance the checkpoint: lost
// rows. Whether load metadata is transactional is not something the
// emulator can show. FORCE = TRUE removes the question: a file is loaded
// whenever a COPY names it, and duplicates are prevented by the checkpoint
// instead (a batch is only ever COPYed in a transaction that also moves
// the checkpoint past it, after Lock found it not covered). The rows_loaded
// check (step 4) is the second guard: a COPY that loaded fewer rows than
// the batch has never commits.
//
// # Types (Arrow → Snowflake)
//
// See sqlType: integers → NUMBER(p,0) wide enough for the type; floats →
// FLOAT; decimals → NUMBER(p,s); strings → VARCHAR; binaries → BINARY;
// dates → DATE; times → TIME(n); timestamps → TIMESTAMP_NTZ(n), with a zone
// TIMESTAMP_LTZ(n) (n = 0, 3, 6, 9 by unit); lists, structs and maps →
// VARIANT. Dictionaries, durations, intervals, unions and null columns are
// refused with ErrInvalidInput naming the column, before any I/O.
//
// # Errors
//
// internal/snowconn classifies: wrong credentials → ErrUnauthenticated; a
// missing database, schema, warehouse or role → ErrNotFound naming it;
// privileges → ErrPermissionDenied; network, timeouts and lost sessions →
// ErrUnavailable (after the retries); lock timeouts and aborted
// transactions → ErrConflict. Passwords, tokens, keys and passphrases never
// appear in errors or logs.
//
// # Pitfalls
//
//   - A writer killed inside a transaction leaves a detached transaction on
//     Snowflake holding its locks; Snowflake rolls it back after four hours
//     idle. So every transaction the sink begins is named after its
//     pipeline (dead.go), and Open aborts the ones earlier writers of the
//     pipeline left open (SHOW TRANSACTIONS, SYSTEM$ABORT_TRANSACTION)
//     before it claims (TestIntegrationClaimAbortsDeadWritersTransaction).
//     Where that fails (it is best effort), the next writer's UPDATE of the
//     checkpoint row waits at most LOCK_TIMEOUT (snowconn.Config, default
//     60 s) and fails with ErrConflict, which is retried. The test service's
//     emulator also rolls back a session idle for 20 s in a transaction
//     (TestIntegrationDeadWritersTransaction).
//   - A writer whose context is cancelled inside its transaction (the
//     DoPut of a coordinator that died) is not dead: the sink closes the
//     transaction's session without sending another statement on it
//     (Snowflake rolls the transaction back), because the statement it
//     gave up on may still run at the server after anything sent next; a
//     ROLLBACK sent first let an abandoned COPY run in autocommit and
//     commit a batch without its checkpoint
//     (TestIntegrationAbandonedCopyCommitsNothing). Only a transaction
//     whose statements all succeeded is rolled back on its session, with a
//     context the cancellation does not reach (txn.go). database/sql's own rollback on
//     cancel cannot do it: gosnowflake sends ROLLBACK with the cancelled
//     context, so it never leaves the process, and the session used to go
//     back to the pool with the transaction open — the next claim on it ran
//     inside the dead transaction (Snowflake ignores a nested BEGIN) and
//     claims on other sessions waited for its locks
//     (TestIntegrationCancelledWriteReleasesItsTransaction).
//   - Unquoted names are upper-cased, as Snowflake does; Arrow field names
//     become quoted column names, case kept.
//   - gosnowflake binds a []byte as an array unless the sf.DataTypeBinary
//     marker precedes it; the checkpoint is bound that way (conn.go).
package snowflake
