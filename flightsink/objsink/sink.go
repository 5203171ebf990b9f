package objsink

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/parquetw"
	"github.com/flightline/flightline/internal/rowenc"
)

// Format is the encoding of the part files.
type Format string

// The formats.
const (
	Parquet Format = "parquet" // snappy-compressed, one row group per batch (up to 1M rows)
	JSONL   Format = "jsonl"   // one JSON object per row, keys in column order
	CSV     Format = "csv"     // RFC 4180, a header line per file
)

// StaleAfter is how old an unnamed staged object must be before Open
// removes it: far longer than any writer takes from staging to commit.
const StaleAfter = 10 * time.Minute

// Config is what an objsink kind (file:, s3:, gcs:, azblob:, sftp:) is
// given: the Backend it built from its URL, and the layout keys every such
// kind shares.
type Config struct {
	// Backend is the store the part files and commit records go to (a
	// Local directory or a backend under objsink/). Required. The Sink
	// does not own it: Close leaves it open.
	Backend Backend
	// Name says which sink it is in errors (default "objsink"), e.g.
	// "file sink".
	Name string
	// Format is the part files' format (default Parquet).
	Format Format
	// PartitionBy partitions the part files Hive-style by this column: a
	// batch is written as one part file per value under
	// <target>/<column>=<value>/ (the value escaped as Hive does, %XX for
	// characters outside A-Z a-z 0-9 . _ -; a null as HiveNull). The
	// column stays in the files, so readers that ignore the directory
	// names see it too. The batch's part files are committed together by
	// one record. Default: no partitions.
	PartitionBy string
	// PartitionByDay partitions the part files by the UTC day of this
	// column (a timestamp or date): <target>/<column>_day=YYYY-MM-DD/.
	// PartitionBy and PartitionByDay exclude each other.
	PartitionByDay string
	// SchemaEvolution accepts a batch whose schema is the target's with
	// nullable columns added at the end (the target's schema becomes the
	// batch's) instead of refusing it with flightline.ErrSchemaMismatch,
	// and a batch without such trailing columns of the target's schema.
	// Part files of older batches lack the added columns: readers that
	// match columns by name (Athena, pyarrow.dataset with the newest
	// schema) read them as null. In a group, the batches of older schemas
	// are given the missing columns as nulls. Default off.
	SchemaEvolution bool
}

// Option configures a Sink beyond its Config.
type Option func(*options) error

type options struct {
	format Format
	mem    memory.Allocator
	// partition is the column the part files are partitioned by ("":
	// none); byDay partitions by its UTC day.
	partition string
	byDay     bool
	// dataDir is the directory under a target the part files go to ("":
	// the target itself).
	dataDir string
	// beforeCommit is called with every batch that has rows before any of
	// it is written (nil: none).
	beforeCommit func(context.Context, Commit) error
	// evolve accepts batches that add nullable columns at the end.
	evolve bool
}

// fits says whether a batch of schema got may be written to a target of
// schema want: the same schema, or, with Config.SchemaEvolution, one of
// the two the other with nullable columns added at its end.
func (s *Sink) fits(want, got *arrow.Schema) bool {
	if flightsink.SameSchema(want, got) {
		return true
	}
	if !s.o.evolve {
		return false
	}
	short, long := want, got
	if short.NumFields() > long.NumFields() {
		short, long = long, short
	}
	for i := range long.NumFields() {
		l := long.Field(i)
		if i >= short.NumFields() {
			if !l.Nullable {
				return false
			}
			continue
		}
		if f := short.Field(i); f.Name != l.Name || f.Nullable != l.Nullable || !arrow.TypeEqual(f.Type, l.Type) {
			return false
		}
	}
	return true
}

// widest returns the one of a and b with more columns (fits holds).
func widest(a, b *arrow.Schema) *arrow.Schema {
	if a == nil || (b != nil && b.NumFields() > a.NumFields()) {
		return b
	}
	return a
}

