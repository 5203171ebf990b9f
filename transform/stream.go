package transform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
)

// Stream is a sequence of batches, each with the checkpoint reached once it
// is durably written downstream. flightsrc.Reader is one.
type Stream interface {
	// Next blocks until the next batch is ready and returns it with its
	// checkpoint. The caller owns the batch and must Release it. It returns
	// io.EOF at the end of a bounded stream, and ctx.Err() when ctx ends
	// first.
	Next(ctx context.Context) (arrow.RecordBatch, []byte, error)
	// Close releases the stream; batches already returned stay valid.
	Close() error
}

// Transform rewrites a stream of batches between a source and a sink,
// following the transform contract of docs/protocol.md: every output
// batch carries either no checkpoint or the checkpoint of an input batch it
// has fully consumed, in input order; inputs whose rows are all dropped are
// still answered (with a 0-row batch); outputs without a checkpoint are
// joined to the next one that has one. A Transform keeps no state from one
// Exchange to the next.
//
// Map makes a Transform of a Func; flighttransform.Client is one served by
// a remote DoExchange endpoint. Wrap either with Checked before trusting
// its checkpoints.
type Transform interface {
	// Exchange starts transforming in and returns the output stream, which
	// owns in: closing it closes in. ctx bounds the exchange; ending it
	// makes the output's Next fail.
	Exchange(ctx context.Context, in Stream) (Stream, error)
}

// Map returns a Transform that runs f over every batch, one output per
// input, each carrying its input's checkpoint.
func Map(f Func) Transform { return mapper{f} }

type mapper struct{ f Func }

func (m mapper) Exchange(_ context.Context, in Stream) (Stream, error) {
	return &mapStream{f: m.f, in: in}, nil
}

type mapStream struct {
	f  Func
	in Stream
}

func (m *mapStream) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	rec, cp, err := m.in.Next(ctx)
	if err != nil {
		return nil, nil, err
	}
	out, err := m.f(ctx, rec)
	rec.Release()
	if err != nil {
		return nil, nil, err
	}
	return out, cp, nil
}

func (m *mapStream) Close() error { return m.in.Close() }

// ErrContract is wrapped by the error Checked returns when a transform
// breaks the checkpoint contract. It wraps flightline.ErrInvalidInput: the
// pipeline stops, since retrying feeds the same batches to the same code.
var ErrContract = fmt.Errorf("%w: transform broke the checkpoint contract", flightline.ErrInvalidInput)

// Checked returns t with its output checked against the contract of
// docs/protocol.md, and put in the form a sink takes: every batch with a
// checkpoint. name (a URL, a built-in's name) goes into error messages;
// mem (nil: the default allocator) holds joined batches.
//
// On the input side it drops heartbeats (0-row batches repeating the
// previous checkpoint) and refuses batches without a checkpoint. On the
// output side it fails with ErrContract when an output carries a
// checkpoint never sent as input, one out of order or repeated, a schema
// other than the first output's, or when the output ends while inputs are
// unanswered or rows wait without a checkpoint. Outputs without a
// checkpoint (pieces of a split input) are held and joined to the next
// output that has one, into one batch. An output that answers several
// inputs at once (a merge) is handed on with the per-key maximum of their
// checkpoints when all are in the positions form, with its own otherwise.
func Checked(name string, t Transform, mem memory.Allocator) Transform {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return checked{name: name, t: t, mem: mem}
}

type checked struct {
	name string
	t    Transform
	mem  memory.Allocator
}

func (c checked) Exchange(ctx context.Context, in Stream) (Stream, error) {
	ci := &checkedIn{in: in}
	out, err := c.t.Exchange(ctx, ci)
	if err != nil {
		return nil, err
	}
	return &checkedOut{name: c.name, mem: c.mem, in: ci, out: out}, nil
}

// checkedIn records the checkpoints a transform has pulled, in order.
type checkedIn struct {
	in Stream

	mu      sync.Mutex
	pending [][]byte // pulled, not yet answered
	last    []byte   // the last checkpoint pulled
	ended   bool     // in returned io.EOF
}

func (c *checkedIn) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	for {
		rec, cp, err := c.in.Next(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				c.mu.Lock()
				c.ended = true
				c.mu.Unlock()
			}
			return nil, nil, err
		}
		if len(cp) == 0 {
			rec.Release()
			return nil, nil, fmt.Errorf("%w: a batch without a checkpoint reached a transform", flightline.ErrInvalidInput)
		}
		c.mu.Lock()
		if rec.NumRows() == 0 && bytes.Equal(cp, c.last) {
			c.mu.Unlock()
			rec.Release() // a heartbeat: nothing to transform, nothing to answer
			continue
		}
		c.pending = append(c.pending, cp)
		c.last = cp
		c.mu.Unlock()
		return rec, cp, nil
	}
}

func (c *checkedIn) Close() error { return c.in.Close() }

