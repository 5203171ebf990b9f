package clickhouse_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/clickhouse"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/testkit/chtest"
)

func name(prefix string) string { return fmt.Sprintf("%s_%06d", prefix, rand.IntN(1e6)) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

var errCrash = errors.New("crash between the insert and the checkpoint row")

// write writes ids [from, to) with checkpoint CP(to).
func write(t *testing.T, mem memory.Allocator, w flightsink.Writer, from, to int64) error {
	rec := sinktest.Batch(mem, from, to)
	defer rec.Release()
	return w.WriteBatch(ctx(t), rec, sinktest.CP(to))
}

func count(t *testing.T, f chtest.Front, table string) string {
	return f.Query(t, "SELECT count(), uniqExact(id) FROM `"+table+"`")[0]
}

// A crash after the data insert and before the checkpoint row: the
// checkpoint stays behind the data, the replay re-forms the batch, and
// ClickHouse drops it by its token.
func TestIntegrationCrashAfterInsertReplayDeduplicated(t *testing.T) {
	f := chtest.Need(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	p := flightsink.Pipeline{ID: name("crash"), Target: name("crash")}

	s := newSink(t, f)
	w, _, err := s.Open(ctx(t), p)
	require.NoError(t, err)
	require.NoError(t, write(t, mem, w, 0, 10))
	s.SetAfterInsert(func() error { return errCrash })
	require.ErrorIs(t, write(t, mem, w, 10, 20), errCrash)
	require.Equal(t, "20\t20", count(t, f, p.Target), "the data landed")

	s2 := newSink(t, f)
	w2, cp, err := s2.Open(ctx(t), p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(10)), string(cp), "the checkpoint is behind the data")
	require.NoError(t, write(t, mem, w2, 10, 20), "the replay")
	require.NoError(t, write(t, mem, w2, 20, 30))
	require.Equal(t, "30\t30", count(t, f, p.Target), "every row once")
	cp, err = s2.Checkpoint(ctx(t), p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(30)), string(cp))
}

// Beyond the dedup window the replay is not deduplicated: with a window
// of 2 blocks, two other inserts into the table between the crash and the
// replay push the batch's token out, and its rows land twice. This is the
// documented limit (docs/sinks/clickhouse.md).
func TestIntegrationReplayBeyondDedupWindowDuplicates(t *testing.T) {
	f := chtest.Need(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	table := name("window")
	for _, tc := range []struct {
		others int
		want   string
	}{{1, "10\t10"}, {2, "20\t10"}} {
		table := fmt.Sprintf("%s_%d", table, tc.others)
		p := flightsink.Pipeline{ID: name("win"), Target: table}
		s := newSinkWith(t, f, clickhouse.Config{DedupWindow: 2})
		w, _, err := s.Open(ctx(t), p)
		require.NoError(t, err)
		s.SetAfterInsert(func() error { return errCrash })
		require.ErrorIs(t, write(t, mem, w, 0, 10), errCrash)
		s.SetAfterInsert(nil)
		// Other pipelines write into the table in between: one block each.
		for i := range tc.others {
			other := flightsink.Pipeline{ID: name("other"), Target: table}
			ow, _, err := s.Open(ctx(t), other)
			require.NoError(t, err)
			require.NoError(t, write(t, mem, ow, int64(100+10*i), int64(110+10*i)))
		}
		w2, cp, err := newSinkWith(t, f, clickhouse.Config{DedupWindow: 2}).Open(ctx(t), p)
		require.NoError(t, err)
		require.Nil(t, cp)
		require.NoError(t, write(t, mem, w2, 0, 10), "the replay")
		got := f.Query(t, "SELECT count(), uniqExact(id) FROM `"+table+"` WHERE id < 100")[0]
		require.Equal(t, tc.want, got, "%d other inserts in a window of 2", tc.others)
	}
}

func TestIntegrationErrors(t *testing.T) {
	f := chtest.Need(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)

	t.Run("Unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		s, err := clickhouse.New(context.Background(), clickhouse.Config{Endpoint: "http://" + addr})
		require.NoError(t, err)
		_, _, err = s.Open(ctx(t), flightsink.Pipeline{ID: "p", Target: "t"})
		require.ErrorIs(t, err, flightline.ErrUnavailable)
		require.Equal(t, codes.Unavailable, flighterr.Code(err))
	})
	t.Run("WrongPassword", func(t *testing.T) {
		s, err := clickhouse.New(context.Background(), clickhouse.Config{Endpoint: f.URL, User: f.User, Password: "not-the-password"})
		require.NoError(t, err)
		_, _, err = s.Open(ctx(t), flightsink.Pipeline{ID: "p", Target: "t"})
		require.ErrorIs(t, err, flightline.ErrUnauthenticated)
		require.Equal(t, codes.Unauthenticated, flighterr.Code(err))
		require.NotContains(t, err.Error(), "not-the-password")
		var se *clickhouse.ServerError
		require.ErrorAs(t, err, &se)
		require.Equal(t, 516, se.Code)
	})
	t.Run("UnmappableSchemaCommitsNothing", func(t *testing.T) {
		p := flightsink.Pipeline{ID: name("unmap"), Target: name("unmap")}
		s := newSink(t, f)
		w, _, err := s.Open(ctx(t), p)
		require.NoError(t, err)
		sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
			{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String)}}, nil)
		b := array.NewRecordBuilder(mem, sc)
		b.Field(0).(*array.Int64Builder).Append(1)
		lb := b.Field(1).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.StringBuilder).Append("x")
		rec := b.NewRecordBatch()
		b.Release()
		err = w.WriteBatch(ctx(t), rec, sinktest.CP(1))
		rec.Release()
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
		require.Equal(t, codes.InvalidArgument, flighterr.Code(err))
		require.ErrorContains(t, err, `column "tags"`)
		cp, err := s.Checkpoint(ctx(t), p)
		require.NoError(t, err)
		require.Nil(t, cp, "nothing committed")
		require.Nil(t, f.IDs(t, p.Target), "no table created")
	})
	t.Run("TableWithoutDedupWindowRefused", func(t *testing.T) {
		p := flightsink.Pipeline{ID: name("nowin"), Target: name("nowin")}
		f.Query(t, "CREATE TABLE `"+p.Target+"` (id Int64, name Nullable(String)) ENGINE = MergeTree ORDER BY id")
		w, _, err := newSink(t, f).Open(ctx(t), p)
		require.NoError(t, err)
		err = write(t, mem, w, 0, 5)
		require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
		require.Equal(t, codes.FailedPrecondition, flighterr.Code(err))
		require.ErrorContains(t, err, "non_replicated_deduplication_window")
		require.Nil(t, f.IDs(t, p.Target))
	})
}