// pad returns rec with sc's columns beyond its own added as nulls (rec
// retained when it has them all); the caller releases it.
func pad(mem memory.Allocator, rec arrow.RecordBatch, sc *arrow.Schema) arrow.RecordBatch {
	if rec.Schema().NumFields() >= sc.NumFields() {
		rec.Retain()
		return rec
	}
	cols := make([]arrow.Array, sc.NumFields())
	for i := range cols {
		if i < int(rec.NumCols()) {
			cols[i] = rec.Column(i)
			cols[i].Retain()
		} else {
			cols[i] = array.MakeArrayOfNull(mem, sc.Field(i).Type, int(rec.NumRows()))
		}
	}
	out := array.NewRecordBatch(sc, cols, rec.NumRows())
	for _, c := range cols {
		c.Release()
	}
	return out
}

// Allocator sets the allocator Parquet encoding draws from (nil: the
// default). Everything drawn is released before WriteBatch returns.
func Allocator(mem memory.Allocator) Option {
	return func(o *options) error {
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		o.mem = mem
		return nil
	}
}

// DataDir puts the part files under <target>/<dir>/ instead of <target>/,
// apart from the protocol's bookkeeping under <target>/_flightline/: a
// reader given <target>/<dir>/ (the LOCATION of an Athena or Hive table)
// finds only published part files, whatever it makes of names starting
// with '_'. dir is one or more slash-separated names without '_' or '.'
// at their start.
func DataDir(dir string) Option {
	return func(o *options) error {
		for _, c := range strings.Split(dir, "/") {
			if c == "" || strings.HasPrefix(c, "_") || strings.HasPrefix(c, ".") || strings.ContainsAny(c, "=\\") {
				return fmt.Errorf("%w: data directory %q: want names such as data, not starting with _ or . and without =", flightline.ErrInvalidInput, dir)
			}
		}
		o.dataDir = dir
		return nil
	}
}

// Commit is what a BeforeCommit hook learns of a batch (or a group of
// batches) about to be committed.
type Commit struct {
	// Target is the target's directory key (Target of the pipeline).
	Target string
	// Schema is the target's schema with the batch: the batch's, or, with
	// SchemaEvolution, the wider of it and the target's.
	Schema *arrow.Schema
	// Dirs are the partition directories its part files go to, relative
	// to the data directory (e.g. "kind=a", "ts_day=2026-01-02"), each
	// once, in the order of the part files; one "" when unpartitioned.
	Dirs []string
}

// BeforeCommit has the sink call fn with every batch (or group) that has
// rows, after it is encoded and before anything of it is staged: the
// place for what must hold before a commit can make the batch visible,
// such as a catalog's table and partitions (the athena sink registers
// them). An error from fn fails the write as it is, and nothing of the
// batch is written; so everything fn did for a committed batch was done
// before its commit, and a crash after fn costs at most work for a batch
// that is written again. fn is called from the writers' goroutines,
// concurrently for different pipelines, and not for replays or batches
// without rows.
func BeforeCommit(fn func(ctx context.Context, c Commit) error) Option {
	return func(o *options) error {
		o.beforeCommit = fn
		return nil
	}
}

// Sink is the exactly-once sink on a Backend; see the package doc. Safe for
// concurrent use.
type Sink struct {
	b    Backend
	o    options
	name string // for errors: "file sink"

	mu sync.Mutex // serializes commits within the process (any target)

	cacheMu sync.Mutex
	cache   map[string]*summary // per target: what its records say, up to a seq

	probeMu sync.Mutex
	probed  bool // a Prober backend's Probe succeeded
}

