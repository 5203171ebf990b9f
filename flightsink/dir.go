package flightsink

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/transform"
)

// Dir is an exactly-once sink that writes each committed batch as one Arrow
// IPC file in a local directory, readable with any Arrow library (e.g.
// pyarrow.dataset.dataset(dir, format="arrow")). It backs the demo.
//
// Layout: <root>/<target>/<seq>.arrow, target "default" when empty, seq a
// 20-digit commit sequence number shared by all pipelines of the target.
// Each file's schema metadata holds the pipeline id, the writer's epoch and
// the checkpoint, so data and checkpoint are one file.
//
// Commit protocol: the file is written under a temporary name, fsynced, and
// hard-linked to the next free sequence name; link fails if the name
// exists, which makes the link the atomic, put-if-absent commit point. Open
// commits a 0-row marker with a higher epoch; a writer that finds a commit
// of its pipeline with its own or a newer epoch that it did not write is
// fenced. On a target without data yet there is no schema for a marker that
// readers would accept, so Open instead creates the claim file
// <root>/<target>/.claims/<pipeline>.<epoch> (exclusive create; readers
// skip dot-directories), and every commit checks the claims first. An older
// writer that committed between that check and a newer Open's claim is
// found by the newer writer's first commit, which then fails with
// ErrConflict (re-open and re-read the checkpoint) instead of duplicating.
// The pipeline's checkpoint is the Next-merge of its commits' checkpoints,
// in sequence order; each commit file stores that merge as it stands after
// the commit (and says so: DirMetaMerged), so Checkpoint reads only the
// newest commit file of the pipeline (and those of other pipelines after
// it), whatever the number of files. Files written before DirMetaMerged
// existed hold the batch's own checkpoint: when the newest one is such a
// file, Checkpoint merges every commit, as Open does. A crash leaves at most a temporary file, which Open
// removes once it is a minute old.
type Dir struct {
	root string
	mem  memory.Allocator
	mu   sync.Mutex // serialises commits within this process

	// testHookOpenScanned, when set, runs in Open between the scan of the
	// target and the link of the epoch marker.
	testHookOpenScanned func()
	// reads counts the commit files opened, for tests.
	reads atomic.Int64
	// legacyFiles, for tests, writes commit files as before DirMetaMerged.
	legacyFiles bool
}

// Metadata keys of Dir files.
const (
	DirMetaPipeline   = "flightline.pipeline"
	DirMetaEpoch      = "flightline.epoch"
	DirMetaCheckpoint = "flightline.checkpoint" // standard base64
	// DirMetaMerged is "true" in files whose DirMetaCheckpoint is the
	// pipeline's whole checkpoint after the commit (the merge with every
	// earlier commit), not only the batch's.
	DirMetaMerged = "flightline.checkpoint_merged"
)

// NewDir returns a Dir sink rooted at root, creating it if needed.
func NewDir(root string, mem memory.Allocator) (*Dir, error) {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("%w: dir sink: %v", flightline.ErrUnavailable, err)
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return &Dir{root: root, mem: mem}, nil
}

// Root returns the directory the sink writes under.
func (d *Dir) Root() string { return d.root }

// Guarantee implements Guaranteer.
func (d *Dir) Guarantee() Guarantee { return ExactlyOnce }

func (d *Dir) dir(p Pipeline) (string, error) {
	if err := CheckDirTarget(p.Target); err != nil {
		return "", fmt.Errorf("dir sink: %w", err)
	}
	t := p.Target
	if t == "" {
		t = "default"
	}
	return filepath.Join(d.root, t), nil
}

// entry is what a commit file says about itself.
type entry struct {
	seq      uint64
	pipeline string
	epoch    uint64
	cp       []byte
	merged   bool // cp is the pipeline's whole checkpoint (DirMetaMerged)
	schema   *arrow.Schema
	rows     int64
}

func seqName(seq uint64) string { return fmt.Sprintf("%020d.arrow", seq) }

