package postgrescdc_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/postgrescdc"
	"github.com/flightline/flightline/flightsrc/srctest"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

var quiet = slog.New(slog.DiscardHandler)

// newTable creates a table and registers the clean-up of it, its slot and
// its publication (both named after it).
func newTable(t *testing.T, c *pgx.Conn, prefix, columns string) string {
	t.Helper()
	if c == nil {
		c = pgtest.Conn(t)
	}
	pgtest.NeedLogical(t, c)
	table := pgtest.Name(prefix)
	pgtest.Exec(t, c, `CREATE TABLE `+table+` (`+columns+`)`)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for ctx.Err() == nil { // a closing reader may hold the slot a moment
			_, err := c.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, table)
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		pgtest.Exec(t, c, `DROP PUBLICATION IF EXISTS `+table)
		pgtest.Exec(t, c, `DROP TABLE `+table)
	})
	return table
}

// The CDC source on real PostgreSQL: each Append is one transaction of
// inserts (larger than a batch, so transactions are split with in-transaction
// checkpoints), the first read is the initial snapshot (resumed from
// snapshot checkpoints with the filters of Checkpoint), the rest streams.
func TestIntegrationSourceConformance(t *testing.T) {
	c := pgtest.Conn(t)
	srctest.Run(t, srctest.Harness{
		NewStream: func(t *testing.T) string {
			return newTable(t, c, "cdcsrctest", `id bigint PRIMARY KEY, v text`)
		},
		Append: func(t *testing.T, table string, from, to int64) {
			pgtest.Exec(t, c, `INSERT INTO `+table+` SELECT i, 'v' || i FROM generate_series($1::bigint, $2::bigint - 1) i`, from, to)
		},
		NewSource: func(t *testing.T, mem memory.Allocator, table string) flightsrc.Source {
			s, err := postgrescdc.New(context.Background(), postgrescdc.Config{DSN: pgtest.DSN(t), Table: table, Slot: table, Publication: table,
				BatchRows: 7, PollInterval: 20 * time.Millisecond, StatusInterval: time.Second},
				postgrescdc.Allocator(mem), postgrescdc.Logger(quiet))
			require.NoError(t, err)
			return s
		},
		// Keepalives confirm the log others wrote while the table was idle
		// (PostgreSQL 15 and later send one for each transaction pgoutput
		// filtered out): the checkpoint moves with them, so the slot
		// releases that log.
		IdleCheckpointsAdvance: true,
		Records: func(t *testing.T, _ string, rec arrow.RecordBatch) []srctest.Record {
			col := rec.Column(0).(*array.Int64)
			out := make([]srctest.Record, rec.NumRows())
			for i := range out {
				out[i].ID = col.Value(i)
			}
			return out
		},
	})
}
