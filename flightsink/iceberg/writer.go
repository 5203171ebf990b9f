package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
)

// errRefused marks a commit the catalog refused because the branch head
// moved (or the table changed under it): nothing of it landed.
var errRefused = errors.New("iceberg sink: commit refused, the table moved")

// writer is the Writer of one pipeline at one claim.
type writer struct {
	s     *Sink
	p     flightsink.Pipeline
	ident table.Identifier
	id    string // writer id in the pipeline's state: our commits carry it
	key   string // summary key of the pipeline's state

	mu     sync.Mutex
	tbl    *table.Table // as of our last commit or read
	st     state        // our state as of tbl
	last   []byte       // the pipeline's checkpoint as of tbl
	closed bool
	// fenced is the ErrFenced this writer got: fencing is permanent.
	fenced error
	// expired is when this writer last expired snapshots.
	expired time.Time
}

// WriteBatch implements flightsink.Writer.
func (w *writer) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := flightsink.CheckBatch(rec, cp); err != nil {
		return err
	}
	return w.write(ctx, []flightsink.Batch{{Rec: rec, CP: cp}})
}

// WriteBatches implements flightsink.GroupWriter: one snapshot holding the
// data files of every new batch of the group and the group's checkpoint
// (flightsink.Fold) in the pipeline's state.
func (w *writer) WriteBatches(ctx context.Context, batches []flightsink.Batch) error {
	if err := flightsink.CheckGroup(batches); err != nil {
		return err
	}
	return w.write(ctx, batches)
}

func (w *writer) fence(cur *state) error {
	epoch := int64(0)
	if cur != nil {
		epoch = cur.Epoch
	}
	w.s.o.log.Warn("iceberg sink: fenced writer refused", "pipeline", w.p.ID, "epoch", w.st.Epoch, "new_epoch", epoch)
	return fmt.Errorf("%w: pipeline %q was claimed by another writer (epoch %d, ours %d)", flightline.ErrFenced, w.p.ID, epoch, w.st.Epoch)
}

func (w *writer) write(ctx context.Context, batches []flightsink.Batch) (err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
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
		// Fencing wins over replay: read the newest state first.
		tbl, err := w.s.load(ctx, w.ident)
		if err != nil {
			return err
		}
		if cur, err := readState(states(tbl), w.p.ID); err != nil {
			return err
		} else if cur == nil || cur.Writer != w.id {
			return w.fence(cur)
		}
		return nil
	}
	var cp []byte
	var recs []arrow.RecordBatch
	for i, b := range batches {
		if fresh[i] {
			cp = checkpoint.Next(cp, b.CP)
			if b.Rec.NumRows() > 0 {
				recs = append(recs, b.Rec)
			}
		}
	}
	// Schema problems are found before any I/O, against the table as this
	// writer last saw it; every attempt checks again.
	if _, err := plan(w.tbl.Schema(), recs, w.s.o.evolve); err != nil {
		return err
	}
	var files *written
	tbl := w.tbl
	for attempt := 0; ; attempt++ {
		all := states(tbl)
		cur, err := readState(all, w.p.ID)
		if err != nil {
			return err
		}
		if cur == nil || cur.Writer != w.id {
			return w.fence(cur)
		}
		w.tbl, w.st, w.last = tbl, *cur, cur.cp()
		if attempt > 0 && checkpoint.Replayed(w.last, cp) {
			return nil
		}
		next := w.st
		next.Seq++
		next.setCP(checkpoint.Next(w.st.cp(), cp))
		committed, err := w.commit(ctx, tbl, all, next, recs, &files)
		if err == nil {
			w.tbl, w.st, w.last = committed, next, next.cp()
			w.maybeExpire(ctx)
			return nil
		}
		if !errors.Is(err, errRefused) {
			return err
		}
		if attempt+1 >= w.s.o.attempts {
			return fmt.Errorf("iceberg sink: table %s: gave up after %d refused commits: %w", strings.Join(w.ident, "."), attempt+1, flightline.ErrConflict)
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
		if tbl, err = w.s.load(ctx, w.ident); err != nil {
			return err
		} else if tbl == nil {
			return fmt.Errorf("%w: iceberg sink: table %s was dropped", flightline.ErrFailedPrecondition, strings.Join(w.ident, "."))
		}
	}
}

// written is the data files of a commit, written for one table schema:
// a retry on a table whose schema is the same commits them again.
type written struct {
	schema *iceberg.Schema
	files  []iceberg.DataFile
}

