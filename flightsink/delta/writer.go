package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/parquetw"
)

// writer is the Writer of one pipeline instance at one claim.
type writer struct {
	s      *Sink
	p      flightsink.Pipeline
	t      *deltalog.Table
	domain string
	id     string // writer id recorded in the domain: our commits carry it
	st     state  // the domain state as of snap (ours)
	snap   *deltalog.Snapshot
	last   []byte // the pipeline's merged checkpoint as of snap
	// base is the merged checkpoint at the claim as Positions (nil when
	// empty or opaque): the positions no other instance may have moved
	// under a batch of this writer (see moved).
	base   checkpoint.Positions
	log    *slog.Logger
	closed bool
	// fenced is the ErrFenced this writer got: fencing is permanent, and
	// once the snapshot has moved past the newer claim nothing else would
	// tell a later replay that it comes from a fenced writer.
	fenced error
	bg     background
	// synced is when w.snap was last known to be the log's head or close
	// behind it (see checkStale).
	synced time.Time
	// view is w.snap's version and schema for Stage, which runs beside
	// the commits and so cannot read w.snap.
	view atomic.Pointer[view]
	// ranges are the key ranges of the live files of a merge-mode
	// writer, read from their stats once (see keyRanges); rangesFrom is
	// the checkpoint version whose stats they hold. Guarded by bg.mu.
	ranges     map[string]*keyRange
	rangesFrom int64
}

// staleAfter is how long a writer trusts its snapshot without a commit of
// its own or a read of the log: a cleanup deletes only commits older than
// the log retention (30 days by default), so a snapshot younger than that
// cannot be behind a deleted commit.
const staleAfter = time.Hour

// checkStale refuses to commit on top of a snapshot that a log cleanup
// may have overtaken: a put-if-absent of a deleted version's file would
// succeed and the commit be invisible behind the newer checkpoint. After
// staleAfter without a commit it reads _last_checkpoint; a checkpoint past
// the snapshot means re-open (ErrConflict).
func (w *writer) checkStale(ctx context.Context) error {
	if w.snap.Version < 0 || time.Since(w.synced) < staleAfter {
		return nil
	}
	v, err := w.t.LastCheckpointVersion(ctx)
	if err != nil {
		return fmt.Errorf("delta sink %s: %w", w.t.URL(), asUnavailable(err))
	}
	if v > w.snap.Version {
		return fmt.Errorf("%w: table %s has a checkpoint at version %d, past this writer's version %d (idle since %s); re-open",
			flightline.ErrConflict, w.t.URL(), v, w.snap.Version, w.synced.Format(time.RFC3339))
	}
	w.synced = time.Now()
	return nil
}

func (w *writer) domainAction() *deltalog.DomainMetadata {
	b, _ := json.Marshal(w.st)
	return &deltalog.DomainMetadata{Domain: w.domain, Configuration: string(b)}
}

// commitInfo is the commitInfo of a WRITE (adds: the data files of the
// commit, none for empty batches) or, with write false, of a claim. Like
// Spark's, its operationParameters and operationMetrics are string maps
// (Spark reads them as such in DESCRIBE HISTORY): a WRITE has numFiles,
// numOutputRows and numOutputBytes; a claim changes no data and has none.
func (w *writer) commitInfo(write bool, st state, cp []byte, adds []*deltalog.Add, rows int64) map[string]any {
	fl := map[string]any{"pipeline_id": w.p.ID, "instance": st.Instance, "epoch": st.Epoch, "seq": st.Seq}
	if cp != nil {
		fl["checkpoint"] = map[string]string{w.p.ID: string(cp)}
	}
	op, params, metrics := "FLIGHTLINE CLAIM", map[string]string{}, map[string]string{}
	if write {
		op, params = "WRITE", map[string]string{"mode": "Append", "partitionBy": "[]"}
		size := int64(0)
		for _, a := range adds {
			size += a.Size
		}
		metrics = map[string]string{"numFiles": strconv.Itoa(len(adds)), "numOutputRows": strconv.FormatInt(rows, 10),
			"numOutputBytes": strconv.FormatInt(size, 10)}
	}
	return map[string]any{
		"timestamp":           time.Now().UnixMilli(),
		"operation":           op,
		"operationParameters": params,
		"operationMetrics":    metrics,
		"isolationLevel":      "Serializable",
		"engineInfo":          "flightline",
		"clientVersion":       "flightline",
		"isBlindAppend":       write,
		"txnId":               uuid(),
		"flightline":          fl,
	}
}

