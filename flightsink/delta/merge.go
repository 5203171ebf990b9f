package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/changes"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/parquetw"
)

// The modes of Config.Mode.
const (
	// ModeAppend adds every row of a batch to the table (the default).
	ModeAppend = "append"
	// ModeMerge applies the rows of a batch as changes by Config.Key (see
	// the package documentation and internal/changes): the last change of
	// a key in the commit wins; a delete removes the key's row, any other
	// change replaces it.
	ModeMerge = "merge"
)

// A merge commit is a copy-on-write rewrite, the way Spark's and
// delta-rs's MERGE write without deletion vectors: every live file that
// may hold one of the commit's keys is read; a file that does hold one is
// rewritten without the rows of those keys (or dropped when none is
// left), and the commit removes it (dataChange true) and adds the rewrite
// and a file of the batch's new rows, beside the instance's domain and
// txn actions. Data and checkpoint land in one put-if-absent of the next
// log version, as an append's do.
//
// Deletion vectors would make a merge cheaper (no rewrite of the rows
// that stay) but need the deletionVectors table feature, which every
// reader of the table must support; this package's own log reader
// (internal/deltalog, also the delta source's) refuses it, so merge
// writes none.
//
// Staging: a merge commit's files depend on the table at the commit (the
// files live then), and the last change of a key depends on every batch
// of the commit's group, so nothing of a merge is written ahead: Stage
// stages nothing and the commit writes everything, holding the writer's
// lock (which also keeps the background compaction from committing in
// between; a compaction whose inputs a merge removed yields, as it does
// for any commit that removed them).

// mergeChanges is what a merge commit applies: per fresh batch of the
// commit, its rows that are the last change of their key and not deletes
// (stage, in the storable form), and every key the commit changes with
// the values of its key columns (for pruning by stats).
type mergeChanges struct {
	stage []staged
	keys  map[string]struct{}
	vals  [][]any // per changed key: per key column an int64, a string or nil (not comparable with stats)
	// deletes counts the keys whose last change is a delete.
	deletes int64
}

func (mc *mergeChanges) release() {
	for _, st := range mc.stage {
		st.rec.Release()
	}
	mc.stage = nil
}

// prepareMerge reads the fresh batches' changes (changes.Split, Check,
// KeyColumns, Keys): a bad _op or a null key wraps ErrInvalidInput, a
// missing key column ErrSchemaMismatch, before anything is written. The
// caller releases the result.
func (w *writer) prepareMerge(batches []flightsink.Batch, fresh []bool) (_ *mergeChanges, err error) {
	type one struct {
		rec  arrow.RecordBatch // storable data columns
		op   *array.String     // lives as long as the batch
		keys []string
		idx  []int
	}
	var ones []one
	defer func() {
		for _, o := range ones {
			o.rec.Release()
		}
	}()
	type at struct{ b, r int }
	last := map[string]at{}
	for i, b := range batches {
		if !fresh[i] {
			continue
		}
		data, op, err := changes.Split(b.Rec)
		if err != nil {
			return nil, err
		}
		rec := parquetw.Storable(w.s.o.mem, data, parquetw.StoredSchema(data.Schema()))
		data.Release()
		ones = append(ones, one{rec: rec, op: op})
		o := &ones[len(ones)-1]
		if err := changes.Check(op); err != nil {
			return nil, err
		}
		if o.idx, err = changes.KeyColumns(rec.Schema(), w.s.o.key); err != nil {
			return nil, err
		}
		if o.keys, err = changes.Keys(rec, o.idx); err != nil {
			return nil, err
		}
		for r, k := range o.keys {
			last[k] = at{len(ones) - 1, r}
		}
	}
	mc := &mergeChanges{keys: make(map[string]struct{}, len(last))}
	for k, a := range last {
		mc.keys[k] = struct{}{}
		o := ones[a.b]
		mc.vals = append(mc.vals, keyValues(o.rec, o.idx, a.r))
		if changes.IsDelete(o.op, a.r) {
			mc.deletes++
		}
	}
	for bi, o := range ones {
		var rows []int
		for r, k := range o.keys {
			if last[k] == (at{bi, r}) && !changes.IsDelete(o.op, r) {
				rows = append(rows, r)
			}
		}
		kept, err := takeRows(w.s.o.mem, o.rec, rows)
		if err != nil {
			mc.release()
			return nil, err
		}
		mc.stage = append(mc.stage, staged{rec: kept})
		schema, err := deltalog.FromArrowSchema(kept.Schema())
		if err != nil {
			mc.release()
			return nil, err
		}
		mc.stage[len(mc.stage)-1].schema = schema
	}
	return mc, nil
}