// scan reads the entries of dir with seq > after, in order.
func (d *Dir) scan(dir string, after uint64) ([]entry, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: dir sink: %v", flightline.ErrUnavailable, err)
	}
	var out []entry
	for _, de := range des {
		name := de.Name()
		if len(name) != 26 || !strings.HasSuffix(name, ".arrow") {
			continue
		}
		seq, err := strconv.ParseUint(name[:20], 10, 64)
		if err != nil || seq <= after {
			continue
		}
		e, err := d.readEntry(filepath.Join(dir, name), true)
		if err != nil {
			return nil, err
		}
		e.seq = seq
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b entry) int { return int(a.seq - b.seq) })
	return out, nil
}

// readEntry reads a commit file: its metadata and, when rows, the row
// count of its record batches.
func (d *Dir) readEntry(path string, rows bool) (entry, error) {
	d.reads.Add(1)
	f, err := os.Open(path)
	if err != nil {
		return entry{}, fmt.Errorf("%w: dir sink: %v", flightline.ErrUnavailable, err)
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f, ipc.WithAllocator(d.mem))
	if err != nil {
		return entry{}, fmt.Errorf("dir sink: corrupt commit file %s: %w", path, err)
	}
	defer r.Close()
	md := r.Schema().Metadata()
	e := entry{pipeline: metaGet(md, DirMetaPipeline), schema: r.Schema(), merged: metaGet(md, DirMetaMerged) == "true"}
	e.epoch, _ = strconv.ParseUint(metaGet(md, DirMetaEpoch), 10, 64)
	if s := metaGet(md, DirMetaCheckpoint); s != "" {
		if e.cp, err = base64.StdEncoding.DecodeString(s); err != nil {
			return entry{}, fmt.Errorf("dir sink: bad checkpoint in %s: %w", path, err)
		}
	}
	if !rows {
		return e, nil
	}
	for i := range r.NumRecords() {
		rec, err := r.RecordBatch(i)
		if err != nil {
			return entry{}, fmt.Errorf("dir sink: corrupt commit file %s: %w", path, err)
		}
		e.rows += rec.NumRows()
		rec.Release()
	}
	return e, nil
}

func metaGet(md arrow.Metadata, k string) string {
	if i := md.FindKey(k); i >= 0 {
		return md.Values()[i]
	}
	return ""
}

// state is what a scan of a whole target says about one pipeline.
type dirState struct {
	lastSeq uint64
	epoch   uint64
	cp      []byte
	schema  *arrow.Schema // of the first data file of the target, if any
}

func (d *Dir) state(dir, pipeline string) (dirState, error) {
	es, err := d.scan(dir, 0)
	if err != nil {
		return dirState{}, err
	}
	var st dirState
	for _, e := range es {
		st.lastSeq = e.seq
		if st.schema == nil && e.rows > 0 {
			st.schema = stripMeta(e.schema)
		}
		if e.pipeline != pipeline {
			continue
		}
		st.epoch = max(st.epoch, e.epoch)
		if e.cp != nil {
			st.cp = checkpoint.Next(st.cp, e.cp)
		}
	}
	claimed, err := claimEpoch(dir, pipeline)
	if err != nil {
		return dirState{}, err
	}
	st.epoch = max(st.epoch, claimed)
	return st, nil
}

const claimsDir = ".claims"

func claimPrefix(pipeline string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(pipeline)) + "."
}