// WriteBatch implements flightsink.Writer: one Delta commit holding the
// batch's data file (if any rows), the instance's domain with the new
// checkpoint, txn actions and commitInfo. See the package documentation
// for the conflict handling.
func (w *writer) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := flightsink.CheckBatch(rec, cp); err != nil {
		return err
	}
	return w.write(ctx, []flightsink.Batch{{Rec: rec, CP: cp}}, nil)
}

// WriteBatches implements flightsink.GroupWriter: one Delta commit holding
// a data file per new batch of the group that has rows, and the group's
// checkpoint (flightsink.Fold) in the instance's domain and txn actions.
func (w *writer) WriteBatches(ctx context.Context, batches []flightsink.Batch) error {
	if err := flightsink.CheckGroup(batches); err != nil {
		return err
	}
	return w.write(ctx, batches, nil)
}

// staged is a new batch of a commit: its storable form and Delta schema,
// and its data file's add action when Stage wrote it.
type staged struct {
	rec    arrow.RecordBatch
	schema *deltalog.Schema
	add    *deltalog.Add
}

// write commits batches; pre[i] (pre may be nil) is what Stage wrote for
// batches[i], nil when nothing. It owns pre: a file no commit attempt
// names is deleted, one an attempt named is left (the commit may have
// landed; the cleanup removes it if not).
func (w *writer) write(ctx context.Context, batches []flightsink.Batch, pre []flightsink.Staged) (err error) {
	attempted := false
	defer func() {
		for _, s := range pre {
			if f, ok := s.(*stagedFile); ok && f != nil && (!f.used || !attempted) {
				f.Discard(context.WithoutCancel(ctx))
			} else if ok && f != nil {
				f.release()
			}
		}
	}()
	w.bg.mu.Lock()
	defer w.bg.mu.Unlock()
	if w.closed {
		return fmt.Errorf("%w: writer of %q is closed", flightline.ErrInvalidInput, w.p.ID)
	}
	if w.fenced != nil {
		return w.fenced
	}
	defer func() {
		if errors.Is(err, flightline.ErrFenced) {
			w.fenced = err
		}
	}()
	fresh, _, n := flightsink.Fold(w.last, batches)
	if n == 0 {
		// Fencing wins over replay: look for a newer claim first.
		if err := w.checkClaims(ctx); err != nil {
			return err
		}
		_, err := w.reconcile(ctx, batches[len(batches)-1].CP)
		return err
	}
	// cp is what this commit adds: the fold of its new batches'
	// checkpoints (their per-key maximum, or the last opaque one).
	var cp []byte
	for i, b := range batches {
		if fresh[i] {
			cp = checkpoint.Next(cp, b.CP)
		}
	}
	// A partition another instance moved is refused before any data file
	// is written (as far as this writer's snapshot tells; every commit
	// attempt checks again).
	if done, err := w.admit(ctx, cp); err != nil || done {
		return err
	}
	if w.s.o.merge {
		return w.merge(ctx, batches, fresh, cp)
	}
	var stage []staged
	defer func() {
		for _, st := range stage {
			st.rec.Release()
		}
	}()
	for i, b := range batches {
		if !fresh[i] {
			continue
		}
		if i < len(pre) {
			if f, ok := pre[i].(*stagedFile); ok && f != nil {
				f.used = true
				f.rec.Retain()
				stage = append(stage, staged{rec: f.rec, schema: f.schema, add: f.add})
				if _, err := w.schemaFor(w.snap, f.schema, f.rec); err != nil {
					return err
				}
				continue
			}
		}
		rec := parquetw.Storable(w.s.o.mem, b.Rec, parquetw.StoredSchema(b.Rec.Schema()))
		stage = append(stage, staged{rec: rec})
		schema, err := deltalog.FromArrowSchema(rec.Schema())
		if err != nil {
			return err
		}
		if _, err := w.schemaFor(w.snap, schema, rec); err != nil {
			return err
		}
		stage[len(stage)-1].schema = schema
	}
	var adds []*deltalog.Add
	var rows int64
	for _, st := range stage {
		rec := st.rec
		rows += rec.NumRows()
		if rec.NumRows() == 0 {
			continue
		}
		if st.add != nil {
			adds = append(adds, st.add)
			continue
		}
		add, err := w.writeFile(ctx, rec)
		if err != nil {
			return err
		}
		adds = append(adds, add)
	}
	if err := w.checkStale(ctx); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		if err := w.checkClaims(ctx); err != nil {
			return err
		}
		// The commit lands only on top of w.snap's version, so a partition
		// no other instance moved as of w.snap is still unmoved when it
		// lands; after a lost race w.snap is the newer version.
		if done, err := w.admit(ctx, cp); err != nil || done {
			return err
		}
		next := w.nextState(cp)
		acts, err := w.actions(w.snap, next, stage, adds, rows, cp)
		if err != nil {
			return err
		}
		v := w.snap.Version + 1
		attempted = true
		err = w.t.Commit(ctx, v, acts)
		if err == nil {
			if err := w.snap.Apply(v, acts); err != nil {
				return err
			}
			w.publishView()
			w.committed(next)
			w.synced = time.Now()
			w.afterCommit()
			return nil
		}
		if done, err := w.lostRace(ctx, err, v, cp, attempt); err != nil || done {
			return err
		}
	}
}

