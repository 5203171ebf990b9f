package delta

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/changes"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/parquetw"
)

// DefaultInstance is the instance name of a sink without Instance.
const DefaultInstance = "default"

// DefaultCheckpointInterval is how often (in commits) a Delta checkpoint
// is written at least, on a table of fewer than
// CheckpointFilesPerCommit×10 files (see CheckpointInterval).
const DefaultCheckpointInterval = 10

// CheckpointFilesPerCommit bounds the amortized checkpoint work per
// commit: a checkpoint rewrites every active file, so on a table of f
// files the interval n is stretched to the multiple of n nearest below
// f/CheckpointFilesPerCommit (n itself while that is smaller). A
// streaming writer adds a file per batch; without the stretch the cost of
// a commit would grow with the table for ever. Readers replay at most
// that many JSON commits after the checkpoint, one per 1,000 files the
// checkpoint itself holds.
const CheckpointFilesPerCommit = 1000

// Config is what a delta sink is given in its URL or YAML.
type Config struct {
	// URI is the table: a local path, file:///path or s3://bucket/prefix.
	// A non-empty Pipeline.Target names a table in a sub-directory of it
	// instead. Required.
	URI string
	// Storage holds the object-store options (AWS_* keys, as delta-rs
	// takes them). Unknown keys are an error.
	Storage map[string]string
	// Instance names this sink instance within its pipelines. Instances
	// of one pipeline with different names do not fence each other: they
	// write disjoint partitions and each keeps its own checkpoint; Open
	// and Checkpoint return the per-partition maximum over all instances.
	// Two writers with the same pipeline and instance fence each other
	// (the newer Open wins). Default DefaultInstance.
	Instance string
	// CheckpointInterval writes a classic Delta checkpoint every n commits
	// (default DefaultCheckpointInterval, 10; negative: never): at every
	// version that is a multiple of the effective interval, n while the
	// table holds fewer than n×CheckpointFilesPerCommit active files, then
	// n×⌊files/(n×1000)⌋, so that a checkpoint's cost (it rewrites every
	// file) spread over the commits between checkpoints stays about 1,000
	// files per commit however large the table grows. Every writer of a
	// version computes the same interval.
	CheckpointInterval int
	// SchemaEvolution allows batches with new nullable columns: the
	// commit adds them to the table schema (a metaData action). Off by
	// default: any schema difference is ErrSchemaMismatch.
	SchemaEvolution bool
	// TargetFileSize is the size in bytes compaction aims its files at
	// (default DefaultTargetFileSize, 32 MiB). A file under half of it is
	// small: compaction rewrites small files into files of at most about
	// this many bytes. The rewrite holds one input file, one row group (at
	// most 16 MiB compressed) and, on S3, one upload part in memory; its
	// output streams to the store.
	TargetFileSize int64
	// Compaction is the sink's compaction: "auto" (the default) rewrites
	// small files in the background once CompactMinFiles of them gather,
	// in commits of their own that change no data (dataChange false);
	// "off" never does.
	Compaction string
	// CompactMinFiles is how many small files (under half of
	// TargetFileSize) the table must hold before the sink compacts
	// (default DefaultCompactMinFiles, 50; at least 2).
	CompactMinFiles int
	// Vacuum is the sink's cleanup: "auto" (the default) runs what
	// (*Sink).Vacuum does in the background, at most once per
	// VacuumInterval, after a checkpoint; "off" never does.
	Vacuum string
	// Mode is how rows reach the table: ModeAppend (the default) adds
	// every row; ModeMerge applies each row as a change by Key (the
	// postgres-cdc source's batches: _op "delete" deletes the key's row,
	// any other change replaces it; _op, _lsn and _commit_time are not
	// written). A merge commit rewrites every file holding one of its
	// keys (see merge.go and docs/sinks/delta.md).
	Mode string
	// Key are the key columns of ModeMerge (required there, refused
	// otherwise). They must be columns of the table and of every batch
	// (flightline.ErrSchemaMismatch) and never null
	// (flightline.ErrInvalidInput).
	Key []string
}