// New returns a Sink writing through cfg.Backend. It contacts nothing (a
// Prober backend is probed on the first Open); it validates cfg (the
// format, one partition column at most). Close releases nothing: the
// Backend is its caller's.
func New(_ context.Context, cfg Config, opts ...Option) (*Sink, error) {
	b, name := cfg.Backend, cfg.Name
	if name == "" {
		name = "objsink"
	}
	o := options{format: Parquet, mem: memory.DefaultAllocator, evolve: cfg.SchemaEvolution}
	switch cfg.Format {
	case "":
	case Parquet, JSONL, CSV:
		o.format = cfg.Format
	default:
		return nil, fmt.Errorf("%s: %w: format %q: want parquet, jsonl or csv", name, flightline.ErrInvalidInput, cfg.Format)
	}
	switch {
	case cfg.PartitionBy != "" && cfg.PartitionByDay != "":
		return nil, fmt.Errorf("%s: %w: one partition column, by value or by day", name, flightline.ErrInvalidInput)
	case cfg.PartitionBy != "":
		o.partition = cfg.PartitionBy
	case cfg.PartitionByDay != "":
		o.partition, o.byDay = cfg.PartitionByDay, true
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return &Sink{b: b, o: o, name: name, cache: map[string]*summary{}}, nil
}

// Close releases nothing (the Backend is its caller's, who closes it after
// the Sink) and returns nil.
func (s *Sink) Close() error { return nil }

// Format returns the part files' format.
func (s *Sink) Format() Format { return s.o.format }

// Guarantee implements flightsink.Guaranteer.
func (s *Sink) Guarantee() flightsink.Guarantee { return flightsink.ExactlyOnce }

// Ext is the file name extension of format f.
func (f Format) Ext() string {
	if f == JSONL {
		return "jsonl"
	}
	return string(f)
}

// Keys of a target.
const (
	metaDir      = "_flightline"
	commitsDir   = "_flightline/commits"
	stagingDir   = "_flightline/staging"
	snapshotsDir = "_flightline/snapshots"
)

// Target returns the directory key of p's target.
func Target(p flightsink.Pipeline) (string, error) {
	if err := flightsink.CheckDirTarget(p.Target); err != nil {
		return "", err
	}
	if p.Target == "" {
		return "default", nil
	}
	return p.Target, nil
}

func seqName(seq uint64) string { return fmt.Sprintf("%020d", seq) }

// PartName is the name of part file i of the n of commit seq: one per
// partition the batch touches.
func PartName(seq uint64, i, n int, f Format) string {
	if n == 1 {
		return "part-" + seqName(seq) + "." + f.Ext()
	}
	return fmt.Sprintf("part-%s-%04d.%s", seqName(seq), i, f.Ext())
}

// record is a commit record, <target>/_flightline/commits/<seq>.json.
type record struct {
	Pipeline   string `json:"pipeline"`
	Epoch      uint64 `json:"epoch"`
	Checkpoint []byte `json:"checkpoint,omitempty"` // base64 in JSON
	Rows       int64  `json:"rows"`
	Schema     []byte `json:"schema,omitempty"` // Arrow IPC schema message, of a record with rows
	Parts      []part `json:"parts,omitempty"`

	seq uint64
}

// part is one part file of a commit: a batch has one per partition.
type part struct {
	Staged string `json:"staged"`         // key of the staged data
	Dir    string `json:"dir,omitempty"`  // the partition's directory, e.g. "quantity=3"
	Name   string `json:"name,omitempty"` // path of the part file under the target
}

// scan reads the records of target with seq > after, in order. Sequence
// numbers are dense (a record is created only at the number after one its
// writer has read), so scan reads after+1, after+2, … until one is
// missing: one Get per new record and one for the first missing, however
// many records the target holds.
func (s *Sink) scan(ctx context.Context, target string, after uint64) ([]record, error) {
	var out []record
	for seq := after + 1; ; seq++ {
		name := seqName(seq) + ".json"
		data, err := s.b.Get(ctx, path.Join(target, commitsDir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var r record
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%w: %s: commit record %s/%s: %v", flightline.ErrInternal, s.name, target, name, err)
		}
		r.seq = seq
		out = append(out, r)
	}
}

// summary is what the records of a target up to Seq say: each pipeline's
// epoch and checkpoint, and the target's schema. Records never change, so
// a summary at Seq stays true; it is kept in memory per target (so that a
// long-lived sink's Checkpoint reads only the records since its last
// call) and written by Open as a snapshot,
// _flightline/snapshots/<seq>.json, once every record up to Seq is
// published (so that a restarted process reads only the records since the
// last Open, not every record of the target).
type summary struct {
	Seq       uint64                  `json:"seq"`
	Pipelines map[string]pipelineMark `json:"pipelines,omitempty"`
	Schema    []byte                  `json:"schema,omitempty"` // Arrow IPC schema message
}

// pipelineMark is one pipeline's highest epoch and checkpoint.
type pipelineMark struct {
	Epoch      uint64 `json:"epoch"`
	Checkpoint []byte `json:"checkpoint,omitempty"`
}

func (m *summary) clone() *summary {
	c := &summary{Seq: m.Seq, Schema: m.Schema, Pipelines: make(map[string]pipelineMark, len(m.Pipelines))}
	for k, v := range m.Pipelines {
		c.Pipelines[k] = v
	}
	return c
}

// add folds rs (the records after m.Seq, in order) into m.
func (m *summary) add(rs []record) {
	if m.Pipelines == nil {
		m.Pipelines = map[string]pipelineMark{}
	}
	for _, r := range rs {
		m.Seq = r.seq
		if r.Rows > 0 && len(r.Schema) > 0 {
			// The newest: without SchemaEvolution every record has the
			// same schema; with it, the newest is the target's.
			m.Schema = r.Schema
		}
		pm := m.Pipelines[r.Pipeline]
		pm.Epoch = max(pm.Epoch, r.Epoch)
		if r.Checkpoint != nil {
			pm.Checkpoint = checkpoint.Next(pm.Checkpoint, r.Checkpoint)
		}
		m.Pipelines[r.Pipeline] = pm
	}
}

// schema decodes m's schema (nil when no batch with rows was committed).
func (s *Sink) schema(m *summary) (*arrow.Schema, error) {
	if len(m.Schema) == 0 {
		return nil, nil
	}
	sc, err := flight.DeserializeSchema(m.Schema, s.o.mem)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: the target's schema: %v", flightline.ErrInternal, s.name, err)
	}
	return sc, nil
}

// keepSnapshots is how many snapshots Open leaves per target.
const keepSnapshots = 3

// snapshot reads the newest snapshot of target (an empty summary when
// there is none).
func (s *Sink) snapshot(ctx context.Context, target string) (*summary, error) {
	objs, err := s.b.List(ctx, path.Join(target, snapshotsDir))
	if err != nil {
		return nil, err
	}
	seqs := snapshotSeqs(objs)
	for i := len(seqs) - 1; i >= 0; i-- {
		name := seqName(seqs[i]) + ".json"
		data, err := s.b.Get(ctx, path.Join(target, snapshotsDir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by another Open since the listing: an older one will do
		}
		if err != nil {
			return nil, err
		}
		var m summary
		if err := json.Unmarshal(data, &m); err != nil || m.Seq != seqs[i] {
			return nil, fmt.Errorf("%w: %s: snapshot %s/%s/%s is damaged (%v): remove it and the sink reads the commit records instead", flightline.ErrInternal, s.name, target, snapshotsDir, name, err)
		}
		return &m, nil
	}
	return &summary{}, nil
}

// snapshotSeqs are the sequence numbers of the snapshots in objs, ascending.
func snapshotSeqs(objs []Object) []uint64 {
	var seqs []uint64
	for _, o := range objs {
		num, ok := strings.CutSuffix(o.Name, ".json")
		if !ok || len(num) != 20 {
			continue
		}
		if seq, err := strconv.ParseUint(num, 10, 64); err == nil {
			seqs = append(seqs, seq)
		}
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs
}

// writeSnapshot stores m as a snapshot (every record up to m.Seq is
// published) and removes all but the newest keepSnapshots. A snapshot is a
// pure function of the records, so a racing Open writing the same name
// writes the same content; failures only cost a later Open more reads.
func (s *Sink) writeSnapshot(ctx context.Context, target string, m *summary) {
	if m.Seq == 0 {
		return
	}
	data, err := json.Marshal(m)
	if err != nil {
		return
	}
	if err := s.b.PutIfAbsent(ctx, path.Join(target, snapshotsDir, seqName(m.Seq)+".json"), data); err != nil && !errors.Is(err, ErrExists) {
		return
	}
	objs, err := s.b.List(ctx, path.Join(target, snapshotsDir))
	if err != nil {
		return
	}
	seqs := snapshotSeqs(objs)
	for i := 0; i+keepSnapshots < len(seqs); i++ {
		_ = s.b.Delete(ctx, path.Join(target, snapshotsDir, seqName(seqs[i])+".json"))
	}
}

// current returns the summary of every record of target: the cached one
// (or the newest snapshot) brought forward by the records after it.
func (s *Sink) current(ctx context.Context, target string) (*summary, error) {
	s.cacheMu.Lock()
	m := s.cache[target]
	s.cacheMu.Unlock()
	if m == nil {
		var err error
		if m, err = s.snapshot(ctx, target); err != nil {
			return nil, err
		}
	} else {
		m = m.clone()
	}
	rs, err := s.scan(ctx, target, m.Seq)
	if err != nil {
		return nil, err
	}
	m.add(rs)
	s.remember(target, m)
	return m, nil
}

// remember caches m for target unless the cache is already further on.
func (s *Sink) remember(target string, m *summary) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if old := s.cache[target]; old == nil || old.Seq < m.Seq {
		s.cache[target] = m.clone()
	}
}

// Checkpoint implements flightsink.Sink. It reads the commit records after
// the last it (or a snapshot) has summed up, and fences nothing.
func (s *Sink) Checkpoint(ctx context.Context, p flightsink.Pipeline) ([]byte, error) {
	target, err := Target(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	m, err := s.current(ctx, target)
	if err != nil {
		return nil, err
	}
	return m.Pipelines[p.ID].Checkpoint, nil
}

// Open implements flightsink.Sink: it finishes the publication of every
// committed batch whose part file is missing, removes stale staged data,
// writes a snapshot, and commits an epoch marker that fences older
// writers of p. It reads the records after the newest snapshot (every
// record before it is published), not the in-memory summary, so that
// recovery sees every record a dead writer may have left unpublished.
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	if p.ID == "" {
		return nil, nil, fmt.Errorf("%w: %s: empty pipeline id", flightline.ErrInvalidInput, s.name)
	}
	target, err := Target(p)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", s.name, err)
	}
	if err := s.Probe(ctx); err != nil {
		return nil, nil, err
	}
	m, err := s.snapshot(ctx, target)
	if err != nil {
		return nil, nil, err
	}
	rs, err := s.scan(ctx, target, m.Seq)
	if err != nil {
		return nil, nil, err
	}
	if err := s.recover(ctx, target, rs); err != nil {
		return nil, nil, err
	}
	m.add(rs)
	if len(rs) > 0 {
		s.writeSnapshot(ctx, target, m)
	}
	// What Open read from the store replaces the cache, also when it is
	// behind it (a target removed and started again under a running sink).
	s.cacheMu.Lock()
	s.cache[target] = m.clone()
	s.cacheMu.Unlock()
	schema, err := s.schema(m)
	if err != nil {
		return nil, nil, err
	}
	pm := m.Pipelines[p.ID]
	w := &writer{s: s, target: target, p: p, epoch: pm.Epoch + 1, seen: m.Seq, cp: pm.Checkpoint, schema: schema}
	if err := w.commit(ctx, record{}, false); err != nil {
		return nil, nil, err
	}
	return w, w.cp, nil
}

// Probe checks, once per Sink, that a Prober backend's store honours
// create-if-absent (see Prober); other backends need no check. Open calls
// it; `flightline check` may call it before.
func (s *Sink) Probe(ctx context.Context) error {
	pr, ok := s.b.(Prober)
	if !ok {
		return nil
	}
	s.probeMu.Lock()
	defer s.probeMu.Unlock()
	if s.probed {
		return nil
	}
	if err := pr.Probe(ctx); err != nil {
		return err
	}
	s.probed = true
	return nil
}

// recover publishes the part files of committed records that lack them
// (their writer died between commit and publication) and removes staged
// data no record names once it is StaleAfter old.
func (s *Sink) recover(ctx context.Context, target string, rs []record) error {
	named := map[string]bool{}
	for _, r := range rs {
		for _, pt := range r.Parts {
			named[pt.Staged] = true
		}
		if err := s.publish(ctx, target, r); err != nil {
			return err
		}
	}
	objs, err := s.b.List(ctx, path.Join(target, stagingDir))
	if err != nil {
		return err
	}
	for _, o := range objs {
		key := path.Join(target, stagingDir, o.Name)
		if !named[key] && time.Since(o.Modified) > StaleAfter {
			if err := s.b.Delete(ctx, key); err != nil {
				return err
			}
		}
	}
	if l, ok := s.b.(*Local); ok {
		for _, d := range []string{target, path.Join(target, commitsDir), path.Join(target, stagingDir)} {
			l.removeStaleTemps(d, StaleAfter)
		}
	}
	return nil
}

// publish makes r's part files visible (step 5), then drops their staged
// copies. A part file already there is r's own: names are per sequence.
func (s *Sink) publish(ctx context.Context, target string, r record) error {
	for _, pt := range r.Parts {
		name := path.Join(target, pt.Name)
		ok, err := s.b.Exists(ctx, name)
		if err != nil {
			return err
		}
		if !ok {
			err := s.b.Publish(ctx, pt.Staged, name)
			if err != nil && !errors.Is(err, ErrExists) {
				// Another process (the committer, or a concurrent Open's
				// recovery) may have published it and removed the staged
				// copy since the check above.
				if now, xerr := s.b.Exists(ctx, name); xerr == nil && now {
					continue
				}
				if errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("%w: %s: commit %d's staged data %s is gone and its part file %s was never published", flightline.ErrInternal, s.name, r.seq, pt.Staged, name)
				}
				return err
			}
		}
	}
	for _, pt := range r.Parts {
		if err := s.b.Delete(ctx, pt.Staged); err != nil {
			return err
		}
	}
	return nil
}

