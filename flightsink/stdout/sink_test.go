package stdout_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/flightsink/stdout"
)

// outputs is one terminal per target, shared by every sink instance of a
// test, as a restarted process prints to the same terminal.
type outputs struct {
	mu sync.Mutex
	m  map[string]*lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (o *outputs) of(target string) *lockedBuffer {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m[target] == nil {
		o.m[target] = &lockedBuffer{}
	}
	return o.m[target]
}

func harness(f stdout.Format, parse func(t *testing.T, out string) []int64) sinktest.Harness {
	o := &outputs{m: map[string]*lockedBuffer{}}
	return sinktest.Harness{
		Guarantee: flightsink.AtLeastOnce,
		Repeats:   true,
		NewSink: func(t *testing.T) flightsink.Sink {
			s, err := stdout.New(context.Background(), stdout.Config{Format: f},
				stdout.WithWriter(io.Discard), stdout.PerTarget(func(target string) io.Writer { return o.of(target) }))
			require.NoError(t, err)
			return s
		},
		IDs: func(t *testing.T, p flightsink.Pipeline) []int64 { return parse(t, o.of(p.Target).String()) },
	}
}

func jsonIDs(t *testing.T, out string) []int64 {
	var ids []int64
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var row struct {
			ID   *int64  `json:"id"`
			Name *string `json:"name"`
		}
		require.NoError(t, json.Unmarshal(sc.Bytes(), &row), "line %q", sc.Text())
		require.NotNil(t, row.ID, "line %q", sc.Text())
		ids = append(ids, *row.ID)
	}
	return ids
}

func csvIDs(t *testing.T, out string) []int64 {
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err)
	var ids []int64
	for _, r := range recs {
		if r[0] == "id" { // a header: one per writer
			continue
		}
		id, err := strconv.ParseInt(r[0], 10, 64)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	return ids
}

func TestConformanceJSONL(t *testing.T) { sinktest.Run(t, harness(stdout.JSONL, jsonIDs)) }

func TestConformanceCSV(t *testing.T) { sinktest.Run(t, harness(stdout.CSV, csvIDs)) }

// printed writes batches with one sink and returns what it printed.
func printed(t *testing.T, cfg stdout.Config, recs ...arrow.RecordBatch) string {
	t.Helper()
	var b bytes.Buffer
	s, err := stdout.New(context.Background(), cfg, stdout.WithWriter(&b))
	require.NoError(t, err)
	w, cp, err := s.Open(context.Background(), flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	require.Nil(t, cp)
	for i, rec := range recs {
		require.NoError(t, w.WriteBatch(context.Background(), rec, []byte{byte('a' + i)}))
	}
	require.NoError(t, w.Close(context.Background()))
	return b.String()
}

func mixed(t *testing.T, mem memory.Allocator, rows string) arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "price", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(rows))
	require.NoError(t, err)
	return rec
}

func TestTable(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	a := mixed(t, mem, `[{"id": 1, "note": "short", "price": 2.5},
		{"id": 22, "note": null, "price": null},
		{"id": 333, "note": "two\nlines <&>", "price": 10}]`)
	defer a.Release()
	b := mixed(t, mem, `[{"id": 4, "note": "a note far longer than the widest a cell may be", "price": 1}]`)
	defer b.Release()
	got := printed(t, stdout.Config{Format: stdout.Table, MaxWidth: 20}, a, b)
	want := "" +
		"id  | note           | price\n" +
		"----+----------------+------\n" +
		"  1 | short          |   2.5\n" +
		" 22 | null           |  null\n" +
		"333 | two\\nlines <&> |    10\n" +
		"\n" +
		"id  | note                 | price\n" +
		"----+----------------------+------\n" +
		"  4 | a note far longer t… |     1\n"
	require.Equal(t, want, got)
}

func TestJSONLKeepsColumnOrder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	a := mixed(t, mem, `[{"id": 1, "note": "<&>", "price": 2.5}, {"id": 2, "note": null, "price": null}]`)
	defer a.Release()
	require.Equal(t, `{"id":1,"note":"<&>","price":2.5}`+"\n"+`{"id":2,"note":null,"price":null}`+"\n", printed(t, stdout.Config{}, a))
}

func TestCSV(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	a := mixed(t, mem, `[{"id": 1, "note": "a,b", "price": 2.5}, {"id": 2, "note": null, "price": null}]`)
	defer a.Release()
	b := mixed(t, mem, `[{"id": 3, "note": "c", "price": 1}]`)
	defer b.Release()
	require.Equal(t, "id,note,price\n1,\"a,b\",2.5\n2,,\n3,c,1\n", printed(t, stdout.Config{Format: stdout.CSV}, a, b))
}

func TestBadOptions(t *testing.T) {
	_, err := stdout.New(context.Background(), stdout.Config{Format: "xml"}, stdout.WithWriter(io.Discard))
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = stdout.New(context.Background(), stdout.Config{MaxWidth: 3}, stdout.WithWriter(io.Discard))
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}

// failing is a writer whose reader went away.
type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestWriteErrorKeepsCheckpoint(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, err := stdout.New(context.Background(), stdout.Config{}, stdout.WithWriter(failing{}))
	require.NoError(t, err)
	p := flightsink.Pipeline{ID: "p"}
	w, _, err := s.Open(context.Background(), p)
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 3)
	defer rec.Release()
	require.ErrorContains(t, w.WriteBatch(context.Background(), rec, sinktest.CP(3)), "broken pipe")
	cp, err := s.Checkpoint(context.Background(), p)
	require.NoError(t, err)
	require.Nil(t, cp, "a batch that was not printed must not move the checkpoint")
}
