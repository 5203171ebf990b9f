package flightsrc

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
)

// Generator is a deterministic source of synthetic orders, for the demo,
// tests and benchmarks. Row i always has the same values, so a resumed
// stream is checkable: every id in [0, Rows) must arrive exactly once.
//
// Its checkpoint is the mergeable form {"positions":{"<stream>/0": next}}.
// Batch boundaries are deterministic from a given start: batches hold rows
// [start, start+BatchRows), [start+BatchRows, ...), the last one shorter.
type Generator struct {
	stream    string
	rows      int64
	batchRows int
	interval  time.Duration
	mem       memory.Allocator
}

// GeneratorSchema is the schema of the generator's orders.
var GeneratorSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "customer", Type: arrow.BinaryTypes.String},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64},
	{Name: "quantity", Type: arrow.PrimitiveTypes.Int32},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
}, nil)

// GeneratorOption configures a Generator.
type GeneratorOption func(*Generator)

// GenStream names the stream; default "orders".
func GenStream(name string) GeneratorOption { return func(g *Generator) { g.stream = name } }

// GenRows sets how many rows the stream has; 0 means unbounded.
func GenRows(n int64) GeneratorOption { return func(g *Generator) { g.rows = n } }

// GenBatchRows sets the rows per batch; default 10000.
func GenBatchRows(n int) GeneratorOption { return func(g *Generator) { g.batchRows = n } }

// GenInterval pauses between batches, to simulate a slow source.
func GenInterval(d time.Duration) GeneratorOption { return func(g *Generator) { g.interval = d } }

// GenAllocator sets the allocator batches are built with; nil means
// memory.DefaultAllocator, the default.
func GenAllocator(mem memory.Allocator) GeneratorOption {
	return func(g *Generator) {
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		g.mem = mem
	}
}

// NewGenerator returns a Generator.
func NewGenerator(opts ...GeneratorOption) (*Generator, error) {
	g := &Generator{stream: "orders", batchRows: 10000, mem: memory.DefaultAllocator}
	for _, o := range opts {
		o(g)
	}
	if g.stream == "" || g.batchRows < 1 || g.rows < 0 {
		return nil, fmt.Errorf("%w: generator needs a stream name, batch rows >= 1 and rows >= 0", flightline.ErrInvalidInput)
	}
	return g, nil
}

func (g *Generator) key() string { return g.stream + "/0" }

// Streams implements Source.
func (g *Generator) Streams(context.Context) ([]Stream, error) {
	desc := "deterministic synthetic orders, unbounded"
	if g.rows > 0 {
		desc = fmt.Sprintf("deterministic synthetic orders, %d rows", g.rows)
	}
	return []Stream{{Name: g.stream, Schema: GeneratorSchema, Description: desc}}, nil
}

// Read implements Source.
func (g *Generator) Read(_ context.Context, req ReadRequest) (Reader, error) {
	if req.Stream != g.stream {
		return nil, fmt.Errorf("%w: no stream %q (this generator serves %q)", flightline.ErrNotFound, req.Stream, g.stream)
	}
	next := int64(0)
	if req.After != nil {
		p, err := checkpoint.Parse(req.After)
		if err != nil {
			return nil, fmt.Errorf("%w: generator checkpoint: %v", flightline.ErrInvalidInput, err)
		}
		n, ok := p[g.key()]
		if !ok || len(p) != 1 {
			return nil, fmt.Errorf("%w: generator checkpoint must hold exactly position %q, got %s", flightline.ErrInvalidInput, g.key(), req.After)
		}
		if n > math.MaxInt64-int64(g.batchRows) {
			// Row n+batchRows would wrap past the largest int64 into
			// negative positions.
			return nil, fmt.Errorf("%w: generator position %d is past the last one it can serve (%d)", flightline.ErrInvalidInput, n, int64(math.MaxInt64-g.batchRows))
		}
		next = n
	}
	return &genReader{g: g, next: next}, nil
}

