package snowflake_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/snowflake"
	"github.com/flightline/flightline/flightsrc/srctest"
	"github.com/flightline/flightline/internal/testkit/snowtest"
)

// The Snowflake source on the emulator: one table per stream, read by a
// cursor with ties (three rows share each value, inserted in random order)
// and the id as the tiebreak, in pages of 7 rows.
func TestIntegrationSourceConformance(t *testing.T) {
	db := snowtest.DB(t)
	ctx := context.Background()
	srctest.Run(t, srctest.Harness{
		NewStream: func(t *testing.T) string {
			table := strings.ToUpper(snowtest.Name("srctest"))
			_, err := db.ExecContext(ctx, `CREATE TABLE `+table+` (ID NUMBER(19,0) NOT NULL, WM NUMBER(19,0) NOT NULL, V VARCHAR)`)
			require.NoError(t, err)
			t.Cleanup(func() { _, _ = db.ExecContext(ctx, `DROP TABLE `+table) })
			return table
		},
		Append: func(t *testing.T, table string, from, to int64) {
			ids := make([]int64, 0, to-from)
			for i := from; i < to; i++ {
				ids = append(ids, i)
			}
			rand.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
			vals := make([]string, len(ids))
			for i, id := range ids {
				vals[i] = fmt.Sprintf("(%d, %d, 'v%d')", id, id/3, id)
			}
			_, err := db.ExecContext(ctx, `INSERT INTO `+table+` VALUES `+strings.Join(vals, ", "))
			require.NoError(t, err)
		},
		NewSource: func(t *testing.T, mem memory.Allocator, table string) flightsrc.Source {
			s, err := snowflake.New(context.Background(), snowflake.Config{Config: snowtest.Config(t),
				Tables: []snowflake.Table{{Name: table, Cursor: "WM", Tiebreak: "ID"}}, BatchRows: 7, PollInterval: 20 * time.Millisecond},
				snowflake.Allocator(mem))
			require.NoError(t, err)
			t.Cleanup(func() { s.Close() })
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
