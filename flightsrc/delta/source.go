// Package delta is Flightline's Delta Lake source: it serves one table,
// written by Flightline or by any Delta writer (delta-rs, Spark), as a
// stream through flightsrc.Source.
//
// A read starts with the table's snapshot at the current version (its
// active files ordered by path), then follows the commits after it,
// yielding the files each commit adds (tail mode), or stops at the version
// that was current when the read began (Once). The checkpoint is
//
//	{"delta":{"version":V,"snapshot":true|false,"file":I,"row":R}}
//
// — the table version, whether the position is inside that version's
// snapshot or inside the files that commit V added, and the file index and
// row inside it. Batch boundaries are deterministic from a checkpoint.
//
// Commits that remove data (deletes, updates, overwrites with dataChange)
// end the stream with an error: the source is append-only. Files added
// with dataChange=false (compaction) are skipped. Tables needing reader
// features this package lacks (deletion vectors, column mapping, v2
// checkpoints, ...) are refused with an error naming the feature.
package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
)

// Config is the table a Source serves and how it reads it: the keys of the
// delta: source kind. The zero value of an optional field means its
// default.
type Config struct {
	// URI is the table's location: a local path or s3://bucket/prefix.
	// Required.
	URI string
	// StorageOptions are the object-store options (AWS_* keys).
	StorageOptions map[string]string
	// Stream names the stream (default: the last element of the table
	// path).
	Stream string
	// Once makes every read stop with io.EOF at the version that was
	// current when it began, instead of following new commits.
	Once bool
	// BatchRows bounds the rows per batch (default 65536).
	BatchRows int
	// PollInterval is how often tail mode looks for a new commit (default
	// 1s).
	PollInterval time.Duration
}

// Option configures a Source beyond its Config: a credentials provider, an
// allocator. Options apply only in New; none changes a Source once built.
type Option func(*options) error

type options struct {
	creds aws.CredentialsProvider
	mem   memory.Allocator
}

// Credentials sets the S3 credentials provider (for an s3:// table only),
// used for every request instead of keys in StorageOptions, which must then
// hold none: the provider renews its credentials itself (Unity Catalog's
// vended credentials, flightsrc/databricks).
func Credentials(p aws.CredentialsProvider) Option {
	return func(o *options) error { o.creds = p; return nil }
}

// Allocator sets the allocator batches are built with; nil means
// memory.DefaultAllocator, the default.
func Allocator(mem memory.Allocator) Option {
	return func(o *options) error {
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		o.mem = mem
		return nil
	}
}

// Source serves one Delta table. It is safe for concurrent use.
type Source struct {
	t         *deltalog.Table
	storage   objstore.Options
	creds     aws.CredentialsProvider
	stream    string
	once      bool
	batchRows int
	poll      time.Duration
	mem       memory.Allocator
}

// New returns a Source for the table at cfg.URI. It validates cfg and
// opens the object store (for s3://, resolving the region and credentials
// with ctx), but does not read the table: a missing table is reported by
// Streams and Read (flightline.ErrNotFound). Options apply only here.
// Close releases nothing today (a Reader closes the files it opened) and
// returns nil.
func New(ctx context.Context, cfg Config, opts ...Option) (*Source, error) {
	o := options{mem: memory.DefaultAllocator}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	s := &Source{storage: cfg.StorageOptions, creds: o.creds, stream: cfg.Stream, once: cfg.Once,
		batchRows: 65536, poll: time.Second, mem: o.mem}
	switch {
	case cfg.BatchRows < 0:
		return nil, fmt.Errorf("%w: batch rows %d < 1", flightline.ErrInvalidInput, cfg.BatchRows)
	case cfg.BatchRows > 0:
		s.batchRows = cfg.BatchRows
	}
	switch {
	case cfg.PollInterval < 0:
		return nil, fmt.Errorf("%w: delta source: poll interval %s < 0", flightline.ErrInvalidInput, cfg.PollInterval)
	case cfg.PollInterval > 0:
		s.poll = cfg.PollInterval
	}
	st, err := objstore.OpenForReading(ctx, cfg.URI, s.storage, s.creds)
	if err != nil {
		return nil, err
	}
	if s.stream == "" {
		s.stream = path.Base(strings.TrimRight(cfg.URI, "/"))
	}
	s.t = deltalog.NewTable(st, s.mem)
	return s, nil
}

// Close implements io.Closer for symmetry with the other sources: the
// Source holds nothing beyond what the garbage collector frees (each Reader
// closes its own files), so it returns nil. Call it once, after every
// Reader is closed.
func (s *Source) Close() error { return nil }

func (s *Source) snapshot(ctx context.Context) (*deltalog.Snapshot, *arrow.Schema, error) {
	snap, err := s.t.Snapshot(ctx)
	if err != nil {
		return nil, nil, err
	}
	if snap.Version < 0 {
		return nil, nil, fmt.Errorf("%w: no Delta table at %s", flightline.ErrNotFound, s.t.URL())
	}
	if err := snap.CheckRead(); err != nil {
		return nil, nil, fmt.Errorf("delta source %s: %w", s.t.URL(), err)
	}
	sc, err := snap.Schema.ArrowSchema()
	if err != nil {
		return nil, nil, fmt.Errorf("delta source %s: %w", s.t.URL(), err)
	}
	return snap, sc, nil
}