// Commit implements Source; the generator keeps no progress, but a commit
// naming a stream it does not serve is ErrNotFound, as a read would be.
func (g *Generator) Commit(_ context.Context, req CommitRequest) error {
	if req.Stream != g.stream {
		return fmt.Errorf("%w: no stream %q (this generator serves %q)", flightline.ErrNotFound, req.Stream, g.stream)
	}
	return nil
}

// End implements Ender for a bounded generator (rows > 0): the stream ends
// at its last row. An unbounded one has no end, which is an error saying
// so.
func (g *Generator) End(_ context.Context, stream string) (End, error) {
	if stream != g.stream {
		return End{}, fmt.Errorf("%w: no stream %q (this generator serves %q)", flightline.ErrNotFound, stream, g.stream)
	}
	if g.rows == 0 {
		return End{}, fmt.Errorf("%w: this generator is unbounded (rows=0) and has no end: give it rows=N", flightline.ErrInvalidInput)
	}
	next := func(cp []byte) (int64, error) {
		if cp == nil {
			return 0, nil
		}
		p, err := checkpoint.Parse(cp)
		if err != nil {
			return 0, fmt.Errorf("%w: generator checkpoint: %v", flightline.ErrInvalidInput, err)
		}
		return p[g.key()], nil
	}
	return End{
		Desc: fmt.Sprintf("row %d", g.rows),
		Covered: func(_ context.Context, cp []byte) (bool, error) {
			n, err := next(cp)
			return n >= g.rows, err
		},
		Left: func(_ context.Context, cp []byte) (int64, error) {
			n, err := next(cp)
			return max(0, g.rows-n), err
		},
	}, nil
}

type genReader struct {
	g     *Generator
	next  int64
	first bool
}

func (r *genReader) Schema() *arrow.Schema { return GeneratorSchema }

func (r *genReader) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	g := r.g
	if g.rows > 0 && r.next >= g.rows {
		return nil, nil, io.EOF
	}
	if g.interval > 0 && r.first {
		t := time.NewTimer(g.interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, ctx.Err()
		case <-t.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	r.first = true
	if r.next > math.MaxInt64-int64(g.batchRows) {
		return nil, nil, io.EOF // the largest position an int64 holds
	}
	end := r.next + int64(g.batchRows)
	if g.rows > 0 && end > g.rows {
		end = g.rows
	}
	rec := GenerateOrders(g.mem, r.next, end)
	r.next = end
	return rec, checkpoint.Positions{g.key(): end}.Encode(), nil
}

func (r *genReader) Close() error { return nil }

// GenerateOrders builds the generator's rows [from, to). The caller releases
// the batch.
func GenerateOrders(mem memory.Allocator, from, to int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, GeneratorSchema)
	defer b.Release()
	n := int(to - from)
	ids := b.Field(0).(*array.Int64Builder)
	cust := b.Field(1).(*array.StringBuilder)
	amt := b.Field(2).(*array.Float64Builder)
	qty := b.Field(3).(*array.Int32Builder)
	ts := b.Field(4).(*array.TimestampBuilder)
	ids.Reserve(n)
	cust.Reserve(n)
	cust.ReserveData(n * 9)
	amt.Reserve(n)
	qty.Reserve(n)
	ts.Reserve(n)
	var buf [16]byte
	const base = 1767225600000 // 2026-01-01T00:00:00Z in ms
	for i := from; i < to; i++ {
		ids.UnsafeAppend(i)
		c := buf[:0]
		c = append(c, "cust-"...)
		k := (i * 7919) % 10000
		c = append(c, byte('0'+k/1000), byte('0'+k/100%10), byte('0'+k/10%10), byte('0'+k%10))
		cust.BinaryBuilder.Append(c)
		amt.UnsafeAppend(float64((i*37)%100000) / 100)
		qty.UnsafeAppend(int32(1 + i%9))
		ts.UnsafeAppend(arrow.Timestamp(base + i))
	}
	return b.NewRecordBatch()
}