type writer struct {
	s      *Sink
	target string
	p      flightsink.Pipeline
	epoch  uint64
	seen   uint64 // highest seq this writer has examined
	cp     []byte // the pipeline's checkpoint as this writer knows it
	schema *arrow.Schema
	broken error // set once the pipeline moved under this writer
}

// examine reads the records after w.seen. writing says the caller is
// about to commit a batch (not Open's marker).
func (w *writer) examine(ctx context.Context, writing bool) error {
	rs, err := w.s.scan(ctx, w.target, w.seen)
	if err != nil {
		return err
	}
	for _, r := range rs {
		w.seen = r.seq
		if (w.schema == nil || w.s.o.evolve) && r.Rows > 0 && len(r.Schema) > 0 {
			if sc, err := flight.DeserializeSchema(r.Schema, w.s.o.mem); err == nil {
				w.schema = widest(w.schema, sc)
			}
		}
		if r.Pipeline != w.p.ID {
			continue
		}
		if writing {
			if r.Epoch >= w.epoch {
				return fmt.Errorf("%w: %s: pipeline %q reopened with epoch %d (this writer has %d)", flightline.ErrFenced, w.s.name, w.p.ID, r.Epoch, w.epoch)
			}
			w.broken = fmt.Errorf("%w: %s: pipeline %q moved since it was opened (a commit of epoch %d landed after the claim of epoch %d); re-open and resume from its checkpoint",
				flightline.ErrConflict, w.s.name, w.p.ID, r.Epoch, w.epoch)
			return w.broken
		}
		// Opening: a commit that landed since the scan moves the
		// checkpoint, and a racing Open is outbid.
		if r.Checkpoint != nil {
			w.cp = checkpoint.Next(w.cp, r.Checkpoint)
		}
		w.epoch = max(w.epoch, r.Epoch+1)
	}
	return nil
}

