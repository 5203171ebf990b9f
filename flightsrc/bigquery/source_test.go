package bigquery

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/flighterr"
)

// readAll reads stream from cp until the first heartbeat, returning the
// rows' (cursor, id) and each batch's checkpoint.
func readAll(t *testing.T, s *Source, stream string, cp []byte) (rows [][2]string, cps [][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rd, err := s.Read(ctx, flightsrc.ReadRequest{Stream: stream, After: cp})
	require.NoError(t, err)
	defer rd.Close()
	for {
		rec, cp, err := rd.Next(ctx)
		require.NoError(t, err)
		n := int(rec.NumRows())
		for i := range n {
			rows = append(rows, [2]string{valueText(rec.Column(1), i), valueText(rec.Column(0), i)})
		}
		rec.Release()
		if n == 0 {
			return rows, cps
		}
		cps = append(cps, cp)
	}
}

// A STRING cursor with ties and values that need escaping in a literal
// (quotes, backslashes, newlines, non-ASCII): read in (cursor, id) order,
// and a resume from every checkpoint returns exactly the rows after it.
func TestIntegrationBigQuerySourceStringCursor(t *testing.T) {
	e := needEmulator(t)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	e.exec(t, `CREATE TABLE `+e.table("s")+` (id INT64 NOT NULL, wm STRING)`)
	cursors := []string{`a'b`, `a\b`, "a\nb", "é", "a", "z", `'`}
	var vals []string
	want := 0
	for i := range 21 {
		lit, err := literal(cursors[i%len(cursors)], false)
		require.NoError(t, err)
		vals = append(vals, fmt.Sprintf("(%d, %s)", 20-i, lit))
		want++
	}
	vals = append(vals, "(100, NULL)") // never read
	e.exec(t, `INSERT INTO `+e.table("s")+` (id, wm) VALUES `+strings.Join(vals, ", "))
	s := e.source(t, Config{Table: "s", Cursor: "wm", Tiebreak: "id", BatchRows: 3, PollInterval: 10 * time.Millisecond}, Allocator(mem))
	rows, cps := readAll(t, s, "s", nil)
	require.Len(t, rows, want)
	for i := 1; i < len(rows); i++ {
		prev, _ := strconv.Atoi(rows[i-1][1])
		id, _ := strconv.Atoi(rows[i][1])
		require.True(t, rows[i-1][0] < rows[i][0] || (rows[i-1][0] == rows[i][0] && prev < id), "order at %d: %q then %q", i, rows[i-1], rows[i])
	}
	// Resume from a few checkpoints (each read costs the emulator seconds).
	for _, k := range []int{0, len(cps) / 2, len(cps) - 2} {
		after, _ := readAll(t, s, "s", cps[k])
		require.Equal(t, rows[3*(k+1):], after, "after checkpoint %d %s", k, cps[k])
	}
}

// Missing tables and datasets are NOT_FOUND naming them; a cursor column
// that is missing or of another type is INVALID_ARGUMENT naming it.
func TestIntegrationBigQuerySourceErrors(t *testing.T) {
	e := needEmulator(t)
	ctx := context.Background()
	e.exec(t, `CREATE TABLE `+e.table("f")+` (id INT64 NOT NULL, wm FLOAT64)`)

	_, err := e.source(t, Config{Table: "nope", Cursor: "wm", Tiebreak: "id"}).Streams(ctx)
	require.ErrorIs(t, err, flightline.ErrNotFound)
	require.ErrorContains(t, err, "table `"+e.project+"."+e.dataset+".nope` does not exist")
	require.Equal(t, codes.NotFound, flighterr.Code(err))

	_, err = e.source(t, Config{Table: "nodataset.t", Cursor: "wm", Tiebreak: "id"}).Read(ctx, flightsrc.ReadRequest{Stream: "nodataset.t"})
	require.ErrorIs(t, err, flightline.ErrNotFound)
	require.ErrorContains(t, err, "dataset "+e.project+".nodataset does not exist")

	_, err = e.source(t, Config{Table: "f", Cursor: "wm", Tiebreak: "id"}).Streams(ctx)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.ErrorContains(t, err, `column "wm" is float64`)
	_, err = e.source(t, Config{Table: "f", Cursor: "ts", Tiebreak: "id"}).Streams(ctx)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.ErrorContains(t, err, `no column "ts"`)

	_, err = New(ctx, Config{Project: e.project, Dataset: e.dataset})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}

// fakeREST answers every REST call with status and a BigQuery error body.
func fakeREST(t *testing.T, status int, reason string) (string, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
			"code": status, "message": "fake: " + reason, "errors": []map[string]string{{"reason": reason, "message": "fake"}}}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &calls
}

