package snowflake_test

import (
	"bytes"
	"context"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/flightsink/snowflake"
	"github.com/flightline/flightline/flightsrc"
	sfsrc "github.com/flightline/flightline/flightsrc/snowflake"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/testkit/snowtest"
)

// A zombie is fenced by a newer Open: its batches fail with ErrFenced
// (FAILED_PRECONDITION over Flight), it writes no row and moves no
// checkpoint, and the newer writer goes on.
func TestIntegrationZombieWritesNothing(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := snowtest.Name("zombie")
	p := flightsink.Pipeline{ID: table, Target: table}
	old, _, err := newSink(t).Open(ctx, p)
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 5)
	defer rec.Release()
	require.NoError(t, old.WriteBatch(ctx, rec, sinktest.CP(5)))
	newer, cp, err := newSink(t).Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(5)), string(cp))

	rec2 := sinktest.Batch(mem, 5, 10)
	defer rec2.Release()
	err = old.WriteBatch(ctx, rec2, sinktest.CP(10))
	require.ErrorIs(t, err, flightline.ErrFenced)
	require.Equal(t, codes.FailedPrecondition, status.Code(flighterr.ToStatus(err)), "at the Flight boundary")
	require.ErrorIs(t, old.WriteBatch(ctx, rec, sinktest.CP(5)), flightline.ErrFenced, "a zombie's replay is fenced too")
	require.ElementsMatch(t, []int64{0, 1, 2, 3, 4}, snowtest.IDs(t, table))
	got, err := newSink(t).Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(5)), string(got), "the zombie moved the checkpoint")

	require.NoError(t, newer.WriteBatch(ctx, rec2, sinktest.CP(10)))
	require.ElementsMatch(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, snowtest.IDs(t, table))
}

// A zombie racing the newer writer: whatever the interleaving, every row
// the zombie committed is covered by the checkpoint the newer Open
// returned (the compare-and-set in the zombie's transaction refuses the
// rest).
func TestIntegrationZombieConcurrent(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := snowtest.Name("zombie_race")
	p := flightsink.Pipeline{ID: table, Target: table}
	old, _, err := newSink(t).Open(ctx, p)
	require.NoError(t, err)
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		var err error
		for i := int64(0); err == nil; i += 10 {
			rec := sinktest.Batch(mem, i, i+10)
			err = old.WriteBatch(ctx, rec, sinktest.CP(i+10))
			rec.Release()
			if i == 10 {
				close(started)
			}
		}
		done <- err
	}()
	<-started
	_, cp, err := newSink(t).Open(ctx, p)
	require.NoError(t, err)
	require.ErrorIs(t, <-done, flightline.ErrFenced)
	var next int64
	_, err = fmt.Sscanf(string(cp), `{"positions":{"sinktest/0":%d}}`, &next)
	require.NoError(t, err)
	require.Len(t, snowtest.IDs(t, table), int(next), "rows committed after the newer Open")
}

// A type without a Snowflake column type is INVALID_ARGUMENT naming the
// column, before any table or row is written.
func TestIntegrationUnsupportedTypeWritesNothing(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := snowtest.Name("unsupported")
	p := flightsink.Pipeline{ID: table, Target: table}
	w, _, err := newSink(t).Open(ctx, p)
	require.NoError(t, err)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "d", Type: arrow.FixedWidthTypes.Duration_s},
	}, nil)
	b := array.NewRecordBuilder(mem, sc)
	b.Field(0).(*array.Int64Builder).Append(1)
	b.Field(1).(*array.DurationBuilder).Append(5)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	err = w.WriteBatch(ctx, rec, sinktest.CP(1))
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.Equal(t, codes.InvalidArgument, status.Code(flighterr.ToStatus(err)))
	require.Contains(t, err.Error(), `"d"`)
	require.Empty(t, snowtest.Query(t, `SELECT table_name FROM information_schema.tables WHERE table_name = '`+table+`'`),
		"no table may be created for a refused batch")
	cp, err := newSink(t).Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Nil(t, cp)
}