// commit runs steps 3 and 4 for rec (its parts' Staged and Dir filled in
// by the caller; their names are derived per sequence number) and step 5.
func (w *writer) commit(ctx context.Context, rec record, writing bool) error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	for {
		if err := w.examine(ctx, writing); err != nil {
			return err
		}
		seq := w.seen + 1
		rec.Pipeline, rec.Epoch = w.p.ID, w.epoch
		for i := range rec.Parts {
			rec.Parts[i].Name = path.Join(w.s.o.dataDir, rec.Parts[i].Dir, PartName(seq, i, len(rec.Parts), w.s.o.format))
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", flightline.ErrInternal, w.s.name, err)
		}
		key := path.Join(w.target, commitsDir, seqName(seq)+".json")
		err = w.s.b.PutIfAbsent(ctx, key, data)
		if errors.Is(err, ErrExists) {
			// Another writer took seq, or this one did: a request that the
			// store carried out but whose answer was lost, retried by the
			// store's client, is refused as a taken name. The record's
			// bytes say which: ours name our staged data, which no other
			// record can (a record without data, such as two racing
			// Opens' markers, may be the same bytes: it is never ours).
			if len(rec.Parts) == 0 {
				continue
			}
			if got, gerr := w.s.b.Get(ctx, key); gerr != nil || !bytes.Equal(got, data) {
				continue // another writer's: examine it, then try the next
			}
			err = nil
		}
		if err != nil {
			// The outcome is unknown (a cancelled or cut request may have
			// created the record): return it as a commitError, so the
			// staged data stays for the next Open to publish if it did.
			return commitError{err}
		}
		w.seen = seq
		rec.seq = seq
		if len(rec.Parts) > 0 {
			// Committed: a failure to publish now is finished by the next
			// Open, so it is not the batch's failure.
			_ = w.s.publish(ctx, w.target, rec)
		}
		return nil
	}
}

