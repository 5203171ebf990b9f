package postgrescdc_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/postgrescdc"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

// change is one row of a batch: "op id v".
func rows(t *testing.T, rec arrow.RecordBatch) []string {
	sc := rec.Schema()
	idx := func(name string) int {
		i := sc.FieldIndices(name)
		require.Len(t, i, 1, name)
		return i[0]
	}
	id, v, op := rec.Column(idx("id")).(*array.Int64), rec.Column(idx("v")).(*array.String), rec.Column(idx("_op")).(*array.String)
	var out []string
	for i := range int(rec.NumRows()) {
		val := "null"
		if v.IsValid(i) {
			val = v.Value(i)
		}
		out = append(out, fmt.Sprintf("%s %d %s", op.Value(i), id.Value(i), val))
	}
	return out
}

// readUntil reads until n rows came, returning them and the last checkpoint.
func readUntil(t *testing.T, rd flightsrc.Reader, n int) ([]string, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	var cp []byte
	for len(out) < n {
		rec, c, err := rd.Next(ctx)
		require.NoError(t, err, "after %v", out)
		out = append(out, rows(t, rec)...)
		cp = c
		rec.Release()
	}
	return out, cp
}

// newSource reads table; statusInterval 0 is the default.
func newSource(t *testing.T, mem memory.Allocator, table string, statusInterval time.Duration, opts ...postgrescdc.Option) *postgrescdc.Source {
	s, err := postgrescdc.New(context.Background(), postgrescdc.Config{DSN: pgtest.DSN(t), Table: table, Slot: table, Publication: table,
		BatchRows: 100, PollInterval: 20 * time.Millisecond, StatusInterval: statusInterval},
		append([]postgrescdc.Option{postgrescdc.Allocator(mem), postgrescdc.Logger(quiet)}, opts...)...)
	require.NoError(t, err)
	return s
}