// apply validates c and sets its values, defaults left for zero fields.
func (c Config) apply(o *options) error {
	for k := range c.Storage {
		if !objstore.IsOption(k) {
			return fmt.Errorf("%w: unknown storage option %q (known: %s)", flightline.ErrInvalidInput, k, strings.Join(objstore.OptionKeys(), ", "))
		}
	}
	o.storage = c.Storage
	if c.Instance != "" {
		o.instance = c.Instance
	}
	switch {
	case c.CheckpointInterval < 0:
		o.interval = 0
	case c.CheckpointInterval > 0:
		o.interval = int64(c.CheckpointInterval)
	}
	o.evolve = c.SchemaEvolution
	switch {
	case c.TargetFileSize < 0:
		return fmt.Errorf("%w: target file size %d < 1", flightline.ErrInvalidInput, c.TargetFileSize)
	case c.TargetFileSize > 0:
		o.target = c.TargetFileSize
	}
	var err error
	if o.compact, err = autoOff("compaction", c.Compaction); err != nil {
		return err
	}
	switch {
	case c.CompactMinFiles == 0:
	case c.CompactMinFiles < 2:
		return fmt.Errorf("%w: compact_min_files %d < 2", flightline.ErrInvalidInput, c.CompactMinFiles)
	default:
		o.minFiles = c.CompactMinFiles
	}
	if o.vacuum, err = autoOff("vacuum", c.Vacuum); err != nil {
		return err
	}
	switch c.Mode {
	case "", ModeAppend:
	case ModeMerge:
		o.merge = true
	default:
		return fmt.Errorf("%w: mode %q: want %s or %s", flightline.ErrInvalidInput, c.Mode, ModeAppend, ModeMerge)
	}
	for _, k := range c.Key {
		if k == "" {
			return fmt.Errorf("%w: empty key column name", flightline.ErrInvalidInput)
		}
		if changes.IsChangeColumn(k) {
			return fmt.Errorf("%w: key column %q is a change column, never written", flightline.ErrInvalidInput, k)
		}
	}
	switch {
	case o.merge && len(c.Key) == 0:
		return fmt.Errorf("%w: delta sink: mode %s needs key columns", flightline.ErrInvalidInput, ModeMerge)
	case !o.merge && len(c.Key) > 0:
		return fmt.Errorf("%w: delta sink: key is for mode %s", flightline.ErrInvalidInput, ModeMerge)
	}
	o.key = slices.Clone(c.Key)
	return nil
}

// autoOff reads a key that is "auto" (or empty: the default) or "off".
func autoOff(key, v string) (bool, error) {
	switch v {
	case "", "auto":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("%w: %s %q (want auto or off)", flightline.ErrInvalidInput, key, v)
}

// Option configures a Sink beyond its Config.
type Option func(*options) error

type options struct {
	storage   objstore.Options
	creds     aws.CredentialsProvider
	instance  string
	interval  int64
	evolve    bool
	mem       memory.Allocator
	log       *slog.Logger
	attempts  int
	pqOptions []parquetw.Option
	// Compaction and cleanup (compact.go, vacuum.go).
	target      int64
	compact     bool
	minFiles    int
	vacuum      bool
	vacuumEvery time.Duration
	logRet      time.Duration // 0: the table's delta.logRetentionDuration
	fileRet     time.Duration // 0: the table's delta.deletedFileRetentionDuration
	// Merge mode (merge.go).
	merge bool
	key   []string
}

// Credentials sets the S3 credentials provider (for an s3:// table only),
// used for every request instead of keys in Config.Storage, which must then
// hold none: the provider renews its credentials itself (Unity Catalog's
// vended credentials, flightsink/databricks).
func Credentials(p aws.CredentialsProvider) Option {
	return func(o *options) error { o.creds = p; return nil }
}

// Allocator sets the allocator for Parquet encoding; nil means
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

// Logger sets the logger; nil means slog.Default(), the default.
func Logger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.Default()
		}
		o.log = l
		return nil
	}
}