// claimEpoch returns the highest epoch claimed for pipeline in dir's claim
// files, 0 when none.
func claimEpoch(dir, pipeline string) (uint64, error) {
	des, err := os.ReadDir(filepath.Join(dir, claimsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%w: dir sink: %v", flightline.ErrUnavailable, err)
	}
	prefix := claimPrefix(pipeline)
	var top uint64
	for _, de := range des {
		if rest, ok := strings.CutPrefix(de.Name(), prefix); ok {
			if n, err := strconv.ParseUint(rest, 10, 64); err == nil {
				top = max(top, n)
			}
		}
	}
	return top, nil
}

// claim creates the claim file of pipeline at epoch; false when it exists.
func claim(dir, pipeline string, epoch uint64) (bool, error) {
	cd := filepath.Join(dir, claimsDir)
	if err := os.MkdirAll(cd, 0o755); err != nil {
		return false, fmt.Errorf("%w: dir sink: %v", flightline.ErrUnavailable, err)
	}
	f, err := os.OpenFile(filepath.Join(cd, claimPrefix(pipeline)+strconv.FormatUint(epoch, 10)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: dir sink claim: %v", flightline.ErrUnavailable, err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("%w: dir sink claim: %v", flightline.ErrUnavailable, err)
	}
	if df, err := os.Open(cd); err == nil {
		_ = df.Sync()
		df.Close()
	}
	return true, nil
}

func stripMeta(s *arrow.Schema) *arrow.Schema { return arrow.NewSchema(s.Fields(), nil) }

// Checkpoint implements Sink. It reads the commit files from the newest
// back to the newest of p that carries a checkpoint, their metadata only;
// that file's checkpoint is p's, unless the file predates DirMetaMerged.
func (d *Dir) Checkpoint(_ context.Context, p Pipeline) ([]byte, error) {
	dir, err := d.dir(p)
	if err != nil {
		return nil, err
	}
	des, err := os.ReadDir(dir) // sorted by name: by sequence number
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: dir sink: %v", flightline.ErrUnavailable, err)
	}
	for i := len(des) - 1; i >= 0; i-- {
		name := des[i].Name()
		if len(name) != 26 || !strings.HasSuffix(name, ".arrow") {
			continue
		}
		if _, err := strconv.ParseUint(name[:20], 10, 64); err != nil {
			continue
		}
		e, err := d.readEntry(filepath.Join(dir, name), false)
		if err != nil {
			return nil, err
		}
		if e.pipeline != p.ID || e.cp == nil {
			continue // another pipeline's commit, or an epoch marker
		}
		if e.merged {
			return e.cp, nil
		}
		break // an older file: merge every commit
	}
	st, err := d.state(dir, p.ID)
	return st.cp, err
}

// Open implements Sink: it commits an epoch marker that fences older
// writers of p.
func (d *Dir) Open(_ context.Context, p Pipeline) (Writer, []byte, error) {
	if p.ID == "" {
		return nil, nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	dir, err := d.dir(p)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("%w: dir sink: %v", flightline.ErrUnavailable, err)
	}
	d.removeStaleTemps(dir)
	for {
		st, err := d.state(dir, p.ID)
		if err != nil {
			return nil, nil, err
		}
		w := &dirWriter{d: d, dir: dir, p: p, epoch: st.epoch + 1, seen: st.lastSeq, cp: st.cp, schema: st.schema}
		if st.schema == nil {
			// No data yet, so no schema for a marker that readers would
			// accept: claim in a claim file instead.
			ok, err := claim(dir, p.ID, w.epoch)
			if err != nil {
				return nil, nil, err
			}
			if !ok {
				continue // a racing Open took this epoch
			}
			// A commit that landed before the claim moves the checkpoint.
			d.mu.Lock()
			newer, err := d.scan(dir, w.seen)
			d.mu.Unlock()
			if err != nil {
				return nil, nil, err
			}
			for _, e := range newer {
				w.seen = e.seq
				if e.pipeline == p.ID && e.cp != nil {
					w.cp = checkpoint.Next(w.cp, e.cp)
				}
				if w.schema == nil && e.rows > 0 {
					w.schema = stripMeta(e.schema)
				}
			}
			return w, w.cp, nil
		}
		if d.testHookOpenScanned != nil {
			d.testHookOpenScanned()
		}
		ok, err := w.link(nil, nil, false) // the epoch marker
		if err != nil {
			return nil, nil, err
		}
		if ok {
			return w, w.cp, nil
		}
		// Someone took the sequence number: re-scan and try again.
	}
}

func (d *Dir) removeStaleTemps(dir string) {
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".tmp-") {
			if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > time.Minute {
				_ = os.Remove(filepath.Join(dir, de.Name()))
			}
		}
	}
}

type dirWriter struct {
	d      *Dir
	dir    string
	p      Pipeline
	epoch  uint64
	seen   uint64 // highest seq this writer has examined
	cp     []byte // last checkpoint committed for p, as this writer knows it
	schema *arrow.Schema
	broken error // set once the writer found the pipeline moved under it
}