// Updates, key updates, deletes and a delete then re-insert come out as the
// documented rows; an added column ends the read with ErrSchemaMismatch and
// the next Read has it; a dropped slot is ErrFailedPrecondition.
func TestIntegrationChanges(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := pgtest.Conn(t)
	table := newTable(t, c, "cdcchanges", `id bigint PRIMARY KEY, v text`)
	pgtest.Exec(t, c, `INSERT INTO `+table+` VALUES (1, 'a'), (2, 'b'), (3, 'c')`)
	reg := prometheus.NewRegistry()
	src := newSource(t, mem, table, 50*time.Millisecond, postgrescdc.Registerer(reg))
	ctx := context.Background()
	rd, err := src.Read(ctx, flightsrc.ReadRequest{Stream: table})
	require.NoError(t, err)
	got, _ := readUntil(t, rd, 3)
	require.Equal(t, []string{"insert 1 a", "insert 2 b", "insert 3 c"}, got, "the snapshot")

	pgtest.Exec(t, c, `BEGIN; UPDATE `+table+` SET v = 'a2' WHERE id = 1; UPDATE `+table+` SET id = 20 WHERE id = 2;
		DELETE FROM `+table+` WHERE id = 3; INSERT INTO `+table+` VALUES (3, 'c2'); COMMIT`)
	got, cp := readUntil(t, rd, 5)
	require.Equal(t, []string{"update 1 a2", "delete 2 null", "update 20 b", "delete 3 null", "insert 3 c2"}, got)
	require.NoError(t, src.Commit(ctx, flightsrc.CommitRequest{Stream: table, Checkpoint: cp}))
	// The committed position reaches the slot; the lag gauge follows.
	require.Eventually(t, func() bool {
		var confirmed string
		err := c.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, table).Scan(&confirmed)
		return err == nil && `{"lsn":"`+confirmed+`"}` == string(cp)
	}, 10*time.Second, 20*time.Millisecond, "the slot confirms the committed checkpoint %s", cp)
	require.Eventually(t, func() bool {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == postgrescdc.LagMetric && len(mf.GetMetric()) == 1 && mf.GetMetric()[0].GetGauge().GetValue() >= 0 {
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the lag gauge")

	pgtest.Exec(t, c, `ALTER TABLE `+table+` ADD COLUMN w int`)
	pgtest.Exec(t, c, `INSERT INTO `+table+` VALUES (4, 'd', 7)`)
	ctx2, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		rec, _, err := rd.Next(ctx2)
		if err != nil {
			require.ErrorIs(t, err, flightline.ErrSchemaMismatch)
			require.Contains(t, err.Error(), `"w"`)
			break
		}
		require.Zero(t, rec.NumRows())
		rec.Release()
	}
	require.NoError(t, rd.Close())

	rd, err = src.Read(ctx, flightsrc.ReadRequest{Stream: table, After: cp})
	require.NoError(t, err)
	require.Equal(t, "w", rd.Schema().Field(2).Name, "the new Read has the new column")
	got, _ = readUntil(t, rd, 1)
	require.Equal(t, []string{"insert 4 d"}, got)
	require.NoError(t, rd.Close())

	require.Eventually(t, func() bool { // the closed reader's walsender ends a moment later
		_, err := c.Exec(ctx, `SELECT pg_drop_replication_slot($1)`, table)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
	_, err = src.Read(ctx, flightsrc.ReadRequest{Stream: table, After: cp})
	require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
	require.True(t, strings.Contains(err.Error(), "does not exist"), err.Error())
}

// A table without a primary key, or with REPLICA IDENTITY NOTHING, is
// refused with what to do.
func TestIntegrationRefusedTables(t *testing.T) {
	c := pgtest.Conn(t)
	ctx := context.Background()
	nokey := newTable(t, c, "cdcnokey", `id bigint, v text`)
	_, err := newSource(t, nil, nokey, 0).Read(ctx, flightsrc.ReadRequest{Stream: nokey})
	require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
	require.Contains(t, err.Error(), "no primary key")
	nothing := newTable(t, c, "cdcnothing", `id bigint PRIMARY KEY`)
	pgtest.Exec(t, c, `ALTER TABLE `+nothing+` REPLICA IDENTITY NOTHING`)
	_, err = newSource(t, nil, nothing, 0).Read(ctx, flightsrc.ReadRequest{Stream: nothing})
	require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
	require.Contains(t, err.Error(), "REPLICA IDENTITY DEFAULT")
}

// An update that leaves a TOASTed value unchanged: under REPLICA IDENTITY
// FULL the value comes from the old row; without it the read stops with
// an error naming the column and the fix, rather than writing a null.
func TestIntegrationUnchangedToast(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := pgtest.Conn(t)
	ctx := context.Background()
	big := `(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 3000))` // ~96 KB, incompressible: stored out of line
	for _, full := range []bool{true, false} {
		table := newTable(t, c, "cdctoast", `id bigint PRIMARY KEY, v text, n int`)
		if full {
			pgtest.Exec(t, c, `ALTER TABLE `+table+` REPLICA IDENTITY FULL`)
		}
		src := newSource(t, mem, table, 0)
		rd, err := src.Read(ctx, flightsrc.ReadRequest{Stream: table})
		require.NoError(t, err)
		_, _ = readUntil(t, rd, 0) // the empty snapshot
		pgtest.Exec(t, c, `INSERT INTO `+table+` VALUES (1, `+big+`, 0)`)
		pgtest.Exec(t, c, `UPDATE `+table+` SET n = 1 WHERE id = 1`)
		var want string
		require.NoError(t, c.QueryRow(ctx, `SELECT v FROM `+table+` WHERE id = 1`).Scan(&want))
		if full {
			got, _ := readUntil(t, rd, 2)
			require.Len(t, got, 2)
			require.Equal(t, "update 1 "+want, got[1], "the unchanged value, from the old row")
		} else {
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			var err error
			for err == nil {
				var rec arrow.RecordBatch
				rec, _, err = rd.Next(cctx)
				if rec != nil {
					rec.Release()
				}
			}
			cancel()
			require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
			require.Contains(t, err.Error(), `column "v"`)
			require.Contains(t, err.Error(), "REPLICA IDENTITY FULL")
		}
		require.NoError(t, rd.Close())
	}
}
