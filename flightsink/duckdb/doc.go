// Package duckdb is a Flightline sink writing to a DuckDB database file
// (or a MotherDuck database, "md:NAME"), exactly-once.
//
// It is the ADBC sink (flightsink/adbc) on DuckDB's own ADBC driver: the
// entry point duckdb_adbc_init of DuckDB's shared library, libduckdb.so,
// loaded by the ADBC driver manager. No DuckDB code is linked into the
// binary; the library is found at run time (Library, else the environment
// variable FLIGHTLINE_DUCKDB_LIB, else the copy `integration/services/
// services.sh up duckdb` caches under ~/.cache/flightline), and a binary
// without it fails with ErrNoLibrary, naming where it looked.
//
// Each batch is one DuckDB transaction: the rows (the driver's Arrow bulk
// ingest), then the checkpoint row of the checkpoint table, compared and
// set on the writer's epoch and on the checkpoint it read; a rollback
// discards both. A table missing at the first batch is created from the
// batch's Arrow schema in that transaction; a nullable column a later batch
// adds is added to the table (ALTER TABLE … ADD COLUMN) in its batch's
// transaction.
//
// Fencing. DuckDB lets one process open a file for writing: a second
// process is refused by the file's lock, and New then fails with ErrLocked
// (errors.Is ErrFailedPrecondition; gRPC FailedPrecondition). Inside one
// process every Sink on a file shares one database (DuckDB corrupts a file
// opened twice by one process), and writers are fenced by the checkpoint
// table's epochs as in the PostgreSQL sink: the newest Open of a pipeline
// wins, and an older writer's batch fails with ErrFenced. DuckDB has no row
// locks; of two transactions that update one checkpoint row the later fails
// with a write-write conflict (ErrConflict), and the compare-and-set refuses
// what a conflict does not catch.
//
// MotherDuck. A path "md:" or "md:NAME" opens a MotherDuck database through
// DuckDB's motherduck extension, which DuckDB downloads on first use and
// which reads its token from the environment (motherduck_token). New refuses
// an md: path without that variable (ErrUnauthenticated). This has not run
// against the service: the extension cannot be downloaded where Flightline
// is tested.
package duckdb