// An existing table of another type: ErrSchemaMismatch naming the column
// and both types, nothing written.
func TestIntegrationSchemaMismatchNamesColumn(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	db := snowtest.DB(t)
	table := snowtest.Name("mismatch")
	_, err := db.ExecContext(ctx, `CREATE TABLE `+table+` ("id" NUMBER(19,0) NOT NULL, "name" NUMBER(10,0))`)
	require.NoError(t, err)
	w, _, err := newSink(t).Open(ctx, flightsink.Pipeline{ID: table, Target: table})
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 3)
	defer rec.Release()
	err = w.WriteBatch(ctx, rec, sinktest.CP(3))
	require.ErrorIs(t, err, flightline.ErrSchemaMismatch)
	require.Contains(t, err.Error(), `"name"`)
	require.Contains(t, err.Error(), "NUMBER")
	require.Contains(t, err.Error(), "utf8")
	require.Empty(t, snowtest.IDs(t, table))
}

// Types round trip: a batch of every scalar type the sink maps, written,
// then read back as Arrow by the Snowflake source (gosnowflake's Arrow
// batches) and compared value by value.
//
// Emulator work-arounds, each where Snowflake itself is exact: timestamps
// are whole microseconds (the emulator's DuckDB keeps microseconds, and
// Snowflake nanoseconds), and the timestamp columns hold no NULL (the
// emulator reads a NULL TIMESTAMP_NTZ back as 1970-01-01).
func TestIntegrationTypesRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := snowtest.Name("types")
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "ID", Type: arrow.PrimitiveTypes.Int64},
		{Name: "I8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "I16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "I32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "U32", Type: arrow.PrimitiveTypes.Uint32, Nullable: true},
		{Name: "F32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "F64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "DEC", Type: &arrow.Decimal128Type{Precision: 12, Scale: 3}, Nullable: true},
		{Name: "S", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "B", Type: arrow.BinaryTypes.Binary, Nullable: true},
		{Name: "BOOL", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "D", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
		{Name: "TS", Type: arrow.FixedWidthTypes.Timestamp_us},
		{Name: "TSZ", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	}, nil)
	b := array.NewRecordBuilder(mem, sc)
	base := time.Date(2024, 2, 29, 23, 59, 58, 123456000, time.UTC)
	const n = 5
	for i := range n {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i == 2 { // a row of NULLs, timestamps excepted (see above)
			for f := 1; f < 12; f++ {
				b.Field(f).AppendNull()
			}
		} else {
			b.Field(1).(*array.Int8Builder).Append(int8(-128 + i))
			b.Field(2).(*array.Int16Builder).Append(int16(32767 - i))
			b.Field(3).(*array.Int32Builder).Append(int32(-2147483648 + i))
			b.Field(4).(*array.Uint32Builder).Append(uint32(4294967295 - i))
			b.Field(5).(*array.Float32Builder).Append(float32(i) + 0.25)
			b.Field(6).(*array.Float64Builder).Append(1e300 / float64(i+1))
			b.Field(7).(*array.Decimal128Builder).Append(decimal128.FromI64(int64(-123456789 + i)))
			b.Field(8).(*array.StringBuilder).Append(fmt.Sprintf("héllo %d \x00 ✓", i))
			b.Field(9).(*array.BinaryBuilder).Append([]byte{0, 0xff, byte(i)})
			b.Field(10).(*array.BooleanBuilder).Append(i%2 == 0)
			b.Field(11).(*array.Date32Builder).Append(arrow.Date32FromTime(base.AddDate(0, 0, i)))
		}
		b.Field(12).(*array.TimestampBuilder).Append(arrow.Timestamp(base.Add(time.Duration(i) * time.Hour).UnixMicro()))
		b.Field(13).(*array.TimestampBuilder).Append(arrow.Timestamp(base.Add(-time.Duration(i) * time.Hour).UnixMicro()))
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	w, _, err := newSink(t).Open(ctx, flightsink.Pipeline{ID: table, Target: table})
	require.NoError(t, err)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(n)))

	src, err := sfsrc.New(context.Background(), sfsrc.Config{Config: snowtest.Config(t),
		Tables: []sfsrc.Table{{Name: table, Cursor: "ID", Tiebreak: "ID"}}}, sfsrc.Allocator(mem))
	require.NoError(t, err)
	defer src.Close()
	r, err := src.Read(ctx, flightsrc.ReadRequest{Stream: table})
	require.NoError(t, err)
	got, _, err := r.Next(ctx)
	require.NoError(t, err)
	defer got.Release()
	require.NoError(t, r.Close())
	require.EqualValues(t, n, got.NumRows())
	for f := range sc.NumFields() {
		name := sc.Field(f).Name
		require.Equal(t, name, got.Schema().Field(f).Name)
		for i := range n {
			require.Equal(t, canon(rec.Column(f), i), canon(got.Column(f), i), "column %s row %d (%s read as %s)", name, i, sc.Field(f).Type, got.Column(f).DataType())
		}
	}
}

