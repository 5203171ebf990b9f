package delta

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/flightline/flightline/internal/deltalog"
)

// maxCompactionAttempts bounds the commit attempts of one background
// compaction: each is made only after the writer's snapshot moved on.
const maxCompactionAttempts = 10

// maxCompactionAge is how long after writing its file a background
// compaction may still commit it: far below any sane deleted-file
// retention, so a cleanup never deletes a file a late commit then adds.
const maxCompactionAge = 10 * time.Minute

// compactRetryAfter is how long after a failed rewrite (an unreadable
// input, a store error) the writer starts no compaction.
const compactRetryAfter = time.Minute

// background is a writer's compactor and cleaner. The writer's mutex
// serialises the writer's commits with the compactor's: the compactor
// reads and rewrites files without it, then, holding it between two
// batches, commits once on top of the writer's snapshot (put-if-absent of
// the next version). It never updates the snapshot from the log (which
// would hide a newer claim from the writer's conflict check): when it
// loses a version it waits for the writer's next commit and tries again
// on top of it, and yields when an input is gone or after
// maxCompactionAttempts. An append never waits on a rewrite and never
// retries because of a compaction of its own process.
type background struct {
	mu         sync.Mutex // held by write and by a compaction's commit
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	compacting bool          // guarded by mu
	kick       chan struct{} // the writer committed: the snapshot moved
	failedAt   time.Time     // last failed rewrite; guarded by mu
	vacuuming  bool          // guarded by mu
	lastVacuum time.Time     // guarded by mu
	// scanFloor: a streamed snapshot's planning found fewer small files
	// than SmallFiles counted; plan again only once it counts this many
	// (0 after a checkpoint recounted them). Guarded by mu.
	scanFloor int64
}

func (b *background) init() {
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.kick = make(chan struct{}, 1)
	b.lastVacuum = time.Now()
}

// stop cancels the background work and waits for it. The caller must not
// hold mu.
func (b *background) stop() {
	if b.cancel != nil {
		b.cancel()
	}
	b.wg.Wait()
}

// afterCommit runs after each commit of the writer, with mu held: it
// wakes a compaction waiting for a newer snapshot, starts one when enough
// small files gathered, and checkpoints when the version calls for one.
func (w *writer) afterCommit() {
	select {
	case w.bg.kick <- struct{}{}:
	default:
	}
	if !w.s.o.compact || w.bg.compacting || w.closed || w.fenced != nil || w.snap.Version < 0 ||
		time.Since(w.bg.failedAt) < compactRetryAfter {
		return
	}
	if w.snap.CheckWrite() != nil {
		return
	}
	if w.snap.Streamed() {
		// The checkpoint's files are in the store: plan beside the
		// writer, on a copy of the snapshot (the commits since the
		// checkpoint), tracking the removals from now on.
		if n := w.snap.SmallFiles(); n < int64(max(w.s.o.minFiles, 2)) || n < w.bg.scanFloor {
			return
		}
		view := w.snap.Clone()
		w.snap.Track()
		w.bg.compacting = true
		w.bg.wg.Add(1)
		go w.planAndCompact(view)
		return
	}
	inputs := planCompaction(w.snap, w.s.o.target, w.s.o.minFiles, nil)
	if inputs == nil {
		return
	}
	w.snap.Track()
	w.bg.compacting = true
	w.bg.wg.Add(1)
	go w.compact(inputs)
}

// endCompaction marks the compaction done; mu held.
func (w *writer) endCompaction() {
	w.bg.compacting = false
	w.snap.Untrack()
}

// planAndCompact plans a compaction of view (a streamed snapshot's Clone)
// and runs it.
func (w *writer) planAndCompact(view *deltalog.Snapshot) {
	defer w.bg.wg.Done()
	defer w.recoverCompaction()
	inputs, found, err := planStreamed(w.bg.ctx, w.t, view, w.s.o.target, w.s.o.minFiles)
	if err != nil || inputs == nil {
		w.bg.mu.Lock()
		if err != nil {
			if w.bg.ctx.Err() == nil {
				w.log.Warn("delta sink: compaction planning failed; retrying in a minute", "table", w.t.URL(), "err", err)
			}
			w.bg.failedAt = time.Now()
		} else {
			w.bg.scanFloor = view.SmallFiles() + int64(max(w.s.o.minFiles, 2)-found)
		}
		w.endCompaction()
		w.bg.mu.Unlock()
		return
	}
	w.runCompaction(inputs)
}

func (w *writer) compact(inputs []*deltalog.Add) {
	defer w.bg.wg.Done()
	defer w.recoverCompaction()
	w.runCompaction(inputs)
}

