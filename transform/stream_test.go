package transform_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/transform"
	tt "github.com/flightline/flightline/transform/transformtest"
)

// out is one scripted output: rows [from, to) of tt.Batch, carrying the
// checkpoint of input in (-1: none) or raw when set.
type out struct {
	from, to int64
	in       int
	raw      string
	schema   *arrow.Schema // a different schema: one int64 column "other"
}

// scripted is a Transform that reads its whole input, then sends outs.
type scripted struct {
	mem  memory.Allocator
	outs []out
	// partial stops reading after this many inputs (0: all).
	partial int
}

func (s scripted) Exchange(ctx context.Context, in transform.Stream) (transform.Stream, error) {
	var cps [][]byte
	for s.partial == 0 || len(cps) < s.partial {
		rec, cp, err := in.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		rec.Release()
		cps = append(cps, cp)
	}
	return &scriptStream{s: s, cps: cps, in: in}, nil
}

type scriptStream struct {
	s   scripted
	cps [][]byte
	in  transform.Stream
	i   int
}

func (t *scriptStream) Next(context.Context) (arrow.RecordBatch, []byte, error) {
	if t.i == len(t.s.outs) {
		return nil, nil, io.EOF
	}
	o := t.s.outs[t.i]
	t.i++
	rec := tt.Batch(t.s.mem, o.from, o.to)
	if o.schema != nil {
		other := array.NewRecordBatch(o.schema, []arrow.Array{rec.Column(0)}, rec.NumRows())
		rec.Release()
		rec = other
	}
	var cp []byte
	switch {
	case o.raw != "":
		cp = []byte(o.raw)
	case o.in >= 0:
		cp = t.cps[o.in]
	}
	return rec, cp, nil
}

func (t *scriptStream) Close() error { return t.in.Close() }

func pos(n int64) string { return string(checkpoint.Positions{"t/0": n}.Encode()) }