// MaxCommitAttempts bounds the put-if-absent retries of one commit
// (default 100); then WriteBatch returns ErrConflict.
func MaxCommitAttempts(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: MaxCommitAttempts %d < 1", flightline.ErrInvalidInput, n)
		}
		o.attempts = n
		return nil
	}
}

// ParquetDictionary sets which columns the Parquet writer
// dictionary-encodes: "auto" (the default: the columns whose sampled
// cardinality makes it pay), "always" or "never".
func ParquetDictionary(mode string) Option {
	return func(o *options) error {
		opt, err := parquetw.DictionaryMode(mode)
		if err != nil {
			return err
		}
		o.pqOptions = append(o.pqOptions, opt)
		return nil
	}
}

// ParquetRowGroupRows bounds the rows of one Parquet row group (default
// 1M, more than a batch usually holds: one row group per file).
func ParquetRowGroupRows(n int64) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: Parquet row group rows %d < 1", flightline.ErrInvalidInput, n)
		}
		o.pqOptions = append(o.pqOptions, parquetw.MaxRowGroupRows(n))
		return nil
	}
}

// Sink is an exactly-once Delta Lake sink on local disk or S3. It is safe
// for concurrent use by several pipelines. See the package documentation.
type Sink struct {
	root objstore.Store
	o    options
}