// Schema is the input's schema when it tells (a flightsrc.Reader does),
// so a remote transform can send it before the first batch; nil otherwise.
func (c *checkedIn) Schema() *arrow.Schema {
	if s, ok := c.in.(interface{ Schema() *arrow.Schema }); ok {
		return s.Schema()
	}
	return nil
}

// answer pops the pending inputs up to the first one whose checkpoint is
// cp and returns them; nil when cp is not pending.
func (c *checkedIn) answer(cp []byte) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.pending {
		if bytes.Equal(p, cp) {
			done := c.pending[: i+1 : i+1]
			c.pending = c.pending[i+1:]
			return done
		}
	}
	return nil
}

func (c *checkedIn) state() (pending int, last []byte, ended bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) > 0 {
		last = c.pending[len(c.pending)-1]
	}
	return len(c.pending), last, c.ended
}

type checkedOut struct {
	name string
	mem  memory.Allocator
	in   *checkedIn
	out  Stream

	schema   *arrow.Schema
	held     []arrow.RecordBatch // outputs without a checkpoint, owned
	answered [][]byte            // the latest checkpoints answered or skipped, newest last
	err      error               // a contract violation, sticky
}

func (c *checkedOut) violation(format string, args ...any) error {
	c.err = fmt.Errorf("%w: transform %s: %s", ErrContract, c.name, fmt.Sprintf(format, args...))
	return c.err
}

func (c *checkedOut) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	if c.err != nil {
		return nil, nil, c.err
	}
	for {
		rec, cp, err := c.out.Next(ctx)
		if errors.Is(err, io.EOF) {
			n, last, ended := c.in.state()
			switch {
			case !ended:
				return nil, nil, c.violation("its output ended before its input did")
			case n > 0:
				return nil, nil, c.violation("its output ended with %d input batches unanswered; the last input's checkpoint %q never came back", n, clip(last))
			case len(c.held) > 0:
				return nil, nil, c.violation("its output ended with %d batches that carry no checkpoint", len(c.held))
			}
			return nil, nil, io.EOF
		}
		if err != nil {
			return nil, nil, err
		}
		if c.schema == nil {
			c.schema = rec.Schema()
		} else if !c.schema.Equal(rec.Schema()) {
			rec.Release()
			return nil, nil, c.violation("its output schema changed from %s to %s within one exchange", c.schema, rec.Schema())
		}
		if len(cp) == 0 {
			c.held = append(c.held, rec)
			continue
		}
		done := c.in.answer(cp)
		if done == nil {
			rec.Release()
			for _, a := range c.answered {
				if bytes.Equal(a, cp) {
					return nil, nil, c.violation("it sent checkpoint %q again, or out of order (it was already answered)", clip(cp))
				}
			}
			return nil, nil, c.violation("it sent checkpoint %q, which was never sent to it as input", clip(cp))
		}
		c.answered = append(c.answered, done...)
		if len(c.answered) > 64 {
			c.answered = append(c.answered[:0], c.answered[len(c.answered)-32:]...)
		}
		if len(c.held) > 0 {
			joined, err := c.join(rec)
			if err != nil {
				return nil, nil, err
			}
			rec = joined
		}
		return rec, merged(done), nil
	}
}

// join concatenates the held outputs and rec into one batch; it releases
// them all.
func (c *checkedOut) join(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	parts := append(c.held, rec)
	c.held = nil
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	out, err := Concat(c.mem, parts)
	if err != nil {
		return nil, fmt.Errorf("transform %s: joining %d split outputs: %w", c.name, len(parts), err)
	}
	return out, nil
}

// Concat returns one batch holding the rows of recs, which share one
// schema, in order; a dictionary column's dictionaries are unified. recs
// stay the caller's; the caller releases the result. mem nil means
// memory.DefaultAllocator.
func Concat(mem memory.Allocator, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(recs) == 0 {
		return nil, errors.New("transform: Concat of no batches")
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	schema := recs[0].Schema()
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, a := range cols {
			if a != nil {
				a.Release()
			}
		}
	}()
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	arrs := make([]arrow.Array, len(recs))
	for i := range cols {
		for j, r := range recs {
			arrs[j] = r.Column(i)
		}
		a, err := array.Concatenate(arrs, mem)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", schema.Field(i).Name, err)
		}
		cols[i] = a
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}

// merged is the checkpoint that stands for the inputs done, in order: the
// last one's, or the per-key maximum of all when all are positions.
func merged(done [][]byte) []byte {
	last := done[len(done)-1]
	if len(done) == 1 {
		return last
	}
	acc, err := checkpoint.Parse(last)
	if err != nil {
		return last
	}
	for _, d := range done[:len(done)-1] {
		p, err := checkpoint.Parse(d)
		if err != nil {
			return last
		}
		acc = checkpoint.Merge(acc, p)
	}
	return acc.Encode()
}

func (c *checkedOut) Close() error {
	for _, h := range c.held {
		h.Release()
	}
	c.held = nil
	return c.out.Close()
}

func clip(b []byte) string {
	if len(b) > 256 {
		return string(b[:256]) + "…"
	}
	return string(b)
}