// Streams implements flightsrc.Source: one stream, the table.
func (s *Source) Streams(ctx context.Context) ([]flightsrc.Stream, error) {
	snap, sc, err := s.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return []flightsrc.Stream{{Name: s.stream, Schema: sc,
		Description: fmt.Sprintf("Delta table %s (version %d, %d files)", s.t.URL(), snap.Version, len(snap.Files))}}, nil
}

// Commit implements flightsrc.Source; the table keeps no reader progress.
func (s *Source) Commit(context.Context, flightsrc.CommitRequest) error { return nil }

// Position is the source's checkpoint.
type Position struct {
	Version  int64 `json:"version"`
	Snapshot bool  `json:"snapshot"`
	File     int   `json:"file"`
	Row      int64 `json:"row"`
}

func (p Position) encode() []byte {
	b, _ := json.Marshal(struct {
		Delta Position `json:"delta"`
	}{p})
	return b
}

// ParsePosition decodes a checkpoint of this source.
func ParsePosition(b []byte) (Position, error) {
	var doc struct {
		Delta *Position `json:"delta"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil || doc.Delta == nil || doc.Delta.Version < 0 || doc.Delta.File < 0 || doc.Delta.Row < 0 {
		return Position{}, fmt.Errorf("%w: not a Delta source checkpoint: %.100q", flightline.ErrInvalidInput, b)
	}
	return *doc.Delta, nil
}

// Read implements flightsrc.Source.
func (s *Source) Read(ctx context.Context, req flightsrc.ReadRequest) (flightsrc.Reader, error) {
	if req.Stream != s.stream {
		return nil, fmt.Errorf("%w: no stream %q (this source serves %q)", flightline.ErrNotFound, req.Stream, s.stream)
	}
	latest, sc, err := s.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	r := &reader{s: s, schema: sc, end: -1}
	if s.once {
		r.end = latest.Version
	}
	if req.After == nil {
		r.pos = Position{Version: latest.Version, Snapshot: true}
		r.files = latest.SortedFiles()
		r.partCols = latest.Metadata.PartitionColumns
		return r, nil
	}
	pos, err := ParsePosition(req.After)
	if err != nil {
		return nil, err
	}
	r.pos = pos
	if pos.Snapshot {
		snap, err := s.t.SnapshotAt(ctx, pos.Version)
		if err != nil {
			return nil, err
		}
		r.files = snap.SortedFiles()
		r.partCols = snap.Metadata.PartitionColumns
	} else {
		r.loaded = false
	}
	return r, nil
}

type reader struct {
	s        *Source
	schema   *arrow.Schema
	pos      Position
	end      int64 // Once: last version to read; -1: tail
	files    []*deltalog.Add
	loaded   bool // files hold pos.Version's adds (tail) — snapshot files are loaded in Read
	partCols []string
	cur      pqarrow.RecordReader
	curFile  *file.Reader
	closed   bool
}

func (r *reader) Schema() *arrow.Schema { return r.schema }

// load reads the adds of commit r.pos.Version, waiting for it in tail
// mode. It returns io.EOF past the end in Once mode.
func (r *reader) load(ctx context.Context) error {
	for {
		if r.end >= 0 && r.pos.Version > r.end {
			return io.EOF
		}
		acts, err := r.s.t.ReadVersion(ctx, r.pos.Version)
		if errors.Is(err, objstore.ErrNotExist) {
			if r.end >= 0 {
				return io.EOF
			}
			t := time.NewTimer(r.s.poll)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			continue
		}
		if err != nil {
			return err
		}
		r.files = r.files[:0]
		for _, a := range acts {
			switch {
			case a.Protocol != nil:
				snap := &deltalog.Snapshot{Protocol: a.Protocol}
				if err := snap.CheckRead(); err != nil {
					return fmt.Errorf("delta source %s: version %d: %w", r.s.t.URL(), r.pos.Version, err)
				}
			case a.MetaData != nil:
				sc, err := deltalog.ParseSchema(a.MetaData.SchemaString)
				if err != nil {
					return err
				}
				asc, err := sc.ArrowSchema()
				if err != nil || !asc.Equal(r.schema) {
					return fmt.Errorf("%w: delta source %s: the table schema changed at version %d; restart the read",
						flightline.ErrSchemaMismatch, r.s.t.URL(), r.pos.Version)
				}
				r.partCols = a.MetaData.PartitionColumns
			case a.Remove != nil && a.Remove.DataChange:
				return fmt.Errorf("%w: delta source %s: version %d removes data (%s); the source reads append-only tables",
					flightline.ErrInvalidInput, r.s.t.URL(), r.pos.Version, a.Remove.Path)
			case a.Add != nil && a.Add.DataChange:
				r.files = append(r.files, a.Add)
			}
		}
		r.loaded = true
		return nil
	}
}

// Next implements flightsrc.Reader. The caller owns the returned batch.
func (r *reader) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if !r.pos.Snapshot && !r.loaded {
			if err := r.load(ctx); err != nil {
				return nil, nil, err
			}
		}
		if r.pos.File >= len(r.files) {
			// This version is done: move to the next commit.
			r.closeFile()
			r.pos = Position{Version: r.pos.Version + 1}
			r.loaded = false
			continue
		}
		if r.cur == nil {
			if err := r.openFile(ctx, r.files[r.pos.File]); err != nil {
				return nil, nil, err
			}
			if r.cur == nil {
				continue // skipped a fully read file
			}
		}
		if !r.cur.Next() {
			err := r.cur.Err()
			r.closeFile()
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, nil, fmt.Errorf("delta source: read %s: %w", r.files[r.pos.File].Path, err)
			}
			r.pos.File++
			r.pos.Row = 0
			continue
		}
		rec, err := r.conform(r.cur.RecordBatch(), r.files[r.pos.File])
		if err != nil {
			return nil, nil, err
		}
		r.pos.Row += rec.NumRows()
		return rec, r.pos.encode(), nil
	}
}

func (r *reader) openFile(ctx context.Context, add *deltalog.Add) error {
	if len(add.DeletionVector) > 0 && string(add.DeletionVector) != "null" {
		return fmt.Errorf("%w: file %s has a deletion vector (deletionVectors)", deltalog.ErrUnsupportedFeature, add.Path)
	}
	p := add.Path
	if u, err := urlUnescape(p); err == nil {
		p = u
	}
	b, err := r.s.t.Store().Get(ctx, p)
	if err != nil {
		return fmt.Errorf("delta source %s: %w", r.s.t.URL(), err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(b), file.WithReadProps(parquet.NewReaderProperties(r.s.mem)))
	if err != nil {
		return fmt.Errorf("delta source: %s: %w", add.Path, err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(r.s.batchRows)}, r.s.mem)
	if err != nil {
		pf.Close()
		return err
	}
	rr, err := fr.GetRecordReader(ctx, nil, nil)
	if err != nil {
		pf.Close()
		return err
	}
	if r.pos.Row >= pf.NumRows() {
		// The checkpoint is at the end of this file: an empty reader.
		rr.Release()
		pf.Close()
		r.pos.File++
		r.pos.Row = 0
		return nil
	}
	if r.pos.Row > 0 {
		if err := rr.SeekToRow(r.pos.Row); err != nil {
			rr.Release()
			pf.Close()
			return fmt.Errorf("delta source: seek %s to row %d: %w", add.Path, r.pos.Row, err)
		}
	}
	r.cur, r.curFile = rr, pf
	return nil
}

func (r *reader) closeFile() {
	if r.cur != nil {
		r.cur.Release()
		r.curFile.Close()
		r.cur, r.curFile = nil, nil
	}
}

// conform builds a batch of the table schema from a file's batch: columns
// matched by name, cast where the file's type differs, missing columns
// null, partition columns from the add's partition values.
func (r *reader) conform(in arrow.RecordBatch, add *deltalog.Add) (arrow.RecordBatch, error) {
	n := in.NumRows()
	cols := make([]arrow.Array, r.schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	ctx := compute.WithAllocator(context.Background(), r.s.mem)
	for i, f := range r.schema.Fields() {
		var src arrow.Array
		for j, ff := range in.Schema().Fields() {
			if strings.EqualFold(ff.Name, f.Name) {
				src = in.Column(j)
				break
			}
		}
		switch {
		case src == nil && isPart(r.partCols, f.Name):
			v := add.PartitionValues[f.Name]
			sb := array.NewStringBuilder(r.s.mem)
			for range n {
				if v == nil {
					sb.AppendNull()
				} else {
					sb.Append(*v)
				}
			}
			s := sb.NewArray()
			sb.Release()
			c, err := compute.CastArray(ctx, s, compute.SafeCastOptions(f.Type))
			s.Release()
			if err != nil {
				return nil, fmt.Errorf("delta source: partition column %q: %w", f.Name, err)
			}
			cols[i] = c
		case src == nil:
			cols[i] = array.MakeArrayOfNull(r.s.mem, f.Type, int(n))
		case arrow.TypeEqual(src.DataType(), f.Type):
			src.Retain()
			cols[i] = src
		default:
			c, err := compute.CastArray(ctx, src, compute.UnsafeCastOptions(f.Type))
			if err != nil {
				return nil, fmt.Errorf("delta source: column %q: file type %s, table type %s: %w", f.Name, src.DataType(), f.Type, err)
			}
			cols[i] = c
		}
	}
	return array.NewRecordBatch(r.schema, cols, n), nil
}

func isPart(cols []string, name string) bool {
	for _, c := range cols {
		if strings.EqualFold(c, name) {
			return true
		}
	}
	return false
}

// Close implements flightsrc.Reader.
func (r *reader) Close() error {
	r.closeFile()
	r.closed = true
	return nil
}

var _ flightsrc.Source = (*Source)(nil)