// Checked passes outputs that keep the contract and puts them in the
// sink's form: split pieces joined, merged checkpoints merged.
func TestCheckedAccepts(t *testing.T) {
	otherSchema := arrow.NewSchema([]arrow.Field{{Name: "other", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for _, c := range []struct {
		name  string
		outs  []out
		want  tt.Got
		input func(mem memory.Allocator) []tt.Item
	}{
		{name: "identity", outs: []out{{0, 10, 0, "", nil}, {10, 20, 1, "", nil}, {20, 30, 2, "", nil}},
			want: tt.Got{IDs: seq(0, 30), CPs: []string{pos(10), pos(20), pos(30)}, Rows: []int64{10, 10, 10}}},
		{name: "filter answers dropped inputs with 0 rows", outs: []out{{0, 3, 0, "", nil}, {0, 0, 1, "", nil}, {25, 26, 2, "", nil}},
			want: tt.Got{IDs: []int64{0, 1, 2, 25}, CPs: []string{pos(10), pos(20), pos(30)}, Rows: []int64{3, 0, 1}}},
		{name: "split pieces join the piece with the checkpoint", outs: []out{{0, 4, -1, "", nil}, {4, 10, 0, "", nil}, {10, 12, -1, "", nil}, {12, 15, -1, "", nil}, {15, 30, 2, "", nil}},
			want: tt.Got{IDs: seq(0, 30), CPs: []string{pos(10), pos(30)}, Rows: []int64{10, 20}}},
		{name: "merge skips checkpoints", outs: []out{{0, 30, 2, "", nil}},
			want: tt.Got{IDs: seq(0, 30), CPs: []string{pos(30)}, Rows: []int64{30}}},
		{name: "merge of partial positions stores every key", outs: []out{{0, 3, 1, "", nil}},
			input: func(mem memory.Allocator) []tt.Item {
				return []tt.Item{
					{Rec: tt.Batch(mem, 0, 1), CP: checkpoint.Positions{"t/0": 5}.Encode()},
					{Rec: tt.Batch(mem, 1, 3), CP: checkpoint.Positions{"t/1": 7}.Encode()},
				}
			},
			want: tt.Got{IDs: seq(0, 3), CPs: []string{`{"positions":{"t/0":5,"t/1":7}}`}, Rows: []int64{3}}},
		{name: "opaque merged checkpoint is the last", outs: []out{{0, 3, 1, "", nil}},
			input: func(mem memory.Allocator) []tt.Item {
				return []tt.Item{{Rec: tt.Batch(mem, 0, 1), CP: []byte("v1")}, {Rec: tt.Batch(mem, 1, 3), CP: []byte("v2")}}
			},
			want: tt.Got{IDs: seq(0, 3), CPs: []string{"v2"}, Rows: []int64{3}}},
		{name: "schema may change from the input's", outs: []out{{0, 10, 0, "", otherSchema}, {10, 30, 2, "", otherSchema}},
			want: tt.Got{IDs: seq(0, 30), CPs: []string{pos(10), pos(30)}, Rows: []int64{10, 20}}},
		{name: "heartbeats are not forwarded", outs: []out{{0, 10, 0, "", nil}, {10, 20, 1, "", nil}},
			input: func(mem memory.Allocator) []tt.Item {
				b := tt.Batches(mem, 2, 10)
				hb := tt.Item{Rec: tt.Batch(mem, 0, 0), CP: b[0].CP}
				return []tt.Item{b[0], hb, b[1]}
			},
			want: tt.Got{IDs: seq(0, 20), CPs: []string{pos(10), pos(20)}, Rows: []int64{10, 10}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			items := tt.Batches(mem, 3, 10)
			if c.input != nil {
				for _, it := range items {
					it.Rec.Release()
				}
				items = c.input(mem)
			}
			ctx := context.Background()
			s, err := transform.Checked("scripted", scripted{mem: mem, outs: c.outs}, mem).Exchange(ctx, tt.NewSlice(items))
			require.NoError(t, err)
			got, err := tt.Drain(ctx, s)
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

// Checked refuses every way of breaking the contract, with
// ErrContract (not retryable), and leaks nothing on the way.
func TestCheckedRefuses(t *testing.T) {
	otherSchema := arrow.NewSchema([]arrow.Field{{Name: "other", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for _, c := range []struct {
		name    string
		outs    []out
		partial int
		msg     string
	}{
		{name: "invented checkpoint", outs: []out{{0, 10, -1, `{"positions":{"t/0":11}}`, nil}}, msg: "never sent to it as input"},
		{name: "out of order", outs: []out{{0, 10, 1, "", nil}, {10, 20, 0, "", nil}}, msg: "out of order"},
		{name: "repeated", outs: []out{{0, 10, 0, "", nil}, {10, 20, 0, "", nil}}, msg: "out of order"},
		{name: "last input unanswered", outs: []out{{0, 10, 0, "", nil}, {10, 20, 1, "", nil}}, msg: "1 input batches unanswered"},
		{name: "rows without a checkpoint at the end", outs: []out{{0, 30, 2, "", nil}, {30, 31, -1, "", nil}}, msg: "carry no checkpoint"},
		{name: "ended before its input", partial: 2, outs: []out{{0, 10, 0, "", nil}, {10, 20, 1, "", nil}}, msg: "ended before its input"},
		{name: "schema changed", outs: []out{{0, 10, 0, "", nil}, {10, 30, 2, "", otherSchema}}, msg: "schema changed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			ctx := context.Background()
			s, err := transform.Checked("scripted", scripted{mem: mem, outs: c.outs, partial: c.partial}, mem).Exchange(ctx, tt.NewSlice(tt.Batches(mem, 3, 10)))
			require.NoError(t, err)
			_, err = tt.Drain(ctx, s)
			require.ErrorIs(t, err, transform.ErrContract)
			require.ErrorIs(t, err, flightline.ErrInvalidInput)
			require.False(t, flightline.IsRetryable(err))
			require.ErrorContains(t, err, "transform scripted")
			require.ErrorContains(t, err, c.msg)
		})
	}
}

// A batch without a checkpoint never reaches a transform.
func TestCheckedInputNeedsCheckpoint(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	in := tt.NewSlice([]tt.Item{{Rec: tt.Batch(mem, 0, 1)}})
	s, err := transform.Checked("m", transform.Map(passThrough), mem).Exchange(ctx, in)
	require.NoError(t, err)
	_, err = tt.Drain(ctx, s)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