// HTTP 403 is PERMISSION_DENIED at once; 503 is retried (the client's own
// retries bounded by each attempt's timeout) and then UNAVAILABLE. A fake
// REST server stands in for BigQuery: the emulator has no permissions and
// no outages.
func TestSourceServiceErrors(t *testing.T) {
	ctx := context.Background()
	url, calls := fakeREST(t, http.StatusForbidden, "accessDenied")
	s, err := New(ctx, Config{Project: "p", Dataset: "d", Table: "t", Cursor: "c", Tiebreak: "c", EmulatorEndpoint: url, EmulatorGRPC: "127.0.0.1:1"}, Retry(3, time.Millisecond, 5*time.Second))
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Streams(ctx)
	require.ErrorIs(t, err, flightline.ErrPermissionDenied)
	require.Equal(t, codes.PermissionDenied, flighterr.Code(err))
	require.EqualValues(t, 1, calls.Load(), "a permission error is not retried")

	url, calls = fakeREST(t, http.StatusServiceUnavailable, "backendError")
	s2, err := New(ctx, Config{Project: "p", Dataset: "d", Table: "t", Cursor: "c", Tiebreak: "c", EmulatorEndpoint: url, EmulatorGRPC: "127.0.0.1:1"}, Retry(3, time.Millisecond, 300*time.Millisecond))
	require.NoError(t, err)
	defer s2.Close()
	start := time.Now()
	_, err = s2.Read(ctx, flightsrc.ReadRequest{Stream: "t"})
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.ErrorContains(t, err, "after 3 attempts")
	require.Equal(t, codes.Unavailable, flighterr.Code(err))
	require.GreaterOrEqual(t, calls.Load(), int64(3), "every attempt called")
	require.Less(t, time.Since(start), time.Minute)
}

// testBatch is a batch of (id, wm) rows in mem.
func testBatch(mem memory.Allocator, sc *arrow.Schema, ids, wms []int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(ids, nil)
	b.Field(1).(*array.Int64Builder).AppendValues(wms, nil)
	return b.NewRecordBatch()
}

// Rows of several Arrow batches in no order are sorted by (cursor,
// tiebreak) and cut to the batch size; nothing is left allocated.
func TestSortCut(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "wm", Type: arrow.PrimitiveTypes.Int64}}, nil)
	l := &layout{schema: sc, cursorAt: 1, tiebreakAt: 0, cursorInt: true, tieInt: true}
	a := testBatch(mem, sc, []int64{5, 1, 9}, []int64{2, 1, 0})
	b := testBatch(mem, sc, []int64{4, 2, 3}, []int64{2, 1, 1})
	defer a.Release()
	defer b.Release()
	rec, err := sortCut(context.Background(), mem, l, []arrow.RecordBatch{a, b}, 5)
	require.NoError(t, err)
	defer rec.Release()
	require.Equal(t, []int64{9, 1, 2, 3, 4}, rec.Column(0).(*array.Int64).Int64Values())
	require.Equal(t, []int64{0, 1, 1, 1, 2}, rec.Column(1).(*array.Int64).Int64Values())

	sorted := testBatch(mem, sc, []int64{1, 2}, []int64{0, 0})
	defer sorted.Release()
	same, err := sortCut(context.Background(), mem, l, []arrow.RecordBatch{sorted}, 5)
	require.NoError(t, err)
	defer same.Release()
	require.Equal(t, []int64{1, 2}, same.Column(0).(*array.Int64).Int64Values())
}