func (w *writer) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := flightsink.CheckBatch(rec, cp); err != nil {
		return err
	}
	if w.broken != nil {
		return w.broken
	}
	if checkpoint.Replayed(w.cp, cp) {
		return w.checkFenced(ctx) // fencing wins over replay
	}
	if rec.NumRows() > 0 && w.schema != nil && !w.s.fits(w.schema, rec.Schema()) {
		return fmt.Errorf("%w: %s: target %q has schema %s, batch has %s", flightline.ErrSchemaMismatch, w.s.name, w.p.Target, w.schema, rec.Schema())
	}
	if rec.NumRows() == 0 {
		rec = nil
	}
	return w.write(ctx, rec, checkpoint.Next(w.cp, cp))
}

// WriteBatches implements flightsink.GroupWriter: the group's new batches
// (Fold) become one part file per partition and one commit record with the
// checkpoint after the group, so the group is all or nothing and costs the
// fsyncs of one batch.
func (w *writer) WriteBatches(ctx context.Context, batches []flightsink.Batch) error {
	if err := flightsink.CheckGroup(batches); err != nil {
		return err
	}
	if w.broken != nil {
		return w.broken
	}
	fresh, next, n := flightsink.Fold(w.cp, batches)
	if n == 0 {
		return w.checkFenced(ctx) // fencing wins over replay
	}
	schema := w.schema
	var recs []arrow.RecordBatch
	for i, b := range batches {
		if !fresh[i] || b.Rec.NumRows() == 0 {
			continue
		}
		if schema != nil && !w.s.fits(schema, b.Rec.Schema()) {
			return fmt.Errorf("%w: %s: target %q has schema %s, batch %d of the group has %s", flightline.ErrSchemaMismatch, w.s.name, w.p.Target, schema, i, b.Rec.Schema())
		}
		schema = widest(schema, b.Rec.Schema())
		recs = append(recs, b.Rec)
	}
	if w.s.o.evolve && len(recs) > 1 {
		// Batches of the group's older schemas get its newest columns.
		padded := make([]arrow.RecordBatch, len(recs))
		for i, r := range recs {
			padded[i] = pad(w.s.o.mem, r, schema)
			defer padded[i].Release()
		}
		recs = padded
	}
	switch len(recs) {
	case 0:
		return w.write(ctx, nil, next)
	case 1:
		return w.write(ctx, recs[0], next)
	}
	rec, err := concat(w.s.o.mem, recs)
	if err != nil {
		return fmt.Errorf("%w: %s: joining the group: %v", flightline.ErrInternal, w.s.name, err)
	}
	defer rec.Release()
	return w.write(ctx, rec, next)
}

