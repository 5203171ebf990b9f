// Package snowtest gates and supports the Snowflake integration tests,
// which run against the fakesnow emulator that
// integration/services/svc/fakesnow.sh starts.
//
// What the emulator cannot prove is listed in docs/sinks/snowflake.md;
// tests that work around one of its differences say so where they do.
package snowtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flightline/flightline/internal/snowconn"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// Database and Schema are where the tests write.
const (
	Database = "FLIGHTLINE"
	Schema   = "TEST"
)

var setupOnce sync.Map // port → error

// Config returns a connection to the emulator from FLIGHTLINE_SNOWFLAKE_HOST
// and _PORT (skipping, or failing under FLIGHTLINE_REQUIRE_SERVICES=1, when
// unset), with the test database and schema created. The emulator accepts
// any credentials.
func Config(tb testing.TB) snowconn.Config {
	tb.Helper()
	host := servicetest.Need(tb, "FLIGHTLINE_SNOWFLAKE_HOST", "Snowflake emulator (fakesnow)")
	port, err := strconv.Atoi(servicetest.Need(tb, "FLIGHTLINE_SNOWFLAKE_PORT", "Snowflake emulator (fakesnow)"))
	if err != nil {
		tb.Fatalf("FLIGHTLINE_SNOWFLAKE_PORT: %v", err)
	}
	c := snowconn.Config{
		Account: "fakesnow", User: "flightline", Password: "fakesnow-password",
		Database: Database, Schema: Schema, Warehouse: "TEST_WH",
		Host: host, Port: port, Protocol: "http",
		// The emulator answers a server error after about a minute of the
		// driver's retries by default; keep failures quick.
		Timeout: 30 * time.Second, Retries: 1,
	}
	v, _ := setupOnce.LoadOrStore(port, &sync.Once{})
	var setupErr error
	v.(*sync.Once).Do(func() {
		boot := c
		boot.Database, boot.Schema = "", ""
		boot.Database = "SNOWFLAKE" // any name: the emulator does not check
		db, err := snowconn.Open(&boot)
		if err != nil {
			setupErr = err
			return
		}
		defer db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, q := range []string{
			`CREATE DATABASE IF NOT EXISTS ` + Database,
			`CREATE SCHEMA IF NOT EXISTS ` + Database + `.` + Schema,
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				setupErr = fmt.Errorf("%s: %w", q, err)
				return
			}
		}
	})
	if setupErr != nil {
		tb.Fatalf("snowtest: set up the emulator: %v", setupErr)
	}
	return c
}

// DB opens a gosnowflake handle on the test schema, closed at clean-up.
func DB(tb testing.TB) *sql.DB {
	tb.Helper()
	c := Config(tb)
	db, err := snowconn.Open(&c)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// Name returns a fresh lower-case identifier with the given prefix.
func Name(prefix string) string {
	return fmt.Sprintf("%s_%d_%06d", prefix, time.Now().UnixNano()%1e9, rand.IntN(1e6))
}

// Python returns the interpreter of the emulator's venv, which has
// snowflake-connector-python: the independent client tests read back with.
func Python(tb testing.TB) string {
	tb.Helper()
	return servicetest.Need(tb, "FLIGHTLINE_SNOWFLAKE_PYTHON", "fakesnow's Python (snowflake-connector-python)")
}

const readScript = `
import json, sys, snowflake.connector
host, port, db, schema, query = sys.argv[1:6]
c = snowflake.connector.connect(user="reader", password="x", account="fakesnow", host=host, port=int(port),
    protocol="http", database=db, schema=schema, login_timeout=30, network_timeout=60)
cur = c.cursor()
try:
    cur.execute(query)
except snowflake.connector.errors.ProgrammingError as e:
    if e.errno == 2003:  # table does not exist
        print("[]"); sys.exit(0)
    raise
def plain(v):
    if isinstance(v, (bytes, bytearray)):
        return v.decode("utf-8", "backslashreplace")
    return v
print(json.dumps([[plain(v) for v in r] for r in cur.fetchall()], default=str))
`

// Query runs query through snowflake-connector-python, not gosnowflake nor
// the code under test, and returns its rows as JSON values (numbers,
// strings, null; BINARY decoded as UTF-8; other values as their Python
// str()). A missing table gives no rows.
func Query(tb testing.TB, query string) [][]any {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rows, err := QueryContext(ctx, Python(tb), Config(tb), query)
	if err != nil {
		tb.Fatal(err)
	}
	return rows
}

// QueryContext is Query with a context and without a testing.TB: python is
// the interpreter (Python), c the emulator (Config).
func QueryContext(ctx context.Context, python string, c snowconn.Config, query string) ([][]any, error) {
	cmd := exec.CommandContext(ctx, python, "-c", readScript, c.Host, strconv.Itoa(c.Port), Database, Schema, query)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		return nil, fmt.Errorf("snowtest: python query %q: %v\n%s", query, err, stderr)
	}
	var rows [][]any
	dec := json.NewDecoder(strings.NewReader(string(out)))
	dec.UseNumber()
	if err := dec.Decode(&rows); err != nil {
		return nil, fmt.Errorf("snowtest: python output %q: %v", out, err)
	}
	return rows, nil
}

// IDs reads the int64 "id" column of table with the independent client.
func IDs(tb testing.TB, table string) []int64 {
	tb.Helper()
	rows := Query(tb, `SELECT "id" FROM `+table)
	out := make([]int64, 0, len(rows))
	for _, r := range rows {
		n, err := r[0].(json.Number).Int64()
		if err != nil {
			tb.Fatalf("snowtest: id %v: %v", r[0], err)
		}
		out = append(out, n)
	}
	return out
}

// SQLIDs reads the int64 "id" column of table with plain SQL through
// gosnowflake (no sink code): quicker than IDs, whose Python start-up costs
// seconds, for suites that read back often. A missing table has no ids.
func SQLIDs(tb testing.TB, db *sql.DB, table string) []int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT "id" FROM `+table)
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return nil
		}
		tb.Fatalf("snowtest: read ids of %s: %v", table, err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			tb.Fatalf("snowtest: read ids of %s: %v", table, err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("snowtest: read ids of %s: %v", table, err)
	}
	return out
}

// Stage is a stage name fresh for this test process. The emulator has no
// REMOVE, so staged files stay; a stage per process keeps the sink's LIST
// (orphan clean-up at Open) short.
var Stage = fmt.Sprintf("FLIGHTLINE_TEST_STAGE_%d_%06d", time.Now().Unix()%1e6, rand.IntN(1e6))