// keyValues returns row r's key values comparable with the stats of a
// file: an int64 for an integer column (uint64 excepted: its stats are
// signed), a string for a string column, nil for the others.
func keyValues(rec arrow.RecordBatch, idx []int, r int) []any {
	out := make([]any, len(idx))
	for j, c := range idx {
		switch a := rec.Column(c).(type) {
		case *array.Int8:
			out[j] = int64(a.Value(r))
		case *array.Int16:
			out[j] = int64(a.Value(r))
		case *array.Int32:
			out[j] = int64(a.Value(r))
		case *array.Int64:
			out[j] = a.Value(r)
		case *array.Uint8:
			out[j] = int64(a.Value(r))
		case *array.Uint16:
			out[j] = int64(a.Value(r))
		case *array.Uint32:
			out[j] = int64(a.Value(r))
		case *array.String:
			out[j] = strings.Clone(a.Value(r))
		case *array.LargeString:
			out[j] = strings.Clone(a.Value(r))
		}
	}
	return out
}

// takeRows returns the rows of rec at rows (ascending) as a new batch
// the caller releases (rec itself, retained, when rows are all of it).
func takeRows(mem memory.Allocator, rec arrow.RecordBatch, rows []int) (arrow.RecordBatch, error) {
	n := len(rows)
	if int64(n) == rec.NumRows() {
		rec.Retain()
		return rec, nil
	}
	var runs []arrow.RecordBatch
	defer func() {
		for _, r := range runs {
			r.Release()
		}
	}()
	for i := 0; i < n; {
		j := i + 1
		for j < n && rows[j] == rows[j-1]+1 {
			j++
		}
		runs = append(runs, rec.NewSlice(int64(rows[i]), int64(rows[j-1]+1)))
		i = j
	}
	switch len(runs) {
	case 0:
		return rec.NewSlice(0, 0), nil
	case 1:
		runs[0].Retain()
		return runs[0], nil
	}
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	parts := make([]arrow.Array, len(runs))
	for c := range cols {
		for i, r := range runs {
			parts[i] = r.Column(c)
		}
		a, err := array.Concatenate(parts, mem)
		if err != nil {
			return nil, fmt.Errorf("delta sink: merge: %w", err)
		}
		cols[c] = a
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(n)), nil
}

// keyRange is what a file's stats say of its key columns: per key column
// the minimum and maximum (int64 or string; nil: unknown).
type keyRange struct{ lo, hi []any }

// parseRange reads the key columns' bounds from an add action's stats
// (nil when it has none).
func parseRange(stats string, key []string) *keyRange {
	var st struct {
		Min map[string]json.RawMessage `json:"minValues"`
		Max map[string]json.RawMessage `json:"maxValues"`
	}
	if stats == "" || json.Unmarshal([]byte(stats), &st) != nil {
		return nil
	}
	kr := &keyRange{lo: make([]any, len(key)), hi: make([]any, len(key))}
	for j, k := range key {
		kr.lo[j], kr.hi[j] = statBound(st.Min[k]), statBound(st.Max[k])
	}
	return kr
}

