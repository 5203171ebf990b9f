package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/postgres"
	"github.com/flightline/flightline/flightsrc/srctest"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

// The PostgreSQL source on real PostgreSQL: one table per stream, read by a
// watermark with ties (three rows share each value, inserted in random
// order) and the id as the tie-breaker, in pages of 7 rows.
func TestIntegrationSourceConformance(t *testing.T) {
	c := pgtest.Conn(t)
	srctest.Run(t, srctest.Harness{
		NewStream: func(t *testing.T) string {
			table := pgtest.Name("srctest")
			pgtest.Exec(t, c, `CREATE TABLE `+table+` (id bigint PRIMARY KEY, wm bigint NOT NULL, v text)`)
			t.Cleanup(func() { pgtest.Exec(t, c, `DROP TABLE `+table) })
			return table
		},
		Append: func(t *testing.T, table string, from, to int64) {
			pgtest.Exec(t, c, `INSERT INTO `+table+` SELECT i, i / 3, 'v' || i
				FROM generate_series($1::bigint, $2::bigint - 1) i ORDER BY random()`, from, to)
		},
		NewSource: func(t *testing.T, mem memory.Allocator, table string) flightsrc.Source {
			s, err := postgres.New(context.Background(), postgres.Config{DSN: pgtest.DSN(t),
				Tables: []postgres.Table{{Name: table, Watermark: "wm", Key: "id"}}, BatchRows: 7, PollInterval: 20 * time.Millisecond},
				postgres.Allocator(mem))
			require.NoError(t, err)
			return s
		},
		Records: func(t *testing.T, _ string, rec arrow.RecordBatch) []srctest.Record {
			col := rec.Column(0).(*array.Int64)
			out := make([]srctest.Record, rec.NumRows())
			for i := range out {
				out[i].ID = col.Value(i)
			}
			return out
		},
		DeterministicBoundaries: true,
	})
}
