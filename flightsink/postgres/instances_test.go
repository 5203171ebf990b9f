package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/postgres"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

// pos is a two-partition Positions checkpoint: "t/0" at a, "t/1" at b (a
// negative position leaves the key out).
func pos(a, b int64) []byte {
	p := checkpoint.Positions{}
	if a >= 0 {
		p["t/0"] = a
	}
	if b >= 0 {
		p["t/1"] = b
	}
	return p.Encode()
}

// write writes ids [from, to) with checkpoint cp.
func write(t *testing.T, mem memory.Allocator, w flightsink.Writer, from, to int64, cp []byte) error {
	t.Helper()
	rec := sinktest.Batch(mem, from, to)
	defer rec.Release()
	return w.WriteBatch(context.Background(), rec, cp)
}

func sorted(x []int64) []int64 { slices.Sort(x); return x }

func span(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// Two instances of one pipeline write one table at once, each its own
// partition, without fencing each other; Open and Checkpoint return the
// checkpoint merged over both; a newer claim of an instance fences its
// older writer (FAILED_PRECONDITION at the Flight boundary), replays
// included, and only that instance's.
func TestIntegrationInstancesWriteSideBySide(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cps, tbl := pgtest.Name("icps"), pgtest.Name("inst")
	sa := newSink(t, postgres.Config{DSN: dsn, CheckpointTable: cps, Table: tbl, Instance: "a"})
	sb := newSink(t, postgres.Config{DSN: dsn, CheckpointTable: cps, Table: tbl, Instance: "b"})
	p := flightsink.Pipeline{ID: "scale"}

	wa, cp, err := sa.Open(ctx, p)
	require.NoError(t, err)
	require.Nil(t, cp)
	wb, cp, err := sb.Open(ctx, p)
	require.NoError(t, err, "a second instance does not fence the first")
	require.Nil(t, cp)

	// a writes ids 0..999 as t/0, b ids 1000..1999 as t/1, 100 at a time.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, w := range []flightsink.Writer{wa, wb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base := int64(i * 1000)
			for n := int64(100); n <= 1000; n += 100 {
				cp := pos(n, -1)
				if i == 1 {
					cp = pos(-1, n)
				}
				if errs[i] = write(t, mem, w, base+n-100, base+n, cp); errs[i] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, span(0, 2000), sorted(ids(t, c, tbl)))

	got, err := sa.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(pos(1000, 1000)), string(got), "merged over the instances")
	// Each instance's row holds what it wrote, not the merge.
	var own []byte
	require.NoError(t, c.QueryRow(ctx, `SELECT checkpoint FROM `+cps+` WHERE pipeline_id = 'scale' AND instance = 'a'`).Scan(&own))
	require.Equal(t, string(pos(1000, -1)), string(own))

	// A replay of what the other instance wrote is a no-op for anyone.
	require.NoError(t, write(t, mem, wa, 1900, 2000, pos(-1, 1000)))

	// A newer claim of a fences a's old writer (its replays too), not b.
	wa2, cp, err := sa.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(pos(1000, 1000)), string(cp))
	for _, cp := range [][]byte{pos(1000, -1), pos(1100, -1)} {
		err = write(t, mem, wa, 1000, 1100, cp)
		require.ErrorIs(t, err, flightline.ErrFenced)
		require.Equal(t, codes.FailedPrecondition, status.Code(flighterr.ToStatus(err)))
	}
	require.NoError(t, write(t, mem, wb, 2000, 2100, pos(-1, 1100)), "b is not fenced by a's claim")
	require.NoError(t, write(t, mem, wa2, 3000, 3100, pos(1100, -1)))
	require.Equal(t, append(span(0, 2100), span(3000, 3100)...), sorted(ids(t, c, tbl)))
	got, err = sb.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(pos(1100, 1100)), string(got))

	// The unnamed instance is a third instance of the pipeline.
	sd := newSink(t, postgres.Config{DSN: dsn, CheckpointTable: cps, Table: tbl})
	_, cp, err = sd.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(pos(1100, 1100)), string(cp))

	// An empty Instance is that unnamed instance (the config kinds refuse
	// an empty instance= themselves).
	sz, err := postgres.New(context.Background(), postgres.Config{DSN: dsn, CheckpointTable: cps, Table: tbl, Instance: ""})
	require.NoError(t, err)
	_, cp, err = sz.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(pos(1100, 1100)), string(cp))
	require.NoError(t, sz.Close())
}