// canon is a value's comparable text: integers in decimal, floats
// shortest, decimals at their scale, binaries in hex, times in UTC.
func canon(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "NULL"
	}
	switch a := a.(type) {
	case *array.Int8:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *array.Int16:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *array.Int32:
		return strconv.FormatInt(int64(a.Value(i)), 10)
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10)
	case *array.Uint32:
		return strconv.FormatUint(uint64(a.Value(i)), 10)
	case *array.Float32:
		return strconv.FormatFloat(float64(a.Value(i)), 'g', -1, 64)
	case *array.Float64:
		return strconv.FormatFloat(a.Value(i), 'g', -1, 64)
	case *array.Decimal128:
		return a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale)
	case *array.String:
		return a.Value(i)
	case *array.Binary:
		return hex.EncodeToString(a.Value(i))
	case *array.Boolean:
		return strconv.FormatBool(a.Value(i))
	case *array.Date32:
		return a.Value(i).FormattedString()
	case *array.Timestamp:
		return a.Value(i).ToTime(a.DataType().(*arrow.TimestampType).Unit).UTC().Format(time.RFC3339Nano)
	}
	return a.ValueStr(i)
}

// Nothing the sink logs or returns holds the password, whatever happens.
func TestIntegrationSecretsNeverLogged(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	cfg := snowtest.Config(t)
	const pw = "Very-Secret-Pa55word"
	cfg.Password = pw
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(io.MultiWriter(&logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := snowflake.New(context.Background(), emulatorConfig(cfg), snowflake.Logger(log))
	require.NoError(t, err)
	defer s.Close()
	table := snowtest.Name("secret")
	p := flightsink.Pipeline{ID: table, Target: table}
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 3)
	defer rec.Release()
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(3)))
	_, _, err = s.Open(ctx, p) // fences w
	require.NoError(t, err)
	err = w.WriteBatch(ctx, rec, sinktest.CP(6))
	require.ErrorIs(t, err, flightline.ErrFenced)
	require.NotContains(t, err.Error(), pw)
	require.NotEmpty(t, logs.String())
	require.NotContains(t, logs.String(), pw)
}

// A writer that died inside its transaction, after its checkpoint UPDATE
// and before COMMIT, leaves that transaction open (detached). Snowflake
// rolls it back when the dead session times out; until then the next
// Open's claim waits (or, on the emulator, conflicts) and is retried. Here
// the dead writer is a session left idle in that state, and the emulator's
// service rolls it back after 20 s idle (integration/services/
// fakesnow_server.py, which does what Snowflake does): the newer Open must
// succeed within its retry budget, and the dead transaction's rows must
// not appear.
func TestIntegrationDeadWritersTransaction(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the emulator's idle roll-back")
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := snowtest.Name("dead_tx")
	p := flightsink.Pipeline{ID: table, Target: table}
	w, _, err := newSink(t).Open(ctx, p)
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 5)
	defer rec.Release()
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(5)))

	dead := snowtest.DB(t)
	conn, err := dead.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, `INSERT INTO `+table+` ("id", "name") VALUES (100, 'dead')`)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, `UPDATE "__flightline_checkpoints" SET updated_at = CURRENT_TIMESTAMP() WHERE pipeline_id = ?`, p.ID)
	require.NoError(t, err)
	// The process "dies" here: nothing more is sent on this session.

	start := time.Now()
	w2, cp, err := newSink(t, retryFor(3*time.Minute)).Open(ctx, p)
	require.NoError(t, err)
	t.Logf("the newer Open claimed the target after %v", time.Since(start).Round(time.Second))
	require.Equal(t, string(sinktest.CP(5)), string(cp))
	rec2 := sinktest.Batch(mem, 5, 8)
	defer rec2.Release()
	require.NoError(t, w2.WriteBatch(ctx, rec2, sinktest.CP(8)))
	require.ElementsMatch(t, []int64{0, 1, 2, 3, 4, 5, 6, 7}, snowtest.IDs(t, table))
	_ = tx.Rollback()
}