// writeFile encodes rec (in its storable form, with rows) as a Parquet
// data file and writes it under a fresh name; it returns the file's add
// action. Nothing references the file until a commit does.
func (w *writer) writeFile(ctx context.Context, rec arrow.RecordBatch) (*deltalog.Add, error) {
	data, pst, err := parquetw.Bytes(rec, append([]parquetw.Option{parquetw.Allocator(w.s.o.mem)}, w.s.o.pqOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", flightline.ErrInvalidInput, err)
	}
	path := fmt.Sprintf("part-00000-%s-c000.snappy.parquet", uuid())
	if err := w.t.Store().Put(ctx, path, data); err != nil {
		return nil, fmt.Errorf("delta sink %s: write data file: %w", w.t.URL(), err)
	}
	return &deltalog.Add{Path: path, PartitionValues: deltalog.NullStrMap{}, Size: int64(len(data)),
		ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: deltalog.StatsJSON(pst)}, nil
}

// view is what Stage checks a batch's schema against: the table's
// version and schema as of the writer's last commit or Open.
type view struct {
	version int64
	schema  *deltalog.Schema
}

// publishView records w.snap's version and schema for Stage; bg.mu held.
func (w *writer) publishView() {
	w.view.Store(&view{version: w.snap.Version, schema: w.snap.Schema})
}

// stagedFile is a batch's data file written by Stage, not committed.
type stagedFile struct {
	w      *writer
	rec    arrow.RecordBatch // the storable form
	schema *deltalog.Schema
	add    *deltalog.Add
	used   bool // named by a commit attempt
}

// Discard implements flightsink.Staged: it deletes the data file.
func (f *stagedFile) Discard(ctx context.Context) {
	if f.add != nil {
		if err := f.w.t.Store().Delete(ctx, f.add.Path); err != nil {
			f.w.log.Debug("delta sink: deleting an uncommitted data file failed; the cleanup will", "table", f.w.t.URL(), "file", f.add.Path, "err", err)
		}
	}
	f.release()
}

func (f *stagedFile) release() {
	if f.rec != nil {
		f.rec.Release()
		f.rec = nil
	}
}

// Stage implements flightsink.Stager: it writes the data file of b (when
// it has rows), after checking its schema against the table as of the
// writer's last commit; CommitStaged checks again. It takes no lock that
// a commit holds.
func (w *writer) Stage(ctx context.Context, b flightsink.Batch) (flightsink.Staged, error) {
	if err := flightsink.CheckBatch(b.Rec, b.CP); err != nil {
		return nil, err
	}
	if b.Rec.NumRows() == 0 || w.s.o.merge {
		// A merge's files depend on the table at its commit: see merge.go.
		return nil, nil
	}
	rec := parquetw.Storable(w.s.o.mem, b.Rec, parquetw.StoredSchema(b.Rec.Schema()))
	f := &stagedFile{w: w, rec: rec}
	schema, err := deltalog.FromArrowSchema(rec.Schema())
	if err != nil {
		f.release()
		return nil, err
	}
	f.schema = schema
	if v := w.view.Load(); v != nil {
		if _, err := w.schemaFor(&deltalog.Snapshot{Version: v.version, Schema: v.schema}, schema, rec); err != nil {
			f.release()
			return nil, err
		}
	}
	if f.add, err = w.writeFile(ctx, rec); err != nil {
		f.release()
		return nil, err
	}
	return f, nil
}

// CommitStaged implements flightsink.Stager: WriteBatches with the data
// files Stage wrote.
func (w *writer) CommitStaged(ctx context.Context, batches []flightsink.Batch, pre []flightsink.Staged) error {
	if err := flightsink.CheckGroup(batches); err != nil {
		for _, s := range pre {
			if s != nil {
				s.Discard(context.WithoutCancel(ctx))
			}
		}
		return err
	}
	return w.write(ctx, batches, pre)
}

// others returns the positions of the pipeline's other instances as of
// w.snap, merged (nil when none; opaque checkpoints are skipped: merged
// refuses them beside another instance's).
func (w *writer) others() checkpoint.Positions {
	prefix := domainPrefix(w.p.ID)
	var acc checkpoint.Positions
	for name := range w.snap.Domains {
		if name == w.domain || !strings.HasPrefix(name, prefix) {
			continue
		}
		st, err := readState(w.snap, name)
		if err != nil || st == nil {
			continue
		}
		if p, err := checkpoint.Parse(st.cp()); err == nil {
			acc = checkpoint.Merge(acc, p)
		}
	}
	return acc
}

// moved returns the ErrConflict of a batch committing cp that names a
// partition another instance moved past this writer's base (the merged
// checkpoint at its Open) as of w.snap, or nil. It is the check
// internal/sqlcheckpoint (Instances, Lease.moved) makes for the PostgreSQL
// sink, with the same decision (checkpoint.Moved): a zombie instance cut
// off from its consumer group, never re-claimed and so never fenced, whose
// partition the group gave to another instance; of the two writers of the
// partition, whichever commits second is refused and re-opens, so no
// record is written twice.
func (w *writer) moved(cp []byte) error {
	pos, err := checkpoint.Parse(cp)
	if err != nil {
		return nil // opaque: one instance only (merged refuses more)
	}
	k, at, was, ok := checkpoint.Moved(w.base, w.others(), pos)
	if !ok {
		return nil
	}
	return fmt.Errorf("%w: pipeline %q: partition %q was moved to %d by another instance since instance %q claimed it at %d; re-open and resume from the merged checkpoint",
		flightline.ErrConflict, w.p.ID, k, at, w.st.Instance, was)
}

// admit runs the moved check of a commit of cp against w.snap. It refuses
// only after reading the newest table version (reconcile): fencing wins
// (ErrFenced), then replay (done: the other instance's commits cover cp),
// then the moved partition (ErrConflict).
func (w *writer) admit(ctx context.Context, cp []byte) (done bool, err error) {
	if w.moved(cp) == nil {
		return false, nil
	}
	if done, err := w.reconcile(ctx, cp); err != nil || done {
		return done, err
	}
	if err := w.moved(cp); err != nil {
		// The error (which the coordinator logs) names the partition.
		w.log.Warn("delta sink: batch refused, a partition it names changed instance since this writer's Open; re-open", "pipeline", w.p.ID, "instance", w.st.Instance, "epoch", w.st.Epoch)
		return false, err
	}
	return false, nil
}

// nextState is the instance's state after committing cp: its checkpoint
// merged to the max with what it committed before (Positions), so a
// partition it stops reporting never moves backwards.
func (w *writer) nextState(cp []byte) state {
	next := w.st
	next.Seq++
	own := cp
	if prev := w.st.cp(); prev != nil {
		a, errA := checkpoint.Parse(prev)
		b, errB := checkpoint.Parse(cp)
		if errA == nil && errB == nil {
			own = checkpoint.Merge(a, b).Encode()
		}
	}
	next.setCP(own)
	return next
}

// asUnavailable marks an unclassified commit error retryable-unknown.
func asUnavailable(err error) error {
	if flightline.IsRetryable(err) && !errors.Is(err, flightline.ErrUnavailable) && !errors.Is(err, flightline.ErrConflict) {
		return fmt.Errorf("%w (outcome unknown; reopen to read the truth): %w", flightline.ErrUnavailable, err)
	}
	return err
}

// lostRace decides what follows a commit attempt of version v that
// failed with err: an error other than a lost race ends the commit
// (ErrUnavailable); after a lost race the newer versions are read
// (reconcile: done when they already hold cp, a replay), and the next
// attempt waits its backoff, or the writer gives up after its attempts
// (ErrConflict). Appends and merges share it.
func (w *writer) lostRace(ctx context.Context, err error, v int64, cp []byte, attempt int) (done bool, _ error) {
	if !errors.Is(err, deltalog.ErrVersionExists) {
		return false, fmt.Errorf("delta sink %s: commit version %d: %w", w.t.URL(), v, asUnavailable(err))
	}
	if done, err := w.reconcile(ctx, cp); err != nil || done {
		return done, err
	}
	if attempt+1 >= w.s.o.attempts {
		return false, fmt.Errorf("delta sink %s: gave up after %d conflicting commits: %w", w.t.URL(), attempt+1, flightline.ErrConflict)
	}
	return false, backoff(ctx, attempt)
}

// reconcile reads the commits that beat ours. A commit changing our domain
// with another writer id fences us; one with our own id is an earlier
// attempt of ours that did land (its outcome was unknown): if it covers cp
// the batch is committed. Protocol and metadata changes are re-checked by
// the next attempt.
func (w *writer) reconcile(ctx context.Context, cp []byte) (bool, error) {
	vers, err := w.snap.Update(ctx, w.t)
	if err != nil {
		return false, err
	}
	if err := w.snap.CheckWrite(); err != nil {
		return false, fmt.Errorf("delta sink %s: %w", w.t.URL(), err)
	}
	for _, acts := range vers {
		for _, a := range acts {
			if a.DomainMetadata == nil || a.DomainMetadata.Domain != w.domain {
				continue
			}
			var st state
			if err := json.Unmarshal([]byte(a.DomainMetadata.Configuration), &st); err == nil && st.Writer != w.id && st.Epoch < w.st.Epoch {
				// An older writer committed after this writer's claim: only
				// possible while the table did not exist. The checkpoint
				// this writer returned from Open is stale: re-open.
				return false, fmt.Errorf("%w: pipeline %q moved since it was opened (a commit of epoch %d landed after the claim of epoch %d); re-open and resume from its checkpoint",
					flightline.ErrConflict, w.p.ID, st.Epoch, w.st.Epoch)
			}
			if err != nil || st.Writer != w.id {
				w.log.Warn("delta sink: fenced writer refused", "pipeline", w.p.ID, "instance", w.st.Instance, "epoch", w.st.Epoch, "new_epoch", st.Epoch)
				return false, fmt.Errorf("%w: pipeline %q instance %q was claimed by another writer (epoch %d, ours %d)",
					flightline.ErrFenced, w.p.ID, w.st.Instance, st.Epoch, w.st.Epoch)
			}
			w.committed(st)
		}
	}
	// Other instances of the pipeline may have committed the positions of
	// this batch (after a rebalance): that is a replay too.
	if m, err := merged(w.snap, w.p.ID); err == nil {
		w.last = m
	}
	if checkpoint.Replayed(w.last, cp) {
		return true, nil
	}
	return false, nil
}

func (w *writer) committed(st state) {
	w.st = st
	if m, err := merged(w.snap, w.p.ID); err == nil {
		w.last = m
	} else {
		w.last = st.cp()
	}
	w.maybeCheckpoint()
}

// maybeCheckpoint writes the checkpoint of w.snap when its version is a
// multiple of the effective interval, and then starts a due cleanup.
func (w *writer) maybeCheckpoint() {
	if n := checkpointEvery(w.s.o.interval, w.snap.FileCount()); n > 0 && w.snap.Version > 0 && w.snap.Version%n == 0 {
		// A failed checkpoint costs readers time, not correctness.
		ctx := context.Background()
		if err := w.t.WriteCheckpoint(ctx, w.snap); err != nil {
			w.log.Warn("delta sink: checkpoint failed", "table", w.t.URL(), "version", w.snap.Version, "err", err)
			if w.snap.Streamed() && errors.Is(err, objstore.ErrNotExist) {
				// The checkpoint it was loaded from is gone (another
				// engine's cleanup): without it the snapshot can never
				// checkpoint again. Load the same version anew.
				if s, err := w.t.StreamedSnapshotAt(ctx, w.snap.Version, w.s.o.target/2); err == nil {
					w.snap = s
				}
			}
			return
		}
		w.bg.scanFloor = 0 // SmallFiles is exact again
		w.maybeVacuum()
	}
}

// checkpointEvery is the effective checkpoint interval of a table of files
// active files for the configured interval n (0: never); see
// CheckpointInterval.
func checkpointEvery(n int64, files int64) int64 {
	if n <= 0 {
		return 0
	}
	return n * max(1, files/(n*CheckpointFilesPerCommit))
}

// actions builds the commit of the staged batches against snap (rebuilt
// on every attempt: a concurrent writer may have created the table or
// changed its schema).
func (w *writer) actions(snap *deltalog.Snapshot, next state, stage []staged, adds []*deltalog.Add, rows int64, cp []byte) ([]deltalog.Action, error) {
	// Every batch is checked in order against the schema the batches
	// before it leave (a new table takes the first batch's; with
	// SchemaEvolution a later batch may add columns on top); the commit
	// leaves the last one. The view is a shallow copy read by schemaFor.
	var schema *deltalog.Schema
	cur := snap
	for i, st := range stage {
		sc, err := w.schemaFor(cur, st.schema, st.rec)
		if err != nil {
			return nil, err
		}
		schema = sc
		if i+1 < len(stage) && (cur.Version < 0 || sc != cur.Schema) {
			view := *cur
			view.Schema, view.Version = sc, max(view.Version, 0)
			cur = &view
		}
	}
	acts := []deltalog.Action{{CommitInfo: w.commitInfo(true, next, cp, adds, rows)}}
	now := time.Now().UnixMilli()
	// The metadata this commit leaves the table with: new, evolved or the
	// table's own. The protocol must support every feature it uses, and
	// domainMetadata (the instance state): widen it in this commit if not.
	var md *deltalog.Metadata
	switch {
	case snap.Version < 0:
		b, _ := json.Marshal(schema)
		md = &deltalog.Metadata{ID: uuid(), Format: deltalog.Format{Provider: "parquet", Options: deltalog.StrMap{}},
			SchemaString: string(b), PartitionColumns: []string{}, Configuration: deltalog.StrMap{}, CreatedTime: &now}
	case schema != snap.Schema: // evolved
		ev := *snap.Metadata
		b, _ := json.Marshal(schema)
		ev.SchemaString = string(b)
		md = &ev
	}
	proto, err := protocolFor(snap, md, schema)
	if err != nil {
		return nil, err
	}
	if proto != snap.Protocol {
		acts = append(acts, deltalog.Action{Protocol: proto})
	}
	if md != nil {
		acts = append(acts, deltalog.Action{MetaData: md})
	}
	for _, add := range adds {
		acts = append(acts, deltalog.Action{Add: add})
	}
	acts = append(acts, deltalog.Action{Txn: &deltalog.Txn{AppID: TxnAppID(w.p.ID, w.st.Instance), Version: next.Seq, LastUpdated: &now}})
	if pos, err := checkpoint.Parse(cp); err == nil {
		for _, k := range sortedKeys(pos) {
			acts = append(acts, deltalog.Action{Txn: &deltalog.Txn{AppID: w.p.ID + "/" + k, Version: pos[k], LastUpdated: &now}})
		}
	}
	b, _ := json.Marshal(next)
	acts = append(acts, deltalog.Action{DomainMetadata: &deltalog.DomainMetadata{Domain: w.domain, Configuration: string(b)}})
	return acts, nil
}

// protocolFor returns the protocol to commit with metadata md (nil: the
// table's, unchanged) whose schema is schema: snap's protocol (nil for a
// new table) widened by the features md uses and domainMetadata; snap's
// own protocol when nothing is missing. Widening repairs tables that older
// Flightline versions created without the invariants feature.
func protocolFor(snap *deltalog.Snapshot, md *deltalog.Metadata, schema *deltalog.Schema) (*deltalog.Protocol, error) {
	if md == nil {
		md, schema = snap.Metadata, snap.Schema
	}
	var p *deltalog.Protocol
	if snap.Version >= 0 {
		p = snap.Protocol
	}
	np, err := deltalog.ProtocolFor(p, md, schema, "domainMetadata")
	if err != nil {
		return nil, fmt.Errorf("delta sink: %w", err)
	}
	return np, nil
}

// schemaFor checks batch against the table schema of snap and returns the
// schema to commit with: the batch's for a new table, the table's, or the
// table's with the batch's new nullable columns appended (SchemaEvolution).
func (w *writer) schemaFor(snap *deltalog.Snapshot, batch *deltalog.Schema, rec arrow.RecordBatch) (*deltalog.Schema, error) {
	if snap.Version < 0 || snap.Schema == nil {
		return batch, nil
	}
	tbl := snap.Schema
	byName := make(map[string]int, len(tbl.Fields))
	for i, f := range tbl.Fields {
		byName[strings.ToLower(f.Name)] = i
	}
	var added []deltalog.StructField
	seen := make(map[int]bool, len(batch.Fields))
	for i, bf := range batch.Fields {
		j, ok := byName[strings.ToLower(bf.Name)]
		if !ok {
			if w.s.o.evolve && bf.Nullable {
				added = append(added, bf)
				continue
			}
			hint := ""
			if w.s.o.evolve {
				hint = " (schema evolution adds only nullable columns)"
			} else {
				hint = " (enable schema evolution to add it)"
			}
			return nil, fmt.Errorf("%w: table %s has no column %q (batch type %s)%s", flightline.ErrSchemaMismatch, w.t.URL(), bf.Name, bf.Type, hint)
		}
		seen[j] = true
		tf := tbl.Fields[j]
		if !deltalog.Assignable(tf.Type, bf.Type) {
			return nil, fmt.Errorf("%w: table %s: column %q has type %s, the batch has %s (Arrow %s)",
				flightline.ErrSchemaMismatch, w.t.URL(), tf.Name, tf.Type, bf.Type, rec.Schema().Field(i).Type)
		}
		if !tf.Nullable && rec.Column(i).NullN() > 0 {
			return nil, fmt.Errorf("%w: table %s: column %q is not nullable, the batch has %d nulls in it",
				flightline.ErrSchemaMismatch, w.t.URL(), tf.Name, rec.Column(i).NullN())
		}
	}
	for j, tf := range tbl.Fields {
		if !seen[j] && !tf.Nullable {
			return nil, fmt.Errorf("%w: table %s: non-nullable column %q (%s) is missing from the batch",
				flightline.ErrSchemaMismatch, w.t.URL(), tf.Name, tf.Type)
		}
	}
	if len(added) == 0 {
		return tbl, nil
	}
	ev := *tbl
	ev.Fields = append(append([]deltalog.StructField(nil), tbl.Fields...), added...)
	return &ev, nil
}

// Close implements flightsink.Writer. It commits nothing: it stops the
// background compaction and cleanup and waits for them (a rewritten file
// not yet committed stays unreferenced until a cleanup deletes it).
func (w *writer) Close(context.Context) error {
	w.bg.mu.Lock()
	w.closed = true
	w.bg.mu.Unlock()
	w.bg.stop()
	return nil
}

func uuid() string {
	h := nonce() + nonce()[:8]
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func sortedKeys(p checkpoint.Positions) []string { return slices.Sorted(maps.Keys(p)) }

// claimKey is the claim object of this writer's domain at epoch.
func (w *writer) claimKey(epoch int64) string {
	return claimsPrefix(w.domain) + fmt.Sprintf("%020d", epoch)
}

func claimsPrefix(domain string) string {
	return "_flightline/claims/" + url.QueryEscape(domain) + "/"
}

// claimedEpoch returns the highest epoch claimed for this writer's domain
// with claim objects, 0 when none.
func (w *writer) claimedEpoch(ctx context.Context) (int64, error) {
	keys, err := w.t.Store().List(ctx, claimsPrefix(w.domain), "")
	if err != nil {
		return 0, fmt.Errorf("delta sink %s: list claims: %w", w.t.URL(), err)
	}
	var top int64
	for _, k := range keys {
		if n, err := strconv.ParseInt(k[strings.LastIndex(k, "/")+1:], 10, 64); err == nil {
			top = max(top, n)
		}
	}
	return top, nil
}

// checkClaims fences this writer when a newer Open claimed the pipeline
// with a claim object. Claim objects are written only while the table does
// not exist, so only then is there anything to look at.
func (w *writer) checkClaims(ctx context.Context) error {
	if w.snap.Version >= 0 {
		return nil
	}
	top, err := w.claimedEpoch(ctx)
	if err != nil {
		return err
	}
	if top > w.st.Epoch {
		w.log.Warn("delta sink: fenced writer refused", "pipeline", w.p.ID, "instance", w.st.Instance, "epoch", w.st.Epoch, "new_epoch", top)
		return fmt.Errorf("%w: pipeline %q instance %q was claimed by a newer writer (epoch %d, ours %d)",
			flightline.ErrFenced, w.p.ID, w.st.Instance, top, w.st.Epoch)
	}
	return nil
}