func (w *dirWriter) WriteBatch(_ context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := CheckBatch(rec, cp); err != nil {
		return err
	}
	if w.broken != nil {
		return w.broken
	}
	if checkpoint.Replayed(w.cp, cp) {
		// Fencing wins over replay: a fenced writer's replay fails too.
		return w.checkFenced()
	}
	if w.schema != nil && rec.NumRows() > 0 && !SameSchema(w.schema, rec.Schema()) {
		return fmt.Errorf("%w: target %q has schema %s, batch has %s", flightline.ErrSchemaMismatch, w.p.Target, w.schema, rec.Schema())
	}
	for {
		next := checkpoint.Next(w.cp, cp) // link fails if another commit of p moved w.cp
		ok, err := w.link([]arrow.RecordBatch{rec}, next, true)
		if err != nil {
			return err
		}
		if ok {
			w.cp = next
			if w.schema == nil && rec.NumRows() > 0 {
				w.schema = stripMeta(rec.Schema())
			}
			return nil
		}
	}
}

// WriteBatches implements GroupWriter: one commit file holding the group's
// new batches, in order, as the record batches of one Arrow IPC file, and
// the checkpoint after the group (Fold). Zero-row batches add only their
// checkpoint. The file is committed by the same link as a single batch's,
// so the group is all or nothing.
func (w *dirWriter) WriteBatches(_ context.Context, batches []Batch) error {
	if err := CheckGroup(batches); err != nil {
		return err
	}
	if w.broken != nil {
		return w.broken
	}
	fresh, next, n := Fold(w.cp, batches)
	if n == 0 {
		return w.checkFenced() // fencing wins over replay
	}
	var recs []arrow.RecordBatch
	var lastFresh arrow.RecordBatch
	schema := w.schema
	for i, b := range batches {
		if !fresh[i] {
			continue
		}
		lastFresh = b.Rec
		if b.Rec.NumRows() == 0 {
			continue
		}
		if schema != nil && !SameSchema(schema, b.Rec.Schema()) {
			return fmt.Errorf("%w: target %q has schema %s, batch %d of the group has %s", flightline.ErrSchemaMismatch, w.p.Target, schema, i, b.Rec.Schema())
		}
		if schema == nil {
			schema = stripMeta(b.Rec.Schema())
		}
		recs = append(recs, b.Rec)
	}
	if len(recs) == 0 {
		recs = []arrow.RecordBatch{lastFresh} // checkpoints only, as WriteBatch commits a zero-row batch
	}
	for {
		ok, err := w.link(recs, next, true)
		if err != nil {
			return err
		}
		if ok {
			w.cp = next
			if w.schema == nil && recs[0].NumRows() > 0 {
				w.schema = stripMeta(recs[0].Schema())
			}
			return nil
		}
	}
}

// checkFenced fails with ErrFenced when a newer Open of the pipeline has
// claimed it, and with ErrConflict when an older writer committed after
// this writer's Open read the checkpoint.
func (w *dirWriter) checkFenced() error {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	_, err := w.examine(true)
	return err
}

// examine scans the commits after w.seen and the claims. writing says the
// caller is about to commit a batch (not an Open marker).
func (w *dirWriter) examine(writing bool) ([]entry, error) {
	newer, err := w.d.scan(w.dir, w.seen)
	if err != nil {
		return nil, err
	}
	if writing {
		top, err := claimEpoch(w.dir, w.p.ID)
		if err != nil {
			return nil, err
		}
		if top > w.epoch {
			return nil, fmt.Errorf("%w: pipeline %q claimed with epoch %d (this writer has %d)", flightline.ErrFenced, w.p.ID, top, w.epoch)
		}
	}
	for _, e := range newer {
		w.seen = e.seq
		if e.pipeline == w.p.ID && writing {
			if e.epoch >= w.epoch {
				return nil, fmt.Errorf("%w: pipeline %q reopened with epoch %d (this writer has %d)", flightline.ErrFenced, w.p.ID, e.epoch, w.epoch)
			}
			// An older writer committed after this writer's Open read the
			// checkpoint (possible only on a target that had no data then).
			w.broken = fmt.Errorf("%w: pipeline %q moved since it was opened (a commit of epoch %d landed after the claim of epoch %d); re-open and resume from its checkpoint",
				flightline.ErrConflict, w.p.ID, e.epoch, w.epoch)
			return nil, w.broken
		}
		if e.pipeline == w.p.ID {
			// Opening: a commit that landed since Open's scan moves the
			// checkpoint Open must return, and a racing Open is outbid.
			if e.cp != nil {
				w.cp = checkpoint.Next(w.cp, e.cp)
			}
			w.epoch = max(w.epoch, e.epoch+1)
		}
		if w.schema == nil && e.rows > 0 {
			w.schema = stripMeta(e.schema)
		}
	}
	return newer, nil
}

