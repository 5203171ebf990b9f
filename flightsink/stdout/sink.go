package stdout

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/rowenc"
)

// Format is how batches are printed.
type Format string

// The formats.
const (
	// Table prints aligned columns under a header, for a terminal.
	Table Format = "table"
	// JSONL prints one JSON object per row, keys in column order.
	JSONL Format = "jsonl"
	// CSV prints RFC 4180 CSV with a header line.
	CSV Format = "csv"
)

// DefaultMaxWidth is the widest a table cell gets, in runes.
const DefaultMaxWidth = 40

// Config is what a stdout sink is given in its URL or YAML.
type Config struct {
	// Format is how rows are printed; the zero value means JSONL.
	Format Format
	// MaxWidth is the widest a table cell gets, in runes (at least 4);
	// longer values are cut and end in "…". Zero means DefaultMaxWidth.
	MaxWidth int
}

// Option configures a Sink beyond its Config.
type Option func(*options) error

type options struct {
	format   Format
	maxWidth int
	w        io.Writer
	route    func(target string) io.Writer
}

// WithWriter prints to w instead of os.Stdout.
func WithWriter(w io.Writer) Option {
	return func(o *options) error {
		o.w = w
		return nil
	}
}

// PerTarget sends each target's rows to the writer route returns for it
// (called once per Open) instead of the Sink's writer. Tests use it to read
// targets apart.
func PerTarget(route func(target string) io.Writer) Option {
	return func(o *options) error {
		o.route = route
		return nil
	}
}

// Sink prints batches to an io.Writer. Safe for concurrent use: batches of
// concurrent writers are printed whole, one after another.
type Sink struct {
	w    io.Writer
	opts options

	mu  sync.Mutex // serializes printing and guards cps
	cps map[flightsink.Pipeline][]byte
}

// New returns a Sink printing to os.Stdout (or the writer WithWriter
// gives). It connects to nothing; it validates cfg (a known Format, a
// MaxWidth of at least 4). Close releases nothing.
func New(_ context.Context, cfg Config, opts ...Option) (*Sink, error) {
	o := options{format: JSONL, maxWidth: DefaultMaxWidth, w: os.Stdout}
	if cfg.Format != "" {
		switch cfg.Format {
		case Table, JSONL, CSV:
			o.format = cfg.Format
		default:
			return nil, fmt.Errorf("%w: stdout sink: format %q: want table, jsonl or csv", flightline.ErrInvalidInput, cfg.Format)
		}
	}
	if cfg.MaxWidth != 0 {
		if cfg.MaxWidth < 4 {
			return nil, fmt.Errorf("%w: stdout sink: max_width %d: want at least 4", flightline.ErrInvalidInput, cfg.MaxWidth)
		}
		o.maxWidth = cfg.MaxWidth
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	return &Sink{w: o.w, opts: o, cps: map[flightsink.Pipeline][]byte{}}, nil
}

// Close releases nothing (the Sink does not own its writer) and returns nil.
func (s *Sink) Close() error { return nil }

// Format returns the sink's format.
func (s *Sink) Format() Format { return s.opts.format }

// Guarantee implements flightsink.Guaranteer. The sink promises nothing
// (see the package doc); AtLeastOnce is the weakest value the protocol
// has, and it keeps no checkpoint across processes, as AtLeastOnce says.
func (s *Sink) Guarantee() flightsink.Guarantee { return flightsink.AtLeastOnce }

// Checkpoint implements flightsink.Sink: the last checkpoint printed by this
// process for p, nil after a restart.
func (s *Sink) Checkpoint(_ context.Context, p flightsink.Pipeline) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.cps[p]), nil
}

// Open implements flightsink.Sink. It fences nothing.
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	cp, _ := s.Checkpoint(ctx, p)
	out := s.w
	if s.opts.route != nil {
		out = s.opts.route(p.Target)
	}
	return &writer{s: s, p: p, out: out}, cp, nil
}

type writer struct {
	s   *Sink
	p   flightsink.Pipeline
	out io.Writer
	buf bytes.Buffer // one batch, encoded whole before any of it is printed

	schema *arrow.Schema // of the first batch; later ones must match
	enc    encoder
}

// encoder appends one batch, printed, to dst; on error dst may hold part
// of it, which the caller drops.
type encoder = rowenc.Encoder

func (w *writer) WriteBatch(_ context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := flightsink.CheckBatch(rec, cp); err != nil {
		return err
	}
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	last := s.cps[w.p]
	if checkpoint.Replayed(last, cp) {
		return nil
	}
	if w.schema == nil {
		enc, err := s.newEncoder(rec.Schema())
		if err != nil {
			return err
		}
		w.schema, w.enc = rec.Schema(), enc
	} else if !w.schema.Equal(rec.Schema()) {
		return fmt.Errorf("%w: stdout sink: batch schema %s differs from the stream's %s", flightline.ErrSchemaMismatch, rec.Schema(), w.schema)
	}
	if rec.NumRows() > 0 {
		w.buf.Reset()
		if err := w.enc.Encode(&w.buf, rec); err != nil {
			return err
		}
		if _, err := w.out.Write(w.buf.Bytes()); err != nil {
			return fmt.Errorf("stdout sink: write: %w", err)
		}
		if w.buf.Cap() > 4<<20 {
			w.buf = bytes.Buffer{} // keep no huge buffer after one big batch
		}
	}
	s.cps[w.p] = checkpoint.Next(last, cp)
	return nil
}

func (w *writer) Close(context.Context) error { return nil }

func (s *Sink) newEncoder(sc *arrow.Schema) (encoder, error) {
	switch s.opts.format {
	case Table:
		return newTableEncoder(sc, s.opts.maxWidth), nil
	case CSV:
		return rowenc.NewCSV(sc), nil
	default:
		return rowenc.NewJSONL(sc), nil
	}
}