// recoverCompaction ends a compaction that panicked (deferred).
func (w *writer) recoverCompaction() {
	if p := recover(); p != nil {
		w.log.Error("delta sink: compaction panicked", "table", w.t.URL(), "panic", fmt.Sprint(p))
		w.bg.mu.Lock()
		w.endCompaction()
		w.bg.mu.Unlock()
	}
}

// runCompaction rewrites inputs and commits the result.
func (w *writer) runCompaction(inputs []*deltalog.Add) {
	ctx := w.bg.ctx
	start := time.Now()
	r, err := rewrite(ctx, w.t.Store(), w.s.o.mem, inputs)
	if err != nil || r == nil {
		w.bg.mu.Lock()
		if err != nil && ctx.Err() == nil {
			w.log.Warn("delta sink: compaction failed; retrying in a minute", "table", w.t.URL(), "err", err)
			w.bg.failedAt = time.Now()
		}
		w.endCompaction()
		w.bg.mu.Unlock()
		return
	}
	w.commitCompaction(ctx, r, start)
}

// commitCompaction commits the compaction r (written at start) on top of
// the writer's snapshot, holding bg.mu for each attempt, and clears
// bg.compacting when it is done. It yields (commits nothing) when the
// writer closed or was fenced, when a commit of the snapshot removed an
// input (an append's never does; a merge's does when the input held one
// of its keys: committing then would bring the merged rows' old versions
// back), or when the file is older than maxCompactionAge. It reports
// whether it committed.
func (w *writer) commitCompaction(ctx context.Context, r *rewritten, start time.Time) bool {
	done := func() {
		w.bg.mu.Lock()
		w.endCompaction()
		w.bg.mu.Unlock()
	}
	tried := int64(-2)
	for attempt := 0; attempt < maxCompactionAttempts; {
		w.bg.mu.Lock()
		if w.closed || w.fenced != nil || ctx.Err() != nil || !inputsLive(w.snap, r.inputs) || time.Since(start) > maxCompactionAge {
			w.endCompaction()
			w.bg.mu.Unlock()
			w.log.Debug("delta sink: compaction yielded", "table", w.t.URL(), "file", r.add.Path)
			return false
		}
		if w.snap.Version == tried {
			w.bg.mu.Unlock()
			select {
			case <-w.bg.kick:
			case <-ctx.Done():
			}
			continue
		}
		v := w.snap.Version + 1
		acts := compactionActions(r, w.s.o.target, true, time.Now())
		err := w.t.Commit(ctx, v, acts)
		if err == nil {
			err = w.snap.Apply(v, acts)
			w.endCompaction()
			w.bg.scanFloor = 0
			if err == nil {
				w.noteRanges(acts)
				w.maybeCheckpoint()
			}
			w.bg.mu.Unlock()
			w.log.Debug("delta sink: compacted", "table", w.t.URL(), "version", v, "files", len(r.inputs), "bytes", r.add.Size,
				"rows", r.rows, "took", time.Since(start))
			return err == nil
		}
		tried = w.snap.Version
		attempt++
		if !errors.Is(err, deltalog.ErrVersionExists) {
			// Outcome unknown: if it landed, the writer's next commit
			// finds it in the log like any other commit.
			w.endCompaction()
			w.bg.mu.Unlock()
			w.log.Warn("delta sink: compaction commit failed", "table", w.t.URL(), "version", v, "err", err)
			return false
		}
		w.bg.mu.Unlock()
	}
	done()
	return false
}

// maybeVacuum starts a background cleanup when one is due; mu held.
func (w *writer) maybeVacuum() {
	if !w.s.o.vacuum || w.bg.vacuuming || w.closed || time.Since(w.bg.lastVacuum) < w.s.o.vacuumEvery {
		return
	}
	w.bg.vacuuming, w.bg.lastVacuum = true, time.Now()
	w.bg.wg.Add(1)
	go func() {
		defer w.bg.wg.Done()
		defer func() {
			if p := recover(); p != nil {
				w.log.Error("delta sink: cleanup panicked", "table", w.t.URL(), "panic", fmt.Sprint(p))
			}
			w.bg.mu.Lock()
			w.bg.vacuuming = false
			w.bg.mu.Unlock()
		}()
		res, err := vacuumTable(w.bg.ctx, w.t, time.Now(), w.s.o.logRet, w.s.o.fileRet, false)
		if err != nil {
			if w.bg.ctx.Err() == nil {
				w.log.Warn("delta sink: cleanup failed", "table", w.t.URL(), "err", err)
			}
			return
		}
		w.log.Debug("delta sink: cleaned up", "table", w.t.URL(), "oldest_version", res.Oldest, "log_files", len(res.LogFiles),
			"data_files", len(res.DataFiles), "note", res.Note)
	}()
}