// link commits one file of recs (none: an epoch marker; writing false) at
// the next sequence number. It returns false when another writer took that
// number first (the caller retries), ErrFenced when a newer epoch of the
// pipeline has appeared, and ErrConflict when an older one committed after
// this writer's Open.
func (w *dirWriter) link(recs []arrow.RecordBatch, cp []byte, writing bool) (bool, error) {
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	if _, err := w.examine(writing); err != nil {
		return false, err
	}
	for _, rec := range recs {
		if w.schema != nil && rec.NumRows() > 0 && !SameSchema(w.schema, rec.Schema()) {
			return false, fmt.Errorf("%w: target %q has schema %s, batch has %s", flightline.ErrSchemaMismatch, w.p.Target, w.schema, rec.Schema())
		}
	}
	tmp, err := w.writeTemp(recs, cp)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp)
	err = os.Link(tmp, filepath.Join(w.dir, seqName(w.seen+1)))
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: dir sink commit: %v", flightline.ErrUnavailable, err)
	}
	w.seen++
	if df, err := os.Open(w.dir); err == nil {
		_ = df.Sync()
		df.Close()
	}
	return true, nil
}

func (w *dirWriter) writeTemp(recs []arrow.RecordBatch, cp []byte) (string, error) {
	f, err := os.CreateTemp(w.dir, ".tmp-")
	if err != nil {
		return "", fmt.Errorf("%w: dir sink: %v", flightline.ErrUnavailable, err)
	}
	keys := []string{DirMetaPipeline, DirMetaEpoch}
	vals := []string{w.p.ID, strconv.FormatUint(w.epoch, 10)}
	if cp != nil {
		keys = append(keys, DirMetaCheckpoint)
		vals = append(vals, base64.StdEncoding.EncodeToString(cp))
		if !w.d.legacyFiles {
			keys = append(keys, DirMetaMerged)
			vals = append(vals, "true")
		}
	}
	var fields []arrow.Field
	if len(recs) > 0 {
		fields = recs[0].Schema().Fields()
	} else if w.schema != nil {
		fields = w.schema.Fields()
	}
	schema := arrow.NewSchema(fields, ptr(arrow.NewMetadata(keys, vals)))
	if len(recs) > 1 && hasDictionary(fields) {
		// An Arrow IPC file holds one dictionary per field, and a group's
		// batches may each carry another (a stream's dictionary
		// replacements): write the group as one batch, its dictionaries
		// unified.
		one, err := transform.Concat(w.d.mem, recs)
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			return "", fmt.Errorf("%w: dir sink: merging the dictionaries of a group: %v", flightline.ErrInvalidInput, err)
		}
		defer one.Release()
		recs = []arrow.RecordBatch{one}
	}
	iw, err := ipc.NewFileWriter(f, ipc.WithSchema(schema), ipc.WithAllocator(w.d.mem))
	for _, rec := range recs {
		if err != nil {
			break
		}
		r2 := array.NewRecordBatch(schema, rec.Columns(), rec.NumRows())
		err = iw.Write(r2)
		r2.Release()
	}
	if err == nil {
		err = iw.Close()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("%w: dir sink write: %v", flightline.ErrUnavailable, err)
	}
	return f.Name(), nil
}

func ptr[T any](v T) *T { return &v }

// hasDictionary reports whether any of fields, or a field nested in one,
// is dictionary-encoded.
func hasDictionary(fields []arrow.Field) bool {
	for _, f := range fields {
		if f.Type.ID() == arrow.DICTIONARY {
			return true
		}
		if n, ok := f.Type.(arrow.NestedType); ok && hasDictionary(n.Fields()) {
			return true
		}
	}
	return false
}

func (w *dirWriter) Close(context.Context) error { return nil }
