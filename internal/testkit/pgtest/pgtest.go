// Package pgtest gates and supports the PostgreSQL integration tests.
package pgtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/flightline/flightline/internal/testkit/servicetest"
	"github.com/jackc/pgx/v5"
)

// DSN returns the DSN of the test cluster from FLIGHTLINE_PG_DSN. Without
// it the test is skipped, or fails when FLIGHTLINE_REQUIRE_SERVICES=1 (as in
// `make test`), so integration tests never quietly stop running.
func DSN(tb testing.TB) string {
	tb.Helper()
	dsn := servicetest.Need(tb, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	return dsn
}

// Conn opens a plain pgx connection to the test cluster, closed at cleanup.
// Tests use it to read back what a sink wrote, independently of the sink.
func Conn(tb testing.TB) *pgx.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, DSN(tb))
	if err != nil {
		tb.Fatalf("connect to test PostgreSQL: %v", err)
	}
	tb.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// Name returns a fresh lower-case identifier with the given prefix.
func Name(prefix string) string {
	return fmt.Sprintf("%s_%d_%06d", prefix, time.Now().UnixNano()%1e9, rand.IntN(1e6))
}

// Exec runs sql on c and fails the test on error.
func Exec(tb testing.TB, c *pgx.Conn, sql string, args ...any) {
	tb.Helper()
	if _, err := c.Exec(context.Background(), sql, args...); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// NeedLogical skips the test unless the cluster runs with
// wal_level=logical (logical replication, the postgres-cdc source), or
// fails it under FLIGHTLINE_REQUIRE_SERVICES=1, like a missing service.
func NeedLogical(tb testing.TB, c *pgx.Conn) {
	tb.Helper()
	var wal string
	if err := c.QueryRow(context.Background(), `SHOW wal_level`).Scan(&wal); err != nil {
		tb.Fatalf("SHOW wal_level: %v", err)
	}
	if wal == "logical" {
		return
	}
	msg := "the test PostgreSQL runs with wal_level=" + wal + ", not logical: `integration/services/services.sh restart postgres` applies it"
	if os.Getenv("FLIGHTLINE_REQUIRE_SERVICES") == "1" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}
