//go:build cgo

package adbc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/internal/testkit/adbctest"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

type dbCase struct {
	name    string
	cfg     func(t *testing.T) adbc.Config
	dialect string
	vendor  string
}

var cases = []dbCase{
	{"postgresql", func(t *testing.T) adbc.Config { return adbctest.PostgresConfig(t) }, adbc.Postgres, "PostgreSQL"},
	{"sqlite", func(t *testing.T) adbc.Config { c, _ := adbctest.SQLiteConfig(t); return c }, adbc.SQLite, "SQLite"},
}

func batch(mem memory.Allocator, from, to int64) arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprint("n", i))
	}
	return b.NewRecordBatch()
}

func count(t *testing.T, c *adbc.Conn, tbl adbc.Table) int64 {
	t.Helper()
	var n int64
	found, err := c.QueryRow(context.Background(), "SELECT count(*) FROM "+tbl.Quoted(), []any{&n})
	require.NoError(t, err)
	require.True(t, found)
	return n
}

// TestIntegrationDrivers: the probe finds transactions, bulk ingest and
// the dialect; statements bind arguments; ingest and a checkpoint update
// commit or roll back together; Exec counts changed rows (the fencing
// compare-and-set rests on it).
func TestIntegrationDrivers(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			db := adbctest.Open(t, tc.cfg(t))
			caps := db.Caps()
			require.Equal(t, tc.dialect, caps.Dialect, "%+v", caps)
			// Read from the driver's (C) memory, and kept after it is freed.
			require.Equal(t, tc.vendor, caps.Vendor)
			require.True(t, caps.Transactions)
			require.True(t, caps.BulkIngest)
			c, err := db.Conn(ctx)
			require.NoError(t, err)
			defer c.Close()

			tbl := adbc.Table{Name: pgtest.Name("adbc_drv")}
			kv := adbc.Table{Name: tbl.Name + "_kv"}
			_, err = c.Exec(ctx, "CREATE TABLE "+kv.Quoted()+" (k TEXT PRIMARY KEY, v BIGINT, b "+map[string]string{adbc.Postgres: "bytea", adbc.SQLite: "BLOB"}[tc.dialect]+")")
			require.NoError(t, err)
			_, err = c.Exec(ctx, "INSERT INTO "+kv.Quoted()+" (k, v, b) VALUES ("+caps.Placeholder(1)+", "+caps.Placeholder(2)+", "+caps.Placeholder(3)+")", "a", int64(1), []byte{0, 1, 2})
			require.NoError(t, err)

			// Rolled back: neither the created table nor the update stays.
			require.NoError(t, c.Begin(ctx))
			rec := batch(mem, 0, 10)
			_, err = c.Ingest(ctx, tbl, rec, true)
			rec.Release()
			require.NoError(t, err)
			n, err := c.Exec(ctx, "UPDATE "+kv.Quoted()+" SET v = v + 1 WHERE k = "+caps.Placeholder(1), "a")
			require.NoError(t, err)
			require.Equal(t, int64(1), n)
			require.NoError(t, c.Rollback(ctx))
			sc, err := c.TableSchema(ctx, tbl)
			require.NoError(t, err)
			require.Nil(t, sc, "the rolled-back CREATE must leave no table")

			// Committed: both.
			require.NoError(t, c.Begin(ctx))
			rec = batch(mem, 0, 10)
			_, err = c.Ingest(ctx, tbl, rec, true)
			rec.Release()
			require.NoError(t, err)
			n, err = c.Exec(ctx, "UPDATE "+kv.Quoted()+" SET v = v + 1 WHERE k = "+caps.Placeholder(1), "a")
			require.NoError(t, err)
			require.Equal(t, int64(1), n)
			n, err = c.Exec(ctx, "UPDATE "+kv.Quoted()+" SET v = v + 1 WHERE k = "+caps.Placeholder(1), "nope")
			require.NoError(t, err)
			require.Equal(t, int64(0), n, "no row changed")
			require.NoError(t, c.Commit(ctx))

			sc, err = c.TableSchema(ctx, tbl)
			require.NoError(t, err)
			require.NotNil(t, sc)
			require.Equal(t, "id", sc.Field(0).Name)
			require.Equal(t, int64(10), count(t, c, tbl))
			var v int64
			var b []byte
			found, err := c.QueryRow(ctx, "SELECT v, b FROM "+kv.Quoted()+" WHERE k = "+caps.Placeholder(1), []any{&v, &b}, "a")
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, int64(2), v)
			require.Equal(t, []byte{0, 1, 2}, b)
			found, err = c.QueryRow(ctx, "SELECT v FROM "+kv.Quoted()+" WHERE k = "+caps.Placeholder(1), []any{&v}, "zz")
			require.NoError(t, err)
			require.False(t, found)

			// Append, then read back as Arrow.
			rec = batch(mem, 10, 15)
			_, err = c.Ingest(ctx, tbl, rec, false)
			rec.Release()
			require.NoError(t, err)
			r, err := c.Query(ctx, "SELECT id, name FROM "+tbl.Quoted()+" WHERE id >= "+caps.Placeholder(1)+" ORDER BY id", int64(12))
			require.NoError(t, err)
			var ids []int64
			for r.Next() {
				col := r.RecordBatch().Column(0)
				for i := 0; i < col.Len(); i++ {
					x, err := adbc.Value(col, i)
					require.NoError(t, err)
					ids = append(ids, x.(int64))
				}
			}
			require.NoError(t, r.Err())
			r.Release()
			require.Equal(t, []int64{12, 13, 14}, ids)
		})
	}
}

// TestIntegrationDriverByManifest: a bare driver name resolves through a
// driver manifest in ADBC_DRIVER_PATH.
func TestIntegrationDriverByManifest(t *testing.T) {
	so := adbctest.SQLiteDriver(t)
	dir := t.TempDir()
	manifest := fmt.Sprintf("manifest_version = 1\nname = \"SQLite for tests\"\n[Driver]\nshared = %q\n", so)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "flightline_test_sqlite.toml"), []byte(manifest), 0o644))
	t.Setenv("ADBC_DRIVER_PATH", dir)
	db := adbctest.Open(t, adbc.Config{Driver: "flightline_test_sqlite", URI: "file:" + filepath.Join(t.TempDir(), "m.db")})
	require.Equal(t, adbc.SQLite, db.Caps().Dialect)

	_, err := adbc.Open(context.Background(), adbc.Config{Driver: "flightline_no_such_driver"})
	require.Error(t, err)
}