// concat joins batches of one schema into one; the caller releases it.
func concat(mem memory.Allocator, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	sc := recs[0].Schema()
	cols := make([]arrow.Array, sc.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	parts := make([]arrow.Array, len(recs))
	for j := range cols {
		for k, r := range recs {
			parts[k] = r.Column(j)
		}
		c, err := array.Concatenate(parts, mem)
		if err != nil {
			return nil, err
		}
		cols[j] = c
	}
	return array.NewRecordBatch(sc, cols, rows), nil
}

// checkFenced fails when a newer Open has claimed the pipeline.
func (w *writer) checkFenced(ctx context.Context) error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.examine(ctx, true)
}

// write stages rec (nil: no rows) and commits it with checkpoint next,
// the pipeline's checkpoint after it.
func (w *writer) write(ctx context.Context, rec arrow.RecordBatch, next []byte) error {
	r := record{Checkpoint: next}
	if rec != nil {
		r.Rows = rec.NumRows()
		files, err := w.s.encodeParts(ctx, rec)
		if err != nil {
			return err
		}
		// The target's schema after this batch: with SchemaEvolution a
		// batch may lack the trailing columns of an earlier one.
		schema := widest(w.schema, rec.Schema())
		if fn := w.s.o.beforeCommit; fn != nil {
			c := Commit{Target: w.target, Schema: schema, Dirs: make([]string, len(files))}
			for i, f := range files {
				c.Dirs[i] = f.dir
			}
			if err := fn(ctx, c); err != nil {
				return err
			}
		}
		r.Schema = flight.SerializeSchema(schema, w.s.o.mem)
		for _, f := range files {
			pt := part{Staged: path.Join(w.target, stagingDir, randName()+"."+w.s.o.format.Ext()), Dir: f.dir}
			r.Parts = append(r.Parts, pt)
			if err := w.s.b.Put(ctx, pt.Staged, f.data); err != nil {
				w.s.dropStaged(ctx, r)
				return err
			}
		}
	}
	if err := w.commit(ctx, r, true); err != nil {
		var unknown commitError
		if !errors.As(err, &unknown) {
			w.s.dropStaged(ctx, r) // refused before the record was written
		}
		return err
	}
	w.cp = next
	if rec != nil {
		w.schema = widest(w.schema, rec.Schema())
	}
	return nil
}