// A partition handed over from one instance to another while the first is
// cut off (a zombie: nobody claims its instance, so it is not fenced): of
// the two writers of the partition, whichever commits second is refused
// with ErrConflict (re-open), and no record is written twice. After a
// re-open the refused writer resumes from the merged checkpoint.
func TestIntegrationInstancesZombieHandOver(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, zombieFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("zombieFirst=%v", zombieFirst), func(t *testing.T) {
			cps, tbl := pgtest.Name("zcps"), pgtest.Name("zomb")
			sa := newSink(t, postgres.Config{DSN: dsn, CheckpointTable: cps, Table: tbl, Instance: "a"})
			sb := newSink(t, postgres.Config{DSN: dsn, CheckpointTable: cps, Table: tbl, Instance: "b"})
			p := flightsink.Pipeline{ID: "zombie"}
			wa, _, err := sa.Open(ctx, p)
			require.NoError(t, err)
			wb, _, err := sb.Open(ctx, p)
			require.NoError(t, err)
			require.NoError(t, write(t, mem, wa, 0, 100, pos(100, -1)))     // a owns t/0
			require.NoError(t, write(t, mem, wb, 1000, 1100, pos(-1, 100))) // b owns t/1

			// a is cut off; the group gives t/0 to b, which re-opens and
			// resumes t/0 at 100. a's in-flight batch of t/0 is 100..150.
			wb2, cp, err := sb.Open(ctx, p)
			require.NoError(t, err)
			require.Equal(t, string(pos(100, 100)), string(cp))
			if zombieFirst {
				require.NoError(t, write(t, mem, wa, 100, 150, pos(150, -1)), "the zombie commits before b writes t/0")
				err := write(t, mem, wb2, 100, 200, pos(200, 100))
				require.ErrorIs(t, err, flightline.ErrConflict, "b resumed t/0 at 100, a moved it to 150")
				require.Equal(t, codes.Aborted, status.Code(flighterr.ToStatus(err)))
				// b re-opens and resumes from 150.
				wb3, cp, err := sb.Open(ctx, p)
				require.NoError(t, err)
				require.Equal(t, string(pos(150, 100)), string(cp))
				require.NoError(t, write(t, mem, wb3, 150, 200, pos(200, 100)))
			} else {
				require.NoError(t, write(t, mem, wb2, 100, 200, pos(200, 100)))
				// The zombie's batch reaching past b's commit is refused;
				// one b's commit covers is a replay: nothing written.
				err := write(t, mem, wa, 100, 250, pos(250, -1))
				require.ErrorIs(t, err, flightline.ErrConflict, "the zombie's batch of t/0, taken over by b")
				require.NoError(t, write(t, mem, wa, 100, 150, pos(150, -1)))
				// Its replays of what it did commit stay no-ops.
				require.NoError(t, write(t, mem, wa, 0, 100, pos(100, -1)))
			}
			require.Equal(t, append(span(0, 200), span(1000, 1100)...), sorted(ids(t, c, tbl)), "every id once")
			got, err := sa.Checkpoint(ctx, p)
			require.NoError(t, err)
			require.Equal(t, string(pos(200, 100)), string(got))
		})
	}
}

// TestIntegrationCheckpointTableUpgradedToInstances: a checkpoint table of
// one row per (pipeline, target), as deployments have it, is migrated by
// the first Open to one row per (pipeline, target, instance): its
// checkpoints and epochs become the default instance's, the default
// instance resumes from them and fences as before, and a named instance
// added afterwards starts from the same merged checkpoint.
func TestIntegrationCheckpointTableUpgradedToInstances(t *testing.T) {
	dsn := pgtest.DSN(t)
	c := pgtest.Conn(t)
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cps, tbl, other := pgtest.Name("pretcps"), pgtest.Name("upg"), pgtest.Name("upgother")
	pgtest.Exec(t, c, `CREATE TABLE `+cps+` (pipeline_id text NOT NULL, target text NOT NULL DEFAULT '', checkpoint bytea, epoch bigint NOT NULL DEFAULT 0, updated_at timestamptz DEFAULT now(), PRIMARY KEY (pipeline_id, target))`)
	_, err := c.Exec(ctx, `INSERT INTO `+cps+` (pipeline_id, target, checkpoint, epoch) VALUES ('up', '', $1, 3), ('up', $2, $3, 5)`,
		pos(40, 7), `"`+other+`"`, sinktest.CP(9))
	require.NoError(t, err)

	s := newSink(t, postgres.Config{DSN: dsn, CheckpointTable: cps, Table: tbl})
	p := flightsink.Pipeline{ID: "up"}
	for _, q := range []struct {
		p  flightsink.Pipeline
		cp []byte
	}{{p, pos(40, 7)}, {flightsink.Pipeline{ID: "up", Target: other}, sinktest.CP(9)}} {
		got, err := s.Checkpoint(ctx, q.p)
		require.NoError(t, err)
		require.Equal(t, string(q.cp), string(got), "read before the migration: %v", q.p)
	}

	w, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(pos(40, 7)), string(cp), "the checkpoint survives the migration")
	var epoch int64
	require.NoError(t, c.QueryRow(ctx, `SELECT epoch FROM `+cps+` WHERE pipeline_id = 'up' AND target = '' AND instance = ''`).Scan(&epoch))
	require.Equal(t, int64(4), epoch, "the default instance's epoch continues")
	var key []string
	require.NoError(t, c.QueryRow(ctx, `SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE i.indrelid = $1::regclass AND i.indisprimary`, cps).Scan(&key))
	require.Equal(t, []string{"instance", "pipeline_id", "target"}, key)

	got, err := s.Checkpoint(ctx, flightsink.Pipeline{ID: "up", Target: other})
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(9)), string(got), "another target's row survives too")

	require.NoError(t, write(t, mem, w, 40, 50, pos(50, 7)))
	// A second sink of the default instance, opened again: fences w.
	s2 := newSink(t, postgres.Config{DSN: dsn, CheckpointTable: cps, Table: tbl})
	w2, cp, err := s2.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(pos(50, 7)), string(cp))
	require.ErrorIs(t, write(t, mem, w, 50, 60, pos(60, 7)), flightline.ErrFenced)
	require.NoError(t, write(t, mem, w2, 50, 60, pos(60, 7)))

	// A named instance added after the upgrade starts from the merge.
	sb := newSink(t, postgres.Config{DSN: dsn, CheckpointTable: cps, Table: tbl, Instance: "b"})
	wb, cp, err := sb.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(pos(60, 7)), string(cp))
	require.NoError(t, write(t, mem, wb, 107, 110, pos(-1, 10)))
	require.NoError(t, write(t, mem, w2, 60, 70, pos(70, -1)))
	got, err = s.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(pos(70, 10)), string(got))
	require.Equal(t, append(span(40, 70), span(107, 110)...), sorted(ids(t, c, tbl)))
}
