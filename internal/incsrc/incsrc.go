// Package incsrc holds the options the incremental SQL sources share
// (flightsrc/postgres, flightsrc/snowflake, flightsrc/adbc): the tables,
// each read by a cursor column and a tiebreak column, the poll interval,
// the rows per batch, the allocator and the logger, with their defaults
// and checks. Each source keeps its own exported Option functions (they
// are its API and carry its documentation) and builds them from these.
//
// It also holds what their readers share: the (cursor, tiebreak)
// checkpoint of the Snowflake and BigQuery sources (Checkpoint), the strict
// decoding every incremental checkpoint gets (DecodeCheckpoint), and the
// idle reader's wait (Sleep).
//
// ID is how a source names a table once parsed (pgx.Identifier, the parts
// of a Snowflake name, adbc.Table).
package incsrc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
)

// Defaults of Options.
const (
	DefaultInterval = time.Second
	DefaultBatch    = 10000
)

// Table is one stream: a table read in (Cursor, Tiebreak) order.
type Table[ID any] struct {
	Name             string // the stream's name: the table as the user gave it
	ID               ID     // the table's name, parsed
	Cursor, Tiebreak string // column names, exact
}

// Options are a source's settings.
type Options[ID any] struct {
	Tables   []Table[ID]
	Interval time.Duration    // between polls of an idle reader (and heartbeats)
	Batch    int              // rows per query page at most
	Mem      memory.Allocator // of the batches
	Log      *slog.Logger
}

// Option sets one of Options; a source's own Option type has the same
// underlying type, so these convert to it.
type Option[ID any] func(*Options[ID]) error

// New applies opts over the defaults (DefaultInterval, DefaultBatch,
// memory.DefaultAllocator, slog.Default()) and requires at least one
// table; kind names the source in that error ("postgres source").
func New[ID any, O ~func(*Options[ID]) error](kind string, opts []O) (Options[ID], error) {
	o := Options[ID]{Interval: DefaultInterval, Batch: DefaultBatch, Mem: memory.DefaultAllocator, Log: slog.Default()}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return Options[ID]{}, err
		}
	}
	if len(o.Tables) == 0 {
		return Options[ID]{}, fmt.Errorf("%w: %s needs at least one Table", flightline.ErrInvalidInput, kind)
	}
	return o, nil
}

// AddTable adds the stream of table, parsed by parse, read by the cursor
// and tiebreak columns, both required (columns names them in that error:
// "a cursor and a tiebreak column"). A table given twice is refused.
func AddTable[ID any](table, cursor, tiebreak string, parse func(string) (ID, error), columns string) Option[ID] {
	return func(o *Options[ID]) error {
		id, err := parse(table)
		if err != nil {
			return err
		}
		if cursor == "" || tiebreak == "" {
			return fmt.Errorf("%w: table %q needs %s", flightline.ErrInvalidInput, table, columns)
		}
		for _, t := range o.Tables {
			if t.Name == table {
				return fmt.Errorf("%w: table %q given twice", flightline.ErrInvalidInput, table)
			}
		}
		o.Tables = append(o.Tables, Table[ID]{Name: table, ID: id, Cursor: cursor, Tiebreak: tiebreak})
		return nil
	}
}

// PollInterval sets Interval; it must be positive.
func PollInterval[ID any](d time.Duration) Option[ID] {
	return func(o *Options[ID]) error {
		if d <= 0 {
			return fmt.Errorf("%w: poll interval %v", flightline.ErrInvalidInput, d)
		}
		o.Interval = d
		return nil
	}
}

// BatchRows sets Batch; it must be at least 1.
func BatchRows[ID any](n int) Option[ID] {
	return func(o *Options[ID]) error {
		if n < 1 {
			return fmt.Errorf("%w: batch rows %d", flightline.ErrInvalidInput, n)
		}
		o.Batch = n
		return nil
	}
}

// Allocator sets Mem; nil means memory.DefaultAllocator.
func Allocator[ID any](mem memory.Allocator) Option[ID] {
	return func(o *Options[ID]) error {
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		o.Mem = mem
		return nil
	}
}

// Logger sets Log; nil means slog.Default().
func Logger[ID any](l *slog.Logger) Option[ID] {
	return func(o *Options[ID]) error {
		if l == nil {
			l = slog.Default()
		}
		o.Log = l
		return nil
	}
}

// Table returns the stream called name, or flightline.ErrNotFound.
func (o *Options[ID]) Table(name string) (Table[ID], error) {
	for _, t := range o.Tables {
		if t.Name == name {
			return t, nil
		}
	}
	return Table[ID]{}, fmt.Errorf("%w: stream %q", flightline.ErrNotFound, name)
}

// MergeCancel returns a context done when either a or b is (a reader's
// Next bounded by both its caller's context and the reader's own, which
// Close cancels). The returned func releases it.
func MergeCancel(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}

// Sleep waits d, or until ctx is done (then it returns ctx.Err()): an idle
// reader's wait before it polls again.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// DecodeCheckpoint decodes the JSON checkpoint b into v, a pointer to a
// struct: unknown fields and anything after the object are refused. It
// reports whether b decoded.
func DecodeCheckpoint(b []byte, v any) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v) == nil && !dec.More()
}

// Checkpoint is the checkpoint of a source read in (cursor, tiebreak)
// order: the values of the last row read, as text; nil fields before the
// first row. The Snowflake and BigQuery sources use it (the PostgreSQL
// source's has the same shape under the names watermark and key).
type Checkpoint struct {
	Cursor   *string `json:"cursor"`
	Tiebreak *string `json:"tiebreak"`
}

// Encode returns the checkpoint's JSON: {"cursor":…,"tiebreak":…}.
func (c Checkpoint) Encode() []byte {
	b, _ := json.Marshal(c) // two *string fields: cannot fail
	return b
}

// ParseCheckpoint decodes a checkpoint made by Encode; nil or empty means
// from the start. Anything else, or only one of the two fields, is
// ErrInvalidInput naming kind ("snowflake source").
func ParseCheckpoint(b []byte, kind string) (Checkpoint, error) {
	var c Checkpoint
	if len(b) == 0 {
		return c, nil
	}
	if !DecodeCheckpoint(b, &c) || (c.Cursor == nil) != (c.Tiebreak == nil) {
		return Checkpoint{}, fmt.Errorf("%w: not a %s checkpoint: %q", flightline.ErrInvalidInput, kind, b)
	}
	return c, nil
}