func (w *writer) Close(context.Context) error { return nil }

// commitError is a failed write of a commit record whose outcome is
// unknown: the store may have created it. Its staged data must stay (Open
// publishes it if the record exists, and removes it StaleAfter later if
// not).
type commitError struct{ err error }

func (e commitError) Error() string { return e.err.Error() }
func (e commitError) Unwrap() error { return e.err }

// dropStaged removes the staged files of a batch that was not committed.
func (s *Sink) dropStaged(ctx context.Context, r record) {
	for _, pt := range r.Parts {
		_ = s.b.Delete(context.WithoutCancel(ctx), pt.Staged)
	}
}

func randName() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// encode returns rec as one part file.
func (s *Sink) encode(rec arrow.RecordBatch) ([]byte, error) {
	switch s.o.format {
	case JSONL, CSV:
		var enc rowenc.Encoder = rowenc.NewJSONL(rec.Schema())
		if s.o.format == CSV {
			enc = rowenc.NewCSV(rec.Schema())
		}
		var buf bytes.Buffer
		if err := enc.Encode(&buf, rec); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		return buf.Bytes(), nil
	}
	sc := parquetw.StoredSchema(rec.Schema())
	st := parquetw.Storable(s.o.mem, rec, sc)
	defer st.Release()
	data, _, err := parquetw.Bytes(st, parquetw.Allocator(s.o.mem))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: as Parquet: %v", flightline.ErrInvalidInput, s.name, err)
	}
	return data, nil
}