// commit commits one snapshot on tbl's main branch asserting that the
// branch still points where tbl says: the data files of recs (written
// once into *files and reused while the schema stays the same), the
// schema update they need, and the summary all with st as the
// pipeline's state. A refusal by the catalog wraps errRefused.
func (w *writer) commit(ctx context.Context, tbl *table.Table, all map[string]string, st state, recs []arrow.RecordBatch, files **written) (*table.Table, error) {
	name := strings.Join(w.ident, ".")
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return nil, fmt.Errorf("iceberg sink: table %s: %w", name, err)
	}
	props := iceberg.Properties{}
	maps.Copy(props, all)
	b, _ := json.Marshal(st)
	props[w.key] = string(b)
	props[MarkerKey] = "1"
	var dfs []iceberg.DataFile
	if len(recs) > 0 {
		adds, err := plan(tbl.Schema(), recs, w.s.o.evolve)
		if err != nil {
			return nil, err
		}
		if len(adds) > 0 {
			us := tx.UpdateSchema(true, tbl.Schema().NumFields() == 0)
			for _, f := range adds {
				us.AddColumn([]string{f.Name}, f.Type, "", f.Required, nil)
			}
			if err := us.Commit(); err != nil {
				return nil, fmt.Errorf("%w: iceberg sink: table %s: add columns: %v", flightline.ErrSchemaMismatch, name, err)
			}
			if tbl.Schema().NumFields() == 0 && len(w.s.o.part) > 0 && tbl.Metadata().PartitionSpec().IsUnpartitioned() {
				ups := tx.UpdateSpec(true)
				for _, f := range w.s.o.part {
					ups.AddField(f.col, f.transform, "")
				}
				if err := ups.Commit(); err != nil {
					return nil, fmt.Errorf("%w: iceberg sink: table %s: partition spec: %v", flightline.ErrInvalidInput, name, err)
				}
			}
		}
		staged, err := tx.StagedTable()
		if err != nil {
			return nil, fmt.Errorf("iceberg sink: table %s: %w", name, err)
		}
		if *files == nil || !(*files).schema.Equals(staged.Schema()) {
			fs, err := writeFiles(ctx, w.s.o.mem, staged.Table, recs)
			if err != nil {
				return nil, fmt.Errorf("iceberg sink: table %s: write data files: %w", name, err)
			}
			*files = &written{schema: staged.Schema(), files: fs}
		}
		dfs = (*files).files
	}
	var err error
	if len(dfs) == 0 {
		err = tx.AddFiles(ctx, nil, props, true)
	} else {
		err = tx.AddDataFiles(ctx, dfs, props, table.WithoutDuplicateCheck())
	}
	if err != nil {
		return nil, fmt.Errorf("iceberg sink: table %s: stage append: %w", name, err)
	}
	next, err := tx.Commit(ctx)
	switch {
	case err == nil:
		return next, nil
	case errors.Is(err, table.ErrCommitFailed) || strings.Contains(err.Error(), "requirement failed"):
		w.s.o.log.Debug("iceberg sink: commit refused", "table", name, "pipeline", w.p.ID, "err", err)
		return nil, fmt.Errorf("%w: %w", errRefused, err)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return nil, err
	default:
		return nil, fmt.Errorf("%w: iceberg sink: table %s: commit (outcome unknown; reopen to read the truth): %w", flightline.ErrUnavailable, name, err)
	}
}

// writeFiles writes recs as Parquet data files of tbl (its current
// schema gives the field ids).
func writeFiles(ctx context.Context, mem memory.Allocator, tbl *table.Table, recs []arrow.RecordBatch) ([]iceberg.DataFile, error) {
	var out []iceberg.DataFile
	for _, rec := range recs {
		fs, err := writeFile(ctx, mem, tbl, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}

func writeFile(ctx context.Context, mem memory.Allocator, tbl *table.Table, rec arrow.RecordBatch) ([]iceberg.DataFile, error) {
	rec, err := storable(ctx, mem, rec)
	if err != nil {
		return nil, err
	}
	consumed := false
	defer func() {
		if !consumed {
			rec.Release()
		}
	}()
	if df, err := writeParquetw(ctx, mem, tbl, rec); !errors.Is(err, errSlowPath) {
		if err != nil {
			return nil, err
		}
		return []iceberg.DataFile{df}, nil
	}
	one := func(yield func(arrow.RecordBatch, error) bool) {
		consumed = true
		yield(rec, nil) // WriteRecords releases what it consumes
	}
	var out []iceberg.DataFile
	for df, err := range table.WriteRecords(ctx, tbl, rec.Schema(), iter.Seq2[arrow.RecordBatch, error](one)) {
		if err != nil {
			return nil, err
		}
		out = append(out, df)
	}
	return out, nil
}

// maybeExpire expires the table's old snapshots (ExpireSnapshotsOlderThan)
// when it is due and w.tbl's current snapshot is ours (it carries every
// pipeline's state). It asserts the branch head like a commit; a refusal
// or an error is logged and left for the next time.
func (w *writer) maybeExpire(ctx context.Context) {
	if w.s.o.expire <= 0 || time.Since(w.expired) < w.s.o.expireEvery {
		return
	}
	w.expired = time.Now()
	cur := w.tbl.CurrentSnapshot()
	if cur == nil || cur.Summary == nil || cur.Summary.Properties[MarkerKey] == "" || len(w.tbl.Metadata().Snapshots()) < 2 {
		return
	}
	tx := w.tbl.NewTransaction()
	err := tx.AssertRefSnapshotID(table.MainBranch)
	if err == nil {
		err = tx.ExpireSnapshots(table.WithOlderThan(w.s.o.expire), table.WithRetainLast(1))
	}
	var next *table.Table
	if err == nil {
		next, err = tx.Commit(ctx)
	}
	if err != nil {
		w.s.o.log.Warn("iceberg sink: snapshot expiry failed (the next one retries)", "table", strings.Join(w.ident, "."), "err", err)
		return
	}
	if next != nil {
		w.tbl = next
	}
	w.s.o.log.Debug("iceberg sink: snapshots expired", "table", strings.Join(w.ident, "."), "snapshots", len(w.tbl.Metadata().Snapshots()))
}

// Close implements flightsink.Writer. It commits nothing.
func (w *writer) Close(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return nil
}

var _ flightsink.GroupWriter = (*writer)(nil)
