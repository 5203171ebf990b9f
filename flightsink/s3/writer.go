package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/parquetw"
)

// writer writes one pipeline's batches. It keeps the last checkpoint it
// saw, which names the partitions the next batch advances.
type writer struct {
	s       *Sink
	p       flightsink.Pipeline
	dir     string
	schema  *arrow.Schema // the pipeline's stored schema, once known
	checked *arrow.Schema // the last batch schema found to match it
	last    []byte        // last checkpoint seen (written or zero-row), nil at first
	pos     checkpoint.Positions
	closed  bool
}

// WriteBatch implements flightsink.Writer. A batch with rows becomes one
// Parquet object at dir/ObjectName(last, cp), written whole or not at all
// (single PUT, or a multipart upload aborted on failure). A zero-row batch
// writes nothing and only moves the writer's last checkpoint. The sink
// stores no checkpoint: a nil return means the object is durable.
func (w *writer) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if w.closed {
		return fmt.Errorf("%w: s3 sink: writer of pipeline %q is closed", flightline.ErrInvalidInput, w.p.ID)
	}
	if len(cp) == 0 {
		return fmt.Errorf("%w: s3 sink: batch without a checkpoint", flightline.ErrInvalidInput)
	}
	if checkpoint.Replayed(w.last, cp) {
		return nil
	}
	sc := parquetw.StoredSchema(rec.Schema())
	if err := w.checkSchema(ctx, sc); err != nil {
		return err
	}
	if rec.NumRows() > 0 {
		name := ObjectName(w.last, cp)
		start := time.Now()
		opts := append([]parquetw.Option{parquetw.Allocator(w.s.o.mem)}, w.s.pqOptions...)
		st := parquetw.Storable(w.s.o.mem, rec, sc)
		data, _, err := parquetw.Bytes(st, opts...)
		st.Release()
		if err != nil {
			return fmt.Errorf("%w: s3 sink: encoding Parquet: %v", flightline.ErrInvalidInput, err)
		}
		key := w.dir + "/" + name
		if err := w.s.store.Put(ctx, key, data); err != nil {
			return w.s.wrap(err, "put "+key)
		}
		w.s.o.log.Debug("s3 sink: object written", "pipeline", w.p.ID, "key", key, "rows", rec.NumRows(), "bytes", len(data), "took", time.Since(start))
	}
	w.advance(cp)
	return nil
}

// advance records cp as the last checkpoint. For Positions it overlays cp
// on the last positions, so a partition cp does not name keeps its place.
func (w *writer) advance(cp []byte) {
	c, err := checkpoint.Parse(cp)
	if err != nil {
		w.last, w.pos = bytes.Clone(cp), nil
		return
	}
	if w.pos == nil {
		w.pos = checkpoint.Positions{}
	}
	maps.Copy(w.pos, c)
	w.last = w.pos.Encode()
}

// Close implements flightsink.Writer; it holds nothing to release.
func (w *writer) Close(context.Context) error {
	w.closed = true
	return nil
}

func (w *writer) schemaKey() string { return w.dir + "/" + SchemaObject }

// loadSchema reads the pipeline's schema object, if any.
func (w *writer) loadSchema(ctx context.Context) error {
	b, err := w.s.store.Get(ctx, w.schemaKey())
	if errors.Is(err, objstore.ErrNotExist) {
		return nil
	}
	if err != nil {
		return w.s.wrap(err, "reading the pipeline's schema")
	}
	sc, err := decodeSchema(b)
	if err != nil {
		return fmt.Errorf("%w: s3 sink: s3://%s/%s is not a schema file this sink can read: %v", flightline.ErrSchemaMismatch, w.s.loc, w.schemaKey(), err)
	}
	w.schema = sc
	return nil
}

// checkSchema compares the Parquet schema batches of sc are stored with
// (as a reader derives it from the Parquet file) with the pipeline's,
// fixing the pipeline's first (put-if-absent of the schema object) when it
// has none. A schema once found equal is not encoded again.
func (w *writer) checkSchema(ctx context.Context, sc *arrow.Schema) error {
	if w.checked != nil && (w.checked == sc || w.checked.Equal(sc)) {
		return nil
	}
	data, err := encodeSchema(w.s, sc)
	if err != nil {
		return fmt.Errorf("%w: s3 sink: schema cannot be stored as Parquet: %v", flightline.ErrSchemaMismatch, err)
	}
	got, err := decodeSchema(data)
	if err != nil {
		return fmt.Errorf("%w: s3 sink: schema cannot be stored as Parquet: %v", flightline.ErrSchemaMismatch, err)
	}
	if w.schema == nil {
		err = w.s.store.PutIfAbsent(ctx, w.schemaKey(), data)
		switch {
		case err == nil:
			w.schema = got
		case errors.Is(err, objstore.ErrExists):
			if err := w.loadSchema(ctx); err != nil {
				return err
			}
			if w.schema == nil {
				return fmt.Errorf("%w: s3 sink: schema object %s vanished while being read", flightline.ErrConflict, w.schemaKey())
			}
		default:
			return w.s.wrap(err, "writing the pipeline's schema")
		}
	}
	if !flightsink.SameSchema(w.schema, got) {
		return fmt.Errorf("%w: s3 sink: pipeline %q at s3://%s/%s stores %s; the batch would store %s",
			flightline.ErrSchemaMismatch, w.p.ID, w.s.loc, w.dir, fieldList(w.schema), fieldList(got))
	}
	w.checked = sc
	return nil
}

// fieldList is a one-line rendering of a schema's fields.
func fieldList(sc *arrow.Schema) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, f := range sc.Fields() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(f.Name)
		b.WriteByte(' ')
		b.WriteString(f.Type.String())
		if !f.Nullable {
			b.WriteString(" not null")
		}
	}
	b.WriteByte(')')
	return b.String()
}

// encodeSchema writes a 0-row Parquet file of schema sc.
func encodeSchema(s *Sink, sc *arrow.Schema) ([]byte, error) {
	b := array.NewRecordBuilder(s.o.mem, sc)
	defer b.Release()
	rec := b.NewRecordBatch()
	defer rec.Release()
	data, _, err := parquetw.Bytes(rec, parquetw.Allocator(s.o.mem))
	return data, err
}

// decodeSchema returns the Arrow schema a reader derives from the
// Parquet schema of a file (any ARROW:schema metadata is not used: the
// sink's files do not carry it).
func decodeSchema(data []byte) (*arrow.Schema, error) {
	rd, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return pqarrow.FromParquet(rd.MetaData().Schema, nil, nil)
}