func statBound(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return nil
	}
	switch v := v.(type) {
	case json.Number:
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return n
		}
	case string:
		return v
	}
	return nil
}

// mayHold reports whether a file of range kr may hold the key of values
// v: false only when the stats put some key column's value outside the
// file's bounds. A truncated string minimum is still a lower bound, and
// StatsJSON leaves out a maximum it would have to truncate.
func (kr *keyRange) mayHold(v []any) bool {
	if kr == nil {
		return true
	}
	for j, x := range v {
		switch x := x.(type) {
		case int64:
			if lo, ok := kr.lo[j].(int64); ok && x < lo {
				return false
			}
			if hi, ok := kr.hi[j].(int64); ok && x > hi {
				return false
			}
		case string:
			if lo, ok := kr.lo[j].(string); ok && x < lo {
				return false
			}
			if hi, ok := kr.hi[j].(string); ok && x > hi {
				return false
			}
		}
	}
	return true
}

// keyRanges returns the key ranges of w.snap's live files (a file
// missing from the map has no stats: it may hold any key). They are kept
// across commits: a file never changes, and a lean snapshot drops the
// stats of the files its checkpoints hold, so those are read back from
// the checkpoint once per checkpoint version. bg.mu held.
func (w *writer) keyRanges(ctx context.Context) (map[string]*keyRange, error) {
	if w.ranges == nil {
		w.ranges, w.rangesFrom = map[string]*keyRange{}, -1
	}
	for p := range w.ranges {
		if _, ok := w.snap.Files[p]; !ok {
			delete(w.ranges, p)
		}
	}
	missing := false
	for p, a := range w.snap.Files {
		if _, ok := w.ranges[p]; ok {
			continue
		}
		if kr := parseRange(a.Stats, w.s.o.key); kr != nil {
			w.ranges[p] = kr
			continue
		}
		missing = true
	}
	if missing && w.snap.CheckpointVersion >= 0 && w.snap.CheckpointVersion != w.rangesFrom {
		err := w.t.CheckpointStats(ctx, w.snap, func(path, stats string) {
			if _, live := w.snap.Files[path]; !live {
				return
			}
			if _, ok := w.ranges[path]; !ok {
				if kr := parseRange(stats, w.s.o.key); kr != nil {
					w.ranges[strings.Clone(path)] = kr
				}
			}
		})
		if err != nil {
			return nil, fmt.Errorf("delta sink %s: merge: %w", w.t.URL(), err)
		}
		w.rangesFrom = w.snap.CheckpointVersion
	}
	return w.ranges, nil
}

// noteRanges caches the key ranges of the files a commit of this writer
// added while their stats are still at hand: a checkpoint written right
// after the commit drops them from the lean snapshot, and reading them
// back costs a read of the whole checkpoint. bg.mu held; merge mode only.
func (w *writer) noteRanges(acts []deltalog.Action) {
	if !w.s.o.merge || w.ranges == nil {
		return
	}
	for _, a := range acts {
		if a.Add != nil {
			if kr := parseRange(a.Add.Stats, w.s.o.key); kr != nil {
				w.ranges[a.Add.Path] = kr
			}
		}
	}
}

// mergePlan is what a merge commit does to the files of w.snap: remove
// the touched files, add their rewrites (fewer when a file lost every
// row).
type mergePlan struct {
	removes []*deltalog.Add
	adds    []*deltalog.Add
	read    int   // files read (not pruned by stats)
	skipped int   // files pruned by stats
	dropped int64 // rows of the touched files left out
	copied  int64 // rows of the touched files rewritten
}

// discard deletes the rewrites of a plan no commit references.
func (p *mergePlan) discard(ctx context.Context, w *writer) {
	for _, a := range p.adds {
		if err := w.t.Store().Delete(ctx, filePath(a.Path)); err != nil {
			w.log.Debug("delta sink: deleting an uncommitted merge file failed; the cleanup will", "table", w.t.URL(), "file", a.Path, "err", err)
		}
	}
	p.adds = nil
}

