//go:build cgo

package adbc_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/internal/testkit/adbctest"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

// TestIntegrationTableLookupInTransaction: looking up a missing table inside
// a PostgreSQL transaction must not abort it (the driver's lookup fails
// with an error; TableSchema asks to_regclass first).
func TestIntegrationTableLookupInTransaction(t *testing.T) {
	ctx := context.Background()
	db := adbctest.Open(t, adbctest.PostgresConfig(t))
	c, err := db.Conn(ctx)
	require.NoError(t, err)
	defer c.Close()
	tbl := adbc.Table{Name: pgtest.Name("dbg")}
	kv := adbc.Table{Name: tbl.Name + "_kv"}
	_, err = c.Exec(ctx, "CREATE TABLE "+kv.Quoted()+" (k text primary key, v bigint)")
	require.NoError(t, err)
	_, err = c.Exec(ctx, "INSERT INTO "+kv.Quoted()+" VALUES ('a', 1)")
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		require.NoError(t, c.Begin(ctx))
		var v int64
		found, err := c.QueryRow(ctx, "SELECT v FROM "+kv.Quoted()+" WHERE k = $1 FOR UPDATE", []any{&v}, "a")
		require.NoError(t, err, i)
		require.True(t, found)
		if i == 0 {
			sc, err := c.TableSchema(ctx, tbl)
			require.NoError(t, err)
			require.Nil(t, sc)
		}
		rec := batch(memory.DefaultAllocator, int64(i*10), int64(i*10+10))
		_, err = c.Ingest(ctx, tbl, rec, i == 0)
		rec.Release()
		require.NoError(t, err, i)
		_, err = c.Exec(ctx, "UPDATE "+kv.Quoted()+" SET v = v + 1 WHERE k = $1", "a")
		require.NoError(t, err, i)
		require.NoError(t, c.Commit(ctx), i)
	}
}