// decode reads both framings of ReadRows: BigQuery's bare record batch
// message after the session's schema message, and the emulator's whole IPC
// stream.
func TestDecodeFramings(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "wm", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := testBatch(mem, sc, []int64{1, 2, 3}, []int64{7, 8, 9})
	defer rec.Release()

	var schemaMsg, bare bytes.Buffer
	sp := ipc.GetSchemaPayload(sc, mem)
	_, err := sp.WritePayload(&schemaMsg)
	require.NoError(t, err)
	sp.Release()
	bp, err := ipc.GetRecordBatchPayload(rec, ipc.WithAllocator(mem))
	require.NoError(t, err)
	_, err = bp.WritePayload(&bare)
	require.NoError(t, err)
	bp.Release()

	var stream bytes.Buffer
	w := ipc.NewWriter(&stream, ipc.WithSchema(sc), ipc.WithAllocator(mem))
	require.NoError(t, w.Write(rec))
	require.NoError(t, w.Close())

	for name, data := range map[string][]byte{"bigquery": bare.Bytes(), "emulator": stream.Bytes()} {
		var out []arrow.RecordBatch
		require.NoError(t, decode(mem, schemaMsg.Bytes(), data, sc, &out), name)
		require.Len(t, out, 1, name)
		require.True(t, array.RecordEqual(rec, out[0]), name)
		out[0].Release()
	}
	var out []arrow.RecordBatch
	err = decode(mem, schemaMsg.Bytes(), []byte("not arrow"), sc, &out)
	require.Error(t, err)
	require.Empty(t, out)
}

// Literals of checkpoint values: INT64 must parse, strings are escaped.
func TestLiteral(t *testing.T) {
	for in, want := range map[string]string{`a'b`: `'a\'b'`, `a\b`: `'a\\b'`, "a\nb": `'a\x0ab'`, "é": "'é'"} {
		got, err := literal(in, false)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := literal("1 OR TRUE", true)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = ParseCheckpoint([]byte(`{"cursor":"1"}`))
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	cp, err := ParseCheckpoint(Checkpoint{}.Encode())
	require.NoError(t, err)
	require.Nil(t, cp.Cursor)
}

// A read that returns fewer rows than the bound query counted (a read
// session's snapshot older than the query's view; simulated by dropping a
// row from the restriction) is read again, never emitted: the batch that
// comes out has every row. A read that stays behind fails UNAVAILABLE
// instead of moving the checkpoint past the missing row.
func TestIntegrationBigQuerySourceReadBehind(t *testing.T) {
	e := needEmulator(t)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	e.exec(t, `CREATE TABLE `+e.table("b")+` (id INT64 NOT NULL, wm INT64 NOT NULL)`)
	e.exec(t, `INSERT INTO `+e.table("b")+` (id, wm) VALUES (1, 1), (2, 1), (3, 2), (4, 3)`)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	s := e.source(t, Config{Table: "b", Cursor: "wm", Tiebreak: "id", BatchRows: 3}, Allocator(mem), Retry(3, time.Millisecond, time.Minute))
	var reads atomic.Int64
	s.restrict = func(w string) string {
		if reads.Add(1) == 1 {
			return w + " AND `id` != 2"
		}
		return w
	}
	rd, err := s.Read(ctx, flightsrc.ReadRequest{Stream: "b"})
	require.NoError(t, err)
	rec, cp, err := rd.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3}, rec.Column(0).(*array.Int64).Int64Values())
	require.JSONEq(t, `{"cursor":"2","tiebreak":"3"}`, string(cp))
	rec.Release()
	require.NoError(t, rd.Close())
	require.EqualValues(t, 2, reads.Load())

	s.restrict = func(w string) string { return w + " AND `id` != 2" }
	rd, err = s.Read(ctx, flightsrc.ReadRequest{Stream: "b"})
	require.NoError(t, err)
	defer rd.Close()
	_, _, err = rd.Next(ctx)
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.ErrorContains(t, err, "the bound query counted 3")
}