// planMerge reads the live files of w.snap that may hold a key of mc
// (pruned by their stats) and rewrites each that does without those keys'
// rows. bg.mu held.
func (w *writer) planMerge(ctx context.Context, mc *mergeChanges) (*mergePlan, error) {
	p := &mergePlan{}
	if w.snap.Version < 0 || len(mc.keys) == 0 {
		return p, nil
	}
	ranges, err := w.keyRanges(ctx)
	if err != nil {
		return nil, err
	}
	for _, a := range w.snap.SortedFiles() {
		kr := ranges[a.Path]
		hit := false
		for _, v := range mc.vals {
			if kr.mayHold(v) {
				hit = true
				break
			}
		}
		if !hit {
			p.skipped++
			continue
		}
		p.read++
		add, copied, dropped, err := w.rewriteWithout(ctx, a, mc.keys)
		if err != nil {
			p.discard(context.WithoutCancel(ctx), w)
			return nil, err
		}
		if dropped == 0 {
			continue
		}
		p.removes = append(p.removes, a)
		if add != nil {
			p.adds = append(p.adds, add)
		}
		p.copied += copied
		p.dropped += dropped
	}
	return p, nil
}

// rewriteWithout reads data file in and, when it holds rows of keys,
// writes its other rows, in order, to a new file (none when no row is
// left) and returns that file's add (dataChange true), the rows copied
// and the rows left out. It reads the key columns first and the rest only
// when some row goes.
func (w *writer) rewriteWithout(ctx context.Context, in *deltalog.Add, keys map[string]struct{}) (*deltalog.Add, int64, int64, error) {
	if len(in.DeletionVector) > 0 {
		// Unreachable while CheckRead refuses the feature; reading the
		// file without its vector would bring deleted rows back.
		return nil, 0, 0, fmt.Errorf("%w: merge: file %s has a deletion vector", deltalog.ErrUnsupportedFeature, in.Path)
	}
	store, mem := w.t.Store(), w.s.o.mem
	b, err := store.Get(ctx, filePath(in.Path))
	if err != nil {
		return nil, 0, 0, fmt.Errorf("delta sink %s: merge: read %s: %w", w.t.URL(), in.Path, asUnavailable(err))
	}
	var drop []bool
	var dropped int64
	err = readFile(ctx, b, mem, w.s.o.key, func(rec arrow.RecordBatch) error {
		idx, err := changes.KeyColumns(rec.Schema(), w.s.o.key)
		if err != nil {
			return err
		}
		ks, err := changes.Keys(rec, idx)
		if err != nil {
			return err
		}
		for _, k := range ks {
			_, hit := keys[k]
			drop = append(drop, hit)
			if hit {
				dropped++
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("delta sink %s: merge: %s: %w", w.t.URL(), in.Path, err)
	}
	if dropped == 0 {
		return nil, 0, 0, nil
	}
	if dropped == int64(len(drop)) {
		return nil, 0, dropped, nil
	}
	path := fmt.Sprintf("part-00000-%s-c000.snappy.parquet", uuid())
	ow, err := objstore.NewWriter(ctx, store, path)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("delta sink %s: merge: write %s: %w", w.t.URL(), path, err)
	}
	defer ow.Abort() // after a Commit it does nothing
	var (
		buf = &objstore.Counting{W: ow}
		fw  *pqarrow.FileWriter
		st  parquetw.Stats
		off int
	)
	defer func() {
		if fw != nil {
			fw.Close()
		}
	}()
	err = readFile(ctx, b, mem, nil, func(rec arrow.RecordBatch) error {
		n := int(rec.NumRows())
		if off+n > len(drop) {
			return fmt.Errorf("%w: the file changed between two reads", flightline.ErrInvalidInput)
		}
		var rows []int
		for r := range n {
			if !drop[off+r] {
				rows = append(rows, r)
			}
		}
		off += n
		if len(rows) == 0 {
			return nil
		}
		kept, err := takeRows(mem, rec, rows)
		if err != nil {
			return err
		}
		defer kept.Release()
		if fw == nil {
			if fw, err = newCompactWriter(buf, mem, kept); err != nil {
				return err
			}
			fw.NewBufferedRowGroup()
		}
		if n, _ := fw.RowGroupNumRows(); n > 0 && (int64(n)+kept.NumRows() > compactRowGroupRows ||
			fw.RowGroupTotalCompressedBytes() >= compactRowGroupBytes) {
			fw.NewBufferedRowGroup()
		}
		if err := fw.WriteBuffered(kept); err != nil {
			return err
		}
		mergeStats(&st, parquetw.Compute(kept))
		return nil
	})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("delta sink %s: merge: rewrite %s: %w", w.t.URL(), in.Path, err)
	}
	err = fw.Close()
	fw = nil
	if err != nil {
		return nil, 0, 0, fmt.Errorf("delta sink %s: merge: write %s: %w", w.t.URL(), path, err)
	}
	if err := ow.Commit(ctx); err != nil {
		return nil, 0, 0, fmt.Errorf("delta sink %s: merge: write %s: %w", w.t.URL(), path, err)
	}
	return &deltalog.Add{Path: path, PartitionValues: in.PartitionValues, Size: buf.N,
		ModificationTime: time.Now().UnixMilli(), DataChange: true, Stats: deltalog.StatsJSON(st)}, st.NumRecords, dropped, nil
}

// readFile calls fn with each batch of the Parquet file b, reading only
// the columns named in cols (nil: all; a name that is not a top-level
// leaf of the file: all). fn does not keep the batch.
func readFile(ctx context.Context, b []byte, mem memory.Allocator, cols []string, fn func(arrow.RecordBatch) error) error {
	pf, err := file.NewParquetReader(bytes.NewReader(b), file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		return err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 8 << 10}, mem)
	if err != nil {
		return err
	}
	var leaves []int
	for _, c := range cols {
		i := pf.MetaData().Schema.ColumnIndexByName(c)
		if i < 0 {
			leaves = nil
			break
		}
		leaves = append(leaves, i)
	}
	rr, err := fr.GetRecordReader(ctx, leaves, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	for rr.Next() {
		if err := fn(rr.RecordBatch()); err != nil {
			return err
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// appendOnly reports whether snap's table forbids removing data
// (delta.appendOnly): a merge is refused there.
func appendOnly(snap *deltalog.Snapshot) bool {
	return snap.Metadata != nil && strings.EqualFold(snap.Metadata.Configuration["delta.appendOnly"], "true")
}

// merge commits the fresh batches as a merge; bg.mu held, the batches
// admitted (write). Every attempt plans against w.snap: after a lost race
// (reconcile read the newer versions) it plans again, so a file another
// writer or a compaction removed is never rewritten back and a file it
// added is read. Files a commit attempt named are left to the cleanup
// when the attempt did not land (as an append's are); files no attempt
// named are deleted.
func (w *writer) merge(ctx context.Context, batches []flightsink.Batch, fresh []bool, cp []byte) error {
	mc, err := w.prepareMerge(batches, fresh)
	if err != nil {
		return err
	}
	defer mc.release()
	for _, st := range mc.stage {
		if _, err := w.schemaFor(w.snap, st.schema, st.rec); err != nil {
			return err
		}
	}
	if appendOnly(w.snap) {
		return fmt.Errorf("%w: table %s is append-only (delta.appendOnly): a merge would remove rows", flightline.ErrInvalidInput, w.t.URL())
	}
	// The batches' own rows do not depend on the table: written once,
	// and deleted when no commit attempt named them.
	var news []*deltalog.Add
	attempted := false
	defer func() {
		if !attempted {
			(&mergePlan{adds: news}).discard(context.WithoutCancel(ctx), w)
		}
	}()
	var rows int64
	for _, st := range mc.stage {
		rows += st.rec.NumRows()
		if st.rec.NumRows() == 0 {
			continue
		}
		add, err := w.writeFile(ctx, st.rec)
		if err != nil {
			return err
		}
		news = append(news, add)
	}
	if err := w.checkStale(ctx); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		if err := w.checkClaims(ctx); err != nil {
			return err
		}
		if done, err := w.admit(ctx, cp); err != nil || done {
			return err
		}
		plan, err := w.planMerge(ctx, mc)
		if err != nil {
			return err
		}
		next := w.nextState(cp)
		acts, err := w.actions(w.snap, next, mc.stage, append(plan.adds[:len(plan.adds):len(plan.adds)], news...), rows, cp)
		if err != nil {
			plan.discard(context.WithoutCancel(ctx), w)
			return err
		}
		acts = mergeActions(acts, plan, mc, rows)
		v := w.snap.Version + 1
		attempted = true
		err = w.t.Commit(ctx, v, acts)
		if err == nil {
			if err := w.snap.Apply(v, acts); err != nil {
				return err
			}
			w.noteRanges(acts)
			w.publishView()
			w.committed(next)
			w.synced = time.Now()
			w.log.Debug("delta sink: merged", "table", w.t.URL(), "version", v, "keys", len(mc.keys), "files_read", plan.read,
				"files_rewritten", len(plan.removes), "rows_copied", plan.copied)
			w.afterCommit()
			return nil
		}
		// The attempt's files stay: a store that retried a conditional
		// write may answer "exists" to a write of ours that landed, which
		// reconcile then finds. The cleanup deletes them if not.
		if done, err := w.lostRace(ctx, err, v, cp, attempt); err != nil || done {
			return err
		}
	}
}

// mergeActions turns a WRITE commit (actions) into the merge's: commitInfo
// says MERGE (not a blind append) with Spark's metric names, and a remove
// (dataChange true) follows the adds for every touched file.
func mergeActions(acts []deltalog.Action, p *mergePlan, mc *mergeChanges, rows int64) []deltalog.Action {
	ts := time.Now().UnixMilli()
	ext := true
	var removes []deltalog.Action
	for _, in := range p.removes {
		size := in.Size
		removes = append(removes, deltalog.Action{Remove: &deltalog.Remove{Path: in.Path, DeletionTimestamp: &ts, DataChange: true,
			ExtendedFileMetadata: &ext, PartitionValues: in.PartitionValues, Size: &size}})
	}
	ci := acts[0].CommitInfo
	ci["operation"] = "MERGE"
	ci["isBlindAppend"] = false
	ci["operationParameters"] = map[string]string{"predicate": "key match", "matchedPredicates": `[{"actionType":"update"},{"actionType":"delete"}]`,
		"notMatchedPredicates": `[{"actionType":"insert"}]`}
	m := ci["operationMetrics"].(map[string]string)
	adds := 0
	for _, a := range acts {
		if a.Add != nil {
			adds++
		}
	}
	m["numFiles"] = strconv.Itoa(adds)
	m["numTargetFilesAdded"] = strconv.Itoa(adds)
	m["numTargetFilesRemoved"] = strconv.Itoa(len(p.removes))
	// As delta-rs's merge metrics (num_target_files_scanned, …_skipped_during_scan).
	m["numTargetFilesScanned"] = strconv.Itoa(p.read)
	m["numTargetFilesSkipped"] = strconv.Itoa(p.skipped)
	m["numTargetRowsCopied"] = strconv.FormatInt(p.copied, 10)
	m["numTargetRowsDeleted"] = strconv.FormatInt(mc.deletes, 10)
	m["numOutputRows"] = strconv.FormatInt(rows+p.copied, 10)
	return append(acts, removes...)
}
