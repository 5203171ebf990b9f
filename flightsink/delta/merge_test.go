package delta_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	delta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// change is one row of a change batch: _op, id and v ("" with a delete).
type change struct {
	op string
	id int64
	v  string
}

func ins(id int64, v string) change { return change{"insert", id, v} }
func upd(id int64, v string) change { return change{"update", id, v} }
func del(id int64) change           { return change{"delete", id, ""} }

var changeSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "_op", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "_lsn", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// changeBatch builds a batch of the postgres-cdc source's shape: a
// delete carries only its key. The caller releases it.
func changeBatch(mem memory.Allocator, cs ...change) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, changeSchema)
	defer b.Release()
	for i, c := range cs {
		b.Field(0).(*array.Int64Builder).Append(c.id)
		if c.op == "delete" {
			b.Field(1).(*array.StringBuilder).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(c.v)
		}
		b.Field(2).(*array.StringBuilder).Append(c.op)
		b.Field(3).(*array.Int64Builder).Append(int64(i))
	}
	return b.NewRecordBatch()
}

// apply is the model: what a table holds after the changes.
func apply(m map[int64]string, cs ...change) {
	for _, c := range cs {
		if c.op == "delete" {
			delete(m, c.id)
		} else {
			m[c.id] = c.v
		}
	}
}

// readRows reads the table at dir with our own log reader (deltalog) and
// plain pqarrow: id → v. A key twice fails the test.
func readRows(t *testing.T, dir string) map[int64]string {
	t.Helper()
	ctx := context.Background()
	st, err := objstore.Open(ctx, dir, nil)
	require.NoError(t, err)
	snap, err := deltalog.NewTable(st, nil).Snapshot(ctx)
	require.NoError(t, err)
	rows := map[int64]string{}
	for _, f := range snap.SortedFiles() {
		b, err := st.Get(ctx, f.Path)
		require.NoError(t, err)
		pf, err := file.NewParquetReader(bytes.NewReader(b))
		require.NoError(t, err)
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		require.NoError(t, err)
		tbl, err := fr.ReadTable(ctx)
		require.NoError(t, err)
		require.Empty(t, tbl.Schema().FieldIndices("_op"), "change columns are not written")
		require.Empty(t, tbl.Schema().FieldIndices("_lsn"), "change columns are not written")
		tr := array.NewTableReader(tbl, 0)
		for tr.Next() {
			rec := tr.RecordBatch()
			ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
			vs := rec.Column(rec.Schema().FieldIndices("v")[0]).(*array.String)
			for i := range ids.Len() {
				_, dup := rows[ids.Value(i)]
				require.False(t, dup, "key %d twice in the table", ids.Value(i))
				rows[ids.Value(i)] = vs.Value(i)
			}
		}
		tr.Release()
		tbl.Release()
		pf.Close()
	}
	return rows
}

