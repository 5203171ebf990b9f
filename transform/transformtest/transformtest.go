// Package transformtest holds helpers for testing transforms: an in-memory
// Stream and a reader that drains one.
package transformtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/transform"
)

// Schema is the schema of Batch: id int64, name string.
var Schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// Batch returns rows ids from..to-1 with names "n<id>", from mem.
func Batch(mem memory.Allocator, from, to int64) arrow.RecordBatch {
	ib := array.NewInt64Builder(mem)
	defer ib.Release()
	sb := array.NewStringBuilder(mem)
	defer sb.Release()
	for i := from; i < to; i++ {
		ib.Append(i)
		sb.Append(fmt.Sprintf("n%d", i))
	}
	id, name := ib.NewArray(), sb.NewArray()
	defer id.Release()
	defer name.Release()
	return array.NewRecordBatch(Schema, []arrow.Array{id, name}, to-from)
}

// Item is one batch of a Slice with its checkpoint; Err, when set, is
// returned instead.
type Item struct {
	Rec arrow.RecordBatch
	CP  []byte
	Err error
}

// Batches returns n items of per rows each with positions checkpoints
// {"t/0": end}.
func Batches(mem memory.Allocator, n int, per int64) []Item {
	var out []Item
	for i := int64(0); i < int64(n); i++ {
		out = append(out, Item{Rec: Batch(mem, i*per, i*per+per), CP: checkpoint.Positions{"t/0": i*per + per}.Encode()})
	}
	return out
}

// Slice is a Stream over items; it owns their batches (Close releases
// those not yet returned) and ends with io.EOF, or blocks until ctx ends
// when Block is set.
type Slice struct {
	Block bool

	mu     sync.Mutex
	items  []Item
	closed bool
}

// NewSlice returns a Stream over items.
func NewSlice(items []Item) *Slice { return &Slice{items: items} }

// Next implements transform.Stream.
func (s *Slice) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil, errors.New("transformtest: stream closed")
	}
	if len(s.items) == 0 {
		s.mu.Unlock()
		if s.Block {
			<-ctx.Done()
			return nil, nil, ctx.Err()
		}
		return nil, nil, io.EOF
	}
	it := s.items[0]
	s.items = s.items[1:]
	s.mu.Unlock()
	if it.Err != nil {
		return nil, nil, it.Err
	}
	return it.Rec, it.CP, nil
}

// Close implements transform.Stream.
func (s *Slice) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range s.items {
		if it.Rec != nil {
			it.Rec.Release()
		}
	}
	s.items, s.closed = nil, true
	return nil
}

// Got is what Drain read.
type Got struct {
	IDs  []int64
	CPs  []string
	Rows []int64
}

// Drain reads s to its end, releasing every batch, and closes it. It
// returns what it read and the error that ended it (nil for io.EOF).
func Drain(ctx context.Context, s transform.Stream) (Got, error) {
	defer s.Close()
	var g Got
	for {
		rec, cp, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			return g, nil
		}
		if err != nil {
			return g, err
		}
		g.CPs = append(g.CPs, string(cp))
		g.Rows = append(g.Rows, rec.NumRows())
		if rec.NumCols() > 0 {
			if ids, ok := rec.Column(0).(*array.Int64); ok {
				g.IDs = append(g.IDs, ids.Int64Values()...)
			}
		}
		rec.Release()
	}
}

// FieldNames returns the field names of rec, comma-separated.
func FieldNames(rec arrow.RecordBatch) string {
	var b strings.Builder
	for i, f := range rec.Schema().Fields() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.Name)
	}
	return b.String()
}