// A writer that dies inside its batch transaction (after the checkpoint's
// compare-and-set, before COMMIT) leaves the transaction open with its
// locks. The next writer's Open finds it by name in SHOW TRANSACTIONS and
// aborts it (SYSTEM$ABORT_TRANSACTION), so it claims at once: the bound
// (15 s) is below the emulator's 20 s idle roll-back, the fallback an
// unnamed dead transaction waits for (TestIntegrationDeadWritersTransaction).
// The dead batch's rows never appear; the dead writer, resumed, is fenced.
func TestIntegrationClaimAbortsDeadWritersTransaction(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := snowtest.Name("aborted_tx")
	p := flightsink.Pipeline{ID: table, Target: table}
	w, _, err := newSink(t).Open(ctx, p)
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 5)
	defer rec.Release()
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(5)))

	// The first writer stops for good between its compare-and-set and its
	// COMMIT: its transaction holds the checkpoint row, and its session
	// sends nothing more.
	var stopped atomic.Bool
	reached, release := make(chan struct{}), make(chan struct{})
	defer snowflake.SetBeforeCommitHook(func() {
		if stopped.CompareAndSwap(false, true) {
			close(reached)
			<-release
		}
	})()
	dead := sinktest.Batch(mem, 100, 103)
	defer dead.Release()
	deadErr := make(chan error, 1)
	go func() { deadErr <- w.WriteBatch(ctx, dead, sinktest.CP(103)) }()
	<-reached

	claimWithin15s(t, mem, p, "claim over a dead writer's open transaction")

	close(release)
	err = <-deadErr
	require.ErrorIs(t, err, flightline.ErrFenced, "the writer whose transaction was aborted")
	require.ElementsMatch(t, []int64{0, 1, 2, 3, 4, 5, 6, 7}, snowtest.IDs(t, table))
}

// claimWithin15s opens p with a new sink within 15 s (what the tests
// above bound a claim over another session's transaction by), checks that
// it finds checkpoint 5, and commits rows 5–7 through it.
func claimWithin15s(t *testing.T, mem memory.Allocator, p flightsink.Pipeline, what string) {
	t.Helper()
	bounded, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	w2, cp, err := newSink(t, retryFor(15*time.Second)).Open(bounded, p)
	require.NoError(t, err, "%s (%v)", what, time.Since(start))
	t.Logf("the newer Open claimed the target after %v", time.Since(start).Round(time.Millisecond))
	require.Equal(t, string(sinktest.CP(5)), string(cp))
	rec2 := sinktest.Batch(mem, 5, 8)
	defer rec2.Release()
	require.NoError(t, w2.WriteBatch(bounded, rec2, sinktest.CP(8)))
}

// A session closed by its client with a transaction open: Snowflake rolls
// the transaction back at the close, so a newer writer claims at once. The
// sink relies on that when it closes a session whose ROLLBACK failed
// (txn.go); this checks that the emulator does the same (fakesnow forgets
// the session, and dropping its DuckDB connection rolls the transaction
// back), so that the other tests exercise that path as Snowflake would. The
// bound (15 s) is below the wrapper's 20 s idle-session rollback, which
// would otherwise hide a regression.
func TestIntegrationClosedSessionsTransaction(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	table := snowtest.Name("closed_tx")
	p := flightsink.Pipeline{ID: table, Target: table}
	w, _, err := newSink(t).Open(ctx, p)
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 5)
	defer rec.Release()
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(5)))

	conn, err := snowtest.DB(t).Conn(ctx)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, `BEGIN`)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, `INSERT INTO `+table+` ("id", "name") VALUES (100, 'closed')`)
	require.NoError(t, err)
	_, err = conn.ExecContext(ctx, `UPDATE "__flightline_checkpoints" SET updated_at = CURRENT_TIMESTAMP() WHERE pipeline_id = ?`, p.ID)
	require.NoError(t, err)
	// Close the session (gosnowflake logs out) instead of returning it to
	// the pool.
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()

	claimWithin15s(t, mem, p, "claim after a session closed in a transaction")
	require.ElementsMatch(t, []int64{0, 1, 2, 3, 4, 5, 6, 7}, snowtest.IDs(t, table))
}