// deltaRsRows reads the table at dir with delta-rs (python deltalake),
// independently of this package: id → v, a key twice fails the test.
func deltaRsRows(t *testing.T, dir string) map[int64]string {
	t.Helper()
	py := servicetest.Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	out, err := exec.Command(py, "../../integration/python/delta_table_rows.py", dir).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("delta_table_rows.py: %v\n%s", err, ee.Stderr)
	}
	require.NoError(t, err)
	var res struct {
		Rows []struct {
			ID int64  `json:"id"`
			V  string `json:"v"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(out, &res), "%s", out)
	rows := map[int64]string{}
	for _, r := range res.Rows {
		_, dup := rows[r.ID]
		require.False(t, dup, "delta-rs: key %d twice in the table", r.ID)
		rows[r.ID] = r.V
	}
	return rows
}

func mergeSink(t *testing.T, dir string, mem memory.Allocator, cfg delta.Config) *delta.Sink {
	t.Helper()
	cfg.URI, cfg.Mode, cfg.Key = dir, delta.ModeMerge, []string{"id"}
	if cfg.Compaction == "" {
		cfg.Compaction = "off"
	}
	s, err := delta.New(context.Background(), cfg, delta.Allocator(mem))
	require.NoError(t, err)
	return s
}

// syncBuf is a log sink for a writer's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func pos(n int64) []byte { return checkpoint.Positions{"cdc/0": n}.Encode() }

// TestMergeAppliesChanges: inserts, updates and deletes, a primary-key
// update (delete of the old key, update of the new) and a delete then
// re-insert of a key, within one batch and across batches and groups:
// our reader and delta-rs both read the model's rows, each key once, and
// the change columns are not in the table.
func TestMergeAppliesChanges(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	s := mergeSink(t, dir, mem, delta.Config{CheckpointInterval: 3})
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "cdc"})
	require.NoError(t, err)
	model := map[int64]string{}
	n := int64(0)
	write := func(cs ...change) {
		t.Helper()
		rec := changeBatch(mem, cs...)
		defer rec.Release()
		n++
		require.NoError(t, w.WriteBatch(ctx, rec, pos(n)))
		apply(model, cs...)
	}
	write(ins(1, "a"), ins(2, "b"), ins(3, "c"), ins(4, "d"), ins(5, "e"))
	write(upd(2, "b2"), del(3), ins(6, "f"))
	// A key update within one batch: 4 becomes 40.
	write(del(4), upd(40, "d-moved"))
	// Delete then re-insert within one batch, and an insert then delete.
	write(del(5), ins(5, "e-again"), ins(7, "g"), del(7), upd(1, "a2"), upd(1, "a3"))
	// Delete, then re-insert in the next batch.
	write(del(6))
	write(ins(6, "f-again"))
	// A group: one commit, the last change of a key over all its batches.
	g1, g2 := changeBatch(mem, ins(8, "h"), upd(2, "b3")), changeBatch(mem, del(8), upd(2, "b4"), ins(9, "i"))
	require.NoError(t, w.(flightsink.GroupWriter).WriteBatches(ctx, []flightsink.Batch{{Rec: g1, CP: pos(n + 1)}, {Rec: g2, CP: pos(n + 2)}}))
	g1.Release()
	g2.Release()
	apply(model, ins(8, "h"), upd(2, "b3"), del(8), upd(2, "b4"), ins(9, "i"))
	n += 2
	// Only deletes, and a delete of a key never written.
	write(del(9), del(12345))
	require.NoError(t, w.Close(ctx))
	want := map[int64]string{1: "a3", 2: "b4", 5: "e-again", 6: "f-again", 40: "d-moved"}
	require.Equal(t, want, model)
	require.Equal(t, want, readRows(t, dir), "our reader")
	require.Equal(t, want, deltaRsRows(t, dir), "delta-rs")
	snap := snapshot(t, dir)
	require.NotContains(t, snap.Schema.Fields, "_op")
	names := []string{}
	for _, f := range snap.Schema.Fields {
		names = append(names, f.Name)
	}
	require.Equal(t, []string{"id", "v"}, names, "the table's columns are the data columns")
	ops := operations(t, dir)
	require.Equal(t, "MERGE", ops[len(ops)-1])
}

// TestMergeReplayChangesNothing: a batch whose checkpoint the table holds
// commits nothing, from the same writer or a new one (after a crash),
// even when the table changed since.
func TestMergeReplayChangesNothing(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	s := mergeSink(t, dir, mem, delta.Config{})
	p := flightsink.Pipeline{ID: "cdc"}
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	b1 := changeBatch(mem, ins(1, "a"), ins(2, "b"))
	defer b1.Release()
	b2 := changeBatch(mem, del(1), upd(2, "b2"), ins(3, "c"))
	defer b2.Release()
	require.NoError(t, w.WriteBatch(ctx, b1, pos(1)))
	require.NoError(t, w.WriteBatch(ctx, b2, pos(2)))
	want := map[int64]string{2: "b2", 3: "c"}
	v := snapshot(t, dir).Version
	require.NoError(t, w.WriteBatch(ctx, b1, pos(1)), "replay")
	require.NoError(t, w.WriteBatch(ctx, b2, pos(2)), "replay")
	require.NoError(t, w.Close(ctx))
	w, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, pos(2), cp)
	v++ // the claim
	require.NoError(t, w.WriteBatch(ctx, b1, pos(1)), "replay after a re-open")
	require.NoError(t, w.WriteBatch(ctx, b2, pos(2)), "replay after a re-open")
	require.NoError(t, w.Close(ctx))
	require.Equal(t, v, snapshot(t, dir).Version, "a replay commits nothing")
	require.Equal(t, want, readRows(t, dir))
	require.Equal(t, want, deltaRsRows(t, dir))
}

// lastMerge returns what the newest version of the table removed, how
// many files it added, and its files scanned and skipped (commitInfo).
func lastMerge(t *testing.T, dir string) (removed []string, added int, scanned, skipped string) {
	t.Helper()
	st, err := objstore.Open(context.Background(), dir, nil)
	require.NoError(t, err)
	tb := deltalog.NewTable(st, nil)
	snap, err := tb.Snapshot(context.Background())
	require.NoError(t, err)
	acts, err := tb.ReadVersion(context.Background(), snap.Version)
	require.NoError(t, err)
	for _, a := range acts {
		if a.Remove != nil {
			require.True(t, a.Remove.DataChange, "a merge's remove changes data")
			removed = append(removed, a.Remove.Path)
		}
		if a.Add != nil {
			added++
		}
	}
	require.Equal(t, "MERGE", acts[0].CommitInfo["operation"])
	m := acts[0].CommitInfo["operationMetrics"].(map[string]any)
	return removed, added, m["numTargetFilesScanned"].(string), m["numTargetFilesSkipped"].(string)
}

// fileOf returns the live file that holds the row of id.
func fileOf(t *testing.T, dir string, id int64) string {
	t.Helper()
	ctx := context.Background()
	st, err := objstore.Open(ctx, dir, nil)
	require.NoError(t, err)
	for _, f := range snapshot(t, dir).SortedFiles() {
		b, err := st.Get(ctx, f.Path)
		require.NoError(t, err)
		pf, err := file.NewParquetReader(bytes.NewReader(b))
		require.NoError(t, err)
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		require.NoError(t, err)
		tbl, err := fr.ReadTable(ctx)
		require.NoError(t, err)
		found := false
		for _, c := range tbl.Column(tbl.Schema().FieldIndices("id")[0]).Data().Chunks() {
			found = found || slices.Contains(c.(*array.Int64).Int64Values(), id)
		}
		tbl.Release()
		pf.Close()
		if found {
			return f.Path
		}
	}
	t.Fatalf("no file holds %d", id)
	return ""
}

// TestMergePrunesByStats: a merge rewrites only the files whose key
// ranges (the add actions' stats) may hold its keys, also for files whose
// stats a lean snapshot left in a checkpoint (a re-opened writer); a file
// whose range holds a key but not its row is read and left as it is.
func TestMergePrunesByStats(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	s := mergeSink(t, dir, mem, delta.Config{CheckpointInterval: 2})
	p := flightsink.Pipeline{ID: "cdc"}
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	model := map[int64]string{}
	n := int64(0)
	write := func(w flightsink.Writer, cs ...change) {
		t.Helper()
		rec := changeBatch(mem, cs...)
		defer rec.Release()
		n++
		require.NoError(t, w.WriteBatch(ctx, rec, pos(n)))
		apply(model, cs...)
	}
	// Three files: ids 0, 2, …, 18; 20, …, 38; 40, …, 58.
	for f := range int64(3) {
		var cs []change
		for i := f * 20; i < f*20+20; i += 2 {
			cs = append(cs, ins(i, fmt.Sprint("v", i)))
		}
		write(w, cs...)
	}
	middle := fileOf(t, dir, 24)
	write(w, upd(24, "x"))
	removed, added, scanned, skipped := lastMerge(t, dir)
	require.Equal(t, []string{middle}, removed, "only the file whose range holds 24")
	require.Equal(t, 2, added, "its rewrite and the batch's row")
	require.Equal(t, []string{"1", "2"}, []string{scanned, skipped}, "the other two files are not read")
	// 25 is in the middle file's range, not in it: read, not rewritten;
	// 1000 is in no file's range.
	write(w, ins(25, "new"), ins(1000, "far"))
	removed, added, scanned, skipped = lastMerge(t, dir)
	require.Empty(t, removed, "no file held 25 or 1000")
	require.Equal(t, 1, added)
	require.Equal(t, []string{"1", "3"}, []string{scanned, skipped}, "the rewrite of the middle file is read")
	require.NoError(t, w.Close(ctx))
	// A new writer's lean snapshot holds no stats of the checkpointed
	// files: it reads them back from the checkpoint.
	snap := snapshot(t, dir)
	require.GreaterOrEqual(t, snap.CheckpointVersion, int64(4), "the files are in a checkpoint")
	last := fileOf(t, dir, 46) // the file of 25 and 1000 is read, not rewritten
	w, _, err = s.Open(ctx, p)
	require.NoError(t, err)
	write(w, del(46))
	removed, _, scanned, skipped = lastMerge(t, dir)
	require.Equal(t, []string{last}, removed, "only the file holding 46")
	require.Equal(t, []string{"2", "3"}, []string{scanned, skipped},
		"the ranges of the checkpoint's files (read back from it) prune all but the file of 46 and the file of 25 and 1000")
	require.NoError(t, w.Close(ctx))
	require.Equal(t, model, readRows(t, dir))
	require.Equal(t, model, deltaRsRows(t, dir))
}

// TestMergeRefusals: the Config's refusals, and batches refused before
// anything is committed.
func TestMergeRefusals(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		cfg  delta.Config
		want string
	}{
		{delta.Config{Mode: "merge"}, "mode merge needs key columns"},
		{delta.Config{Key: []string{"id"}}, "key is for mode merge"},
		{delta.Config{Mode: "append", Key: []string{"id"}}, "key is for mode merge"},
		{delta.Config{Mode: "upsert", Key: []string{"id"}}, `mode "upsert": want append or merge`},
		{delta.Config{Mode: "merge", Key: []string{""}}, "empty key column"},
		{delta.Config{Mode: "merge", Key: []string{"_op"}}, "change column"},
	} {
		c.cfg.URI = t.TempDir()
		_, err := delta.New(ctx, c.cfg)
		require.ErrorIs(t, err, flightline.ErrInvalidInput, c.want)
		require.ErrorContains(t, err, c.want)
	}

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	s := mergeSink(t, dir, mem, delta.Config{})
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "cdc"})
	require.NoError(t, err)
	defer w.Close(ctx)
	good := changeBatch(mem, ins(1, "a"))
	require.NoError(t, w.WriteBatch(ctx, good, pos(1)))
	good.Release()
	v := snapshot(t, dir).Version
	refused := func(rec arrow.RecordBatch, target error, msg string) {
		t.Helper()
		defer rec.Release()
		err := w.WriteBatch(ctx, rec, pos(2))
		require.ErrorIs(t, err, target)
		require.ErrorContains(t, err, msg)
		require.Equal(t, v, snapshot(t, dir).Version, "nothing committed")
	}
	build := func(sc *arrow.Schema, fill func(b *array.RecordBuilder)) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, sc)
		defer b.Release()
		fill(b)
		return b.NewRecordBatch()
	}
	// A null key.
	refused(build(changeSchema, func(b *array.RecordBuilder) {
		b.Field(0).(*array.Int64Builder).AppendValues([]int64{2, 0}, []bool{true, false})
		b.Field(1).(*array.StringBuilder).AppendValues([]string{"x", "y"}, nil)
		b.Field(2).(*array.StringBuilder).AppendValues([]string{"insert", "insert"}, nil)
		b.Field(3).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
	}), flightline.ErrInvalidInput, `key column "id" is null`)
	// An _op that is none of the three.
	refused(build(changeSchema, func(b *array.RecordBuilder) {
		b.Field(0).(*array.Int64Builder).Append(2)
		b.Field(1).(*array.StringBuilder).Append("x")
		b.Field(2).(*array.StringBuilder).Append("upsert")
		b.Field(3).(*array.Int64Builder).Append(1)
	}), flightline.ErrInvalidInput, `_op "upsert"`)
	// No key column.
	noKey := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "_op", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	refused(build(noKey, func(b *array.RecordBuilder) {
		b.Field(0).(*array.StringBuilder).Append("x")
		b.Field(1).(*array.StringBuilder).Append("insert")
	}), flightline.ErrSchemaMismatch, `key column "id" is not in the batch`)
	// A column the table does not have.
	extra := arrow.NewSchema(append(slices.Clone(changeSchema.Fields()), arrow.Field{Name: "w", Type: arrow.PrimitiveTypes.Int64}), nil)
	refused(build(extra, func(b *array.RecordBuilder) {
		b.Field(0).(*array.Int64Builder).Append(2)
		b.Field(1).(*array.StringBuilder).Append("x")
		b.Field(2).(*array.StringBuilder).Append("insert")
		b.Field(3).(*array.Int64Builder).Append(1)
		b.Field(4).(*array.Int64Builder).Append(1)
	}), flightline.ErrSchemaMismatch, `no column "w"`)
	require.Equal(t, map[int64]string{1: "a"}, readRows(t, dir))
}

// TestMergeRandomWithCompaction: random inserts, updates, deletes and key
// moves over a small key space, in batches and groups, with the
// background compaction on and eager (it races the merges: each merge
// removes files a running compaction may be rewriting): at the end both
// readers read the model, each key once.
func TestMergeRandomWithCompaction(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	var logs syncBuf
	cfg := delta.Config{URI: dir, Mode: delta.ModeMerge, Key: []string{"id"}, CompactMinFiles: 2, TargetFileSize: 1 << 20, CheckpointInterval: 5}
	s, err := delta.New(ctx, cfg, delta.Allocator(mem),
		delta.Logger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	require.NoError(t, err)
	p := flightsink.Pipeline{ID: "cdc"}
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(35, 2))
	model := map[int64]string{}
	n := int64(0)
	batch := func() []change {
		var cs []change
		shadow := maps.Clone(model)
		for range 1 + rng.IntN(8) {
			id := rng.Int64N(60)
			var c []change
			switch k := rng.IntN(10); {
			case k < 4:
				c = []change{upd(id, fmt.Sprint("u", n, "-", id))}
			case k < 7:
				c = []change{del(id)}
			case k < 9: // a key update
				to := rng.Int64N(60)
				if _, ok := shadow[id]; !ok || to == id {
					continue
				}
				c = []change{del(id), upd(to, fmt.Sprint("m", n, "-", to))}
			default:
				c = []change{del(id), ins(id, fmt.Sprint("again", n))}
			}
			apply(shadow, c...)
			cs = append(cs, c...)
		}
		return cs
	}
	for i := range 60 {
		if i%4 == 3 {
			time.Sleep(30 * time.Millisecond) // let a compaction commit now and then
		}
		if i%7 == 6 {
			a, b := batch(), []change(nil)
			apply(model, a...)
			b = batch()
			ra, rb := changeBatch(mem, a...), changeBatch(mem, b...)
			require.NoError(t, w.(flightsink.GroupWriter).WriteBatches(ctx, []flightsink.Batch{{Rec: ra, CP: pos(n + 1)}, {Rec: rb, CP: pos(n + 2)}}))
			ra.Release()
			rb.Release()
			apply(model, b...)
			n += 2
			continue
		}
		cs := batch()
		rec := changeBatch(mem, cs...)
		n++
		require.NoError(t, w.WriteBatch(ctx, rec, pos(n)))
		rec.Release()
		apply(model, cs...)
	}
	require.NoError(t, w.Close(ctx))
	require.Contains(t, operations(t, dir), "OPTIMIZE", "compactions ran between the merges")
	t.Logf("compactions committed %d, yielded to a merge %d", strings.Count(logs.String(), "delta sink: compacted"),
		strings.Count(logs.String(), "compaction yielded"))
	require.Equal(t, model, readRows(t, dir), "our reader")
	require.Equal(t, model, deltaRsRows(t, dir), "delta-rs")
}

// TestMergeLosesRaceToOptimize: a writer whose snapshot predates another
// process's compaction plans its merge on files that compaction removed;
// its commit loses the version, re-reads the log and plans again on the
// compacted file: nothing deleted comes back, nothing updated is lost.
func TestMergeLosesRaceToOptimize(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	s := mergeSink(t, dir, mem, delta.Config{})
	p := flightsink.Pipeline{ID: "cdc"}
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	model := map[int64]string{}
	n := int64(0)
	write := func(cs ...change) {
		t.Helper()
		rec := changeBatch(mem, cs...)
		defer rec.Release()
		n++
		require.NoError(t, w.WriteBatch(ctx, rec, pos(n)))
		apply(model, cs...)
	}
	for f := range int64(4) {
		write(ins(f*10, "a"), ins(f*10+1, "b"), ins(f*10+2, "c"))
	}
	other := mergeSink(t, dir, mem, delta.Config{})
	res, err := other.Optimize(ctx, "")
	require.NoError(t, err)
	require.Equal(t, 1, res.Commits)
	require.Equal(t, 4, res.FilesRemoved)
	write(del(0), upd(11, "b2"), del(22), ins(22, "c2"), ins(50, "new"))
	require.NoError(t, w.Close(ctx))
	require.Equal(t, model, readRows(t, dir), "our reader")
	require.Equal(t, model, deltaRsRows(t, dir), "delta-rs")
}

// TestMergeZombieFenced: a writer whose pipeline a newer writer claimed
// commits no merge (ErrFenced, for good), whatever the batch.
func TestMergeZombieFenced(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := t.TempDir()
	s := mergeSink(t, dir, mem, delta.Config{})
	p := flightsink.Pipeline{ID: "cdc"}
	old, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	b1 := changeBatch(mem, ins(1, "a"), ins(2, "b"))
	defer b1.Release()
	require.NoError(t, old.WriteBatch(ctx, b1, pos(1)))
	nw, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, pos(1), cp)
	b2 := changeBatch(mem, del(1), upd(2, "zombie"))
	defer b2.Release()
	require.ErrorIs(t, old.WriteBatch(ctx, b2, pos(2)), flightline.ErrFenced)
	require.ErrorIs(t, old.WriteBatch(ctx, b2, pos(2)), flightline.ErrFenced, "for good")
	b3 := changeBatch(mem, upd(1, "new"))
	defer b3.Release()
	require.NoError(t, nw.WriteBatch(ctx, b3, pos(2)))
	require.NoError(t, old.Close(ctx))
	require.NoError(t, nw.Close(ctx))
	want := map[int64]string{1: "new", 2: "b"}
	require.Equal(t, want, readRows(t, dir))
	require.Equal(t, want, deltaRsRows(t, dir))
}