// New returns a sink writing the table at cfg.URI. New does not touch the
// store (it only loads the SDK configuration for an s3:// table, within
// ctx); errors reaching it surface on Open or Checkpoint. It validates cfg
// (storage keys, compaction and vacuum modes, sizes). Close releases
// nothing: each Writer owns its background compaction and cleanup, and
// its Close stops them.
func New(ctx context.Context, cfg Config, opts ...Option) (*Sink, error) {
	o := options{instance: DefaultInstance, interval: DefaultCheckpointInterval, mem: memory.DefaultAllocator,
		log: slog.Default(), attempts: 100, target: DefaultTargetFileSize, compact: true, minFiles: DefaultCompactMinFiles,
		vacuum: true, vacuumEvery: DefaultVacuumInterval}
	if err := cfg.apply(&o); err != nil {
		return nil, err
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	root, err := objstore.OpenWithCredentials(ctx, cfg.URI, o.storage, o.creds)
	if err != nil {
		return nil, err
	}
	return &Sink{root: root, o: o}, nil
}

// Close releases nothing (each Writer stops its own background work on
// its Close) and returns nil.
func (s *Sink) Close() error { return nil }

// Guarantee implements flightsink.Guaranteer.
func (s *Sink) Guarantee() flightsink.Guarantee { return flightsink.ExactlyOnce }

// URL returns the location of the table of target ("" for the default).
func (s *Sink) URL(target string) string { return objstore.Sub(s.root, target).URL() }

func (s *Sink) table(target string) (*deltalog.Table, error) {
	// The rule Dir has: one plain directory name under the location, so
	// an absolute or dotted target cannot leave it.
	if err := flightsink.CheckDirTarget(target); err != nil {
		return nil, fmt.Errorf("delta sink: %w", err)
	}
	return deltalog.NewTable(objstore.Sub(s.root, target), s.o.mem), nil
}

// Domain is the domainMetadata domain holding the state of one instance of
// a pipeline: "flightline.pipeline/<pipeline_id>/<instance>", both parts
// query-escaped.
func Domain(pipeline, instance string) string {
	return domainPrefix(pipeline) + url.QueryEscape(instance)
}

func domainPrefix(pipeline string) string {
	return "flightline.pipeline/" + url.QueryEscape(pipeline) + "/"
}

// TxnAppID is the appId of the txn action counting a pipeline instance's
// commits: the pipeline id for the default instance, else
// "<pipeline_id>@<instance>".
func TxnAppID(pipeline, instance string) string {
	if instance == DefaultInstance {
		return pipeline
	}
	return pipeline + "@" + instance
}

// state is the JSON configuration of a pipeline instance's domain.
type state struct {
	Pipeline      string `json:"pipeline_id"`
	Instance      string `json:"instance"`
	Epoch         int64  `json:"epoch"`
	Writer        string `json:"writer"`
	Seq           int64  `json:"seq"`
	Checkpoint    string `json:"checkpoint,omitempty"`
	CheckpointB64 string `json:"checkpoint_b64,omitempty"`
}

func (st *state) cp() []byte {
	if st.CheckpointB64 != "" {
		b, _ := base64.StdEncoding.DecodeString(st.CheckpointB64)
		return b
	}
	if st.Checkpoint == "" {
		return nil
	}
	return []byte(st.Checkpoint)
}

func (st *state) setCP(cp []byte) {
	st.Checkpoint, st.CheckpointB64 = "", ""
	if utf8.Valid(cp) {
		st.Checkpoint = string(cp)
	} else {
		st.CheckpointB64 = base64.StdEncoding.EncodeToString(cp)
	}
}

func readState(snap *deltalog.Snapshot, domain string) (*state, error) {
	d, ok := snap.Domains[domain]
	if !ok {
		return nil, nil
	}
	var st state
	if err := json.Unmarshal([]byte(d.Configuration), &st); err != nil {
		return nil, fmt.Errorf("%w: domain %s: bad configuration: %v", flightline.ErrInvalidInput, domain, err)
	}
	return &st, nil
}

// merged returns the checkpoint of pipeline over all its instances: the
// one instance's bytes, or the per-partition maximum when there are
// several and all are Positions.
func merged(snap *deltalog.Snapshot, pipeline string) ([]byte, error) {
	prefix := domainPrefix(pipeline)
	var cps [][]byte
	for name := range snap.Domains {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		st, err := readState(snap, name)
		if err != nil {
			return nil, err
		}
		cps = append(cps, st.cp())
	}
	cp, err := checkpoint.MergeAll(cps...)
	if err != nil {
		return nil, fmt.Errorf("%w: pipeline %q has several instances and an opaque (not Positions) checkpoint: cannot merge", flightline.ErrInvalidInput, pipeline)
	}
	return cp, nil
}

// Checkpoint implements flightsink.Sink: the pipeline's checkpoint in the
// latest table version, merged over its instances. It neither claims nor
// fences.
func (s *Sink) Checkpoint(ctx context.Context, p flightsink.Pipeline) ([]byte, error) {
	if p.ID == "" {
		return nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	t, err := s.table(p.Target)
	if err != nil {
		return nil, err
	}
	snap, err := t.StreamedSnapshot(ctx, 0) // the domains are all it needs
	if err != nil {
		return nil, err
	}
	return merged(snap, p.ID)
}

// snapshot loads the snapshot a writer keeps: streamed (nothing per file
// of the last checkpoint) when appending; lean (every active file's path,
// size and times) in merge mode, whose commits look up the files holding
// their keys.
func (s *Sink) snapshot(ctx context.Context, t *deltalog.Table) (*deltalog.Snapshot, error) {
	if s.o.merge {
		return t.LeanSnapshot(ctx)
	}
	return t.StreamedSnapshot(ctx, s.o.target/2)
}

func nonce() string {
	var b [12]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Open implements flightsink.Sink. On an existing table it commits a claim:
// a version holding the instance's domain with epoch+1 and a fresh writer
// id, which fences every earlier writer of this pipeline instance (their
// commits find the domain changed by someone else and fail with ErrFenced).
// On a table that does not exist yet it writes a claim object
// (_flightline/claims/<domain>/<epoch>, put-if-absent, outside the log and
// ignored by readers) that every writer checks before committing while
// the table does not exist; an older writer that committed between that
// check and the claim is found by the newer writer's first commit, which
// fails with ErrConflict (re-open) rather than duplicate.
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	if p.ID == "" {
		return nil, nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	t, err := s.table(p.Target)
	if err != nil {
		return nil, nil, err
	}
	w := &writer{s: s, p: p, t: t, domain: Domain(p.ID, s.o.instance), id: nonce(), log: s.o.log}
	snap, err := s.snapshot(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		if snap.Version >= 0 {
			if err := snap.CheckWrite(); err != nil {
				return nil, nil, fmt.Errorf("delta sink %s: %w", t.URL(), err)
			}
		}
		prev, err := readState(snap, w.domain)
		if err != nil {
			return nil, nil, err
		}
		st := state{Pipeline: p.ID, Instance: s.o.instance, Epoch: 1, Writer: w.id}
		if prev != nil {
			st.Epoch, st.Seq = prev.Epoch+1, prev.Seq
			st.setCP(prev.cp())
		}
		if claimed, err := w.claimedEpoch(ctx); err != nil {
			return nil, nil, err
		} else if claimed >= st.Epoch {
			st.Epoch = claimed + 1
		}
		w.st = st
		if snap.Version < 0 {
			// No table yet, so no log to claim in: claim with a claim
			// object instead; the writer checks the claims before every
			// commit while the table does not exist.
			err := w.t.Store().PutIfAbsent(ctx, w.claimKey(st.Epoch), []byte(w.id))
			if errors.Is(err, objstore.ErrExists) && attempt < s.o.attempts {
				continue // a racing Open took this epoch
			}
			if err != nil {
				return nil, nil, fmt.Errorf("delta sink %s: claim pipeline %q: %w", t.URL(), p.ID, err)
			}
			if _, err := snap.Update(ctx, t); err != nil {
				return nil, nil, err
			}
			if snap.Version >= 0 {
				continue // the table appeared meanwhile: claim in its log
			}
			break
		}
		acts := []deltalog.Action{{CommitInfo: w.commitInfo(false, st, nil, nil, 0)}}
		if proto, err := protocolFor(snap, nil, nil); err != nil {
			return nil, nil, err
		} else if proto != snap.Protocol {
			acts = append(acts, deltalog.Action{Protocol: proto})
		}
		acts = append(acts, deltalog.Action{DomainMetadata: w.domainAction()})
		err = t.Commit(ctx, snap.Version+1, acts)
		if err == nil {
			if err := snap.Apply(snap.Version+1, acts); err != nil {
				return nil, nil, err
			}
			break
		}
		if !errors.Is(err, deltalog.ErrVersionExists) || attempt >= s.o.attempts {
			return nil, nil, fmt.Errorf("delta sink %s: claim pipeline %q: %w", t.URL(), p.ID, err)
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, nil, err
		}
		if _, err := snap.Update(ctx, t); err != nil {
			return nil, nil, err
		}
	}
	w.snap = snap
	w.publishView()
	last, err := merged(snap, p.ID)
	if err != nil {
		return nil, nil, err
	}
	w.last = last
	w.base, _ = checkpoint.Parse(last) // nil when empty or opaque
	w.bg.init()
	w.synced = time.Now()
	s.o.log.Debug("delta sink: pipeline opened", "pipeline", p.ID, "instance", s.o.instance, "epoch", w.st.Epoch, "table", t.URL(), "version", snap.Version)
	return w, last, nil
}

func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(5<<min(attempt, 8)) * time.Millisecond
	d = min(d, time.Second)
	d = d/2 + time.Duration(rand.Int64N(int64(d)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var _ flightsink.Sink = (*Sink)(nil)
var _ flightsink.Stager = (*writer)(nil)
var _ flightsink.Guaranteer = (*Sink)(nil)
