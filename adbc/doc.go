// Package adbc reaches databases through ADBC (Arrow Database Connectivity):
// one API, Arrow in and Arrow out, for every database that has an ADBC
// driver. It is the layer the ADBC sink (flightsink/adbc) and source
// (flightsrc/adbc) stand on, and the one a warehouse connector such as a
// Snowflake source can share.
//
// Open loads a driver and probes what it can do (Caps): transactions, bulk
// ingest, and the SQL dialect (placeholder style, identifier quoting).
// Drivers come three ways (Config.Driver):
//
//   - "flightsql": the Go-native Flight SQL driver, linked in; Config.URI is
//     the server's grpc:// or grpc+tls:// address.
//   - an absolute path to a C driver's shared library
//     (libadbc_driver_postgresql.so) or to an ADBC driver manifest (.toml);
//   - a bare name ("postgresql"), looked up by the ADBC driver manager as a
//     manifest <name>.toml in the directories of ADBC_DRIVER_PATH, the user's
//     and then the system's ADBC configuration directories.
//
// C drivers load through the ADBC driver manager, which needs cgo: in a
// binary built with CGO_ENABLED=0 only "flightsql" opens, and any other
// driver fails with an error wrapping ErrNeedsCgo.
//
// A Conn is one database connection, used by one goroutine at a time. In a
// transaction (Begin) every statement runs in it until Commit or Rollback.
// Exec and QueryRow bind their arguments as a one-row Arrow batch; Query
// returns an Arrow record reader; Ingest writes a batch with the driver's
// bulk ingest, or with a prepared INSERT where the driver has none.
package adbc
