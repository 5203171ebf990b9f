package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/parquetw"
)

// DefaultTargetFileSize is the size compaction aims its files at: 32 MiB,
// less than the 128 MiB of Spark's OPTIMIZE: readers of a streaming table
// see fewer rows per file change, and a compaction's input (files of up to
// half the target, read one at a time) stays small beside a sink that
// often runs under a 96 MiB memory limit (--memory-limit auto). The
// output streams to the store, so the target does not bound memory; raise
// it for tables read mostly by batch engines.
const DefaultTargetFileSize = 32 << 20

// DefaultCompactMinFiles is how many small files the sink lets gather
// before it compacts them (as Databricks' auto compaction's minNumFiles).
const DefaultCompactMinFiles = 50

// compactRowGroupRows and compactRowGroupBytes bound a row group of a
// compacted file (the writer buffers one row group's pages).
const (
	compactRowGroupRows  = 1 << 20
	compactRowGroupBytes = 16 << 20
)

// maxCompactionInputs bounds the inputs of one compaction (and what its
// planning holds): the oldest small files are compacted first, the rest
// by the next compactions.
const maxCompactionInputs = 10_000

// planCompaction picks the inputs of one compaction of snap (not a
// streamed snapshot: planStreamed): the oldest small files (under
// target/2, no deletion vector), by modification time then path, as long
// as their sizes add up to at most target (at least two files, at most
// maxCompactionInputs). Nil when the table holds fewer than minFiles
// small files.
func planCompaction(snap *deltalog.Snapshot, target int64, minFiles int, skip map[string]bool) []*deltalog.Add {
	var c candidates
	for _, a := range snap.Files {
		if !skip[a.Path] {
			c.offer(a, target, false)
		}
	}
	return c.plan(target, minFiles)
}

// planStreamed is planCompaction of a streamed snapshot (a Clone: the
// checkpoint's files are read from the store). It also returns how many
// small files it found.
func planStreamed(ctx context.Context, t *deltalog.Table, snap *deltalog.Snapshot, target int64, minFiles int) ([]*deltalog.Add, int, error) {
	var c candidates
	err := t.EachFile(ctx, snap, func(a *deltalog.Add) error {
		c.offer(a, target, true)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return c.plan(target, minFiles), c.small, nil
}

// candidates collects the oldest maxCompactionInputs small files offered
// (a max-heap on age: the youngest kept is dropped first).
type candidates struct {
	small int
	heap  []*deltalog.Add
}

func older(a, b *deltalog.Add) bool {
	if a.ModificationTime != b.ModificationTime {
		return a.ModificationTime < b.ModificationTime
	}
	return a.Path < b.Path
}

// offer considers a; with clone, a is copied (its strings too) before it
// is kept.
func (c *candidates) offer(a *deltalog.Add, target int64, clone bool) {
	if a.Size >= target/2 || len(a.DeletionVector) != 0 {
		return
	}
	c.small++
	if len(c.heap) == maxCompactionInputs && !older(a, c.heap[0]) {
		return
	}
	if clone {
		a = &deltalog.Add{Path: strings.Clone(a.Path), PartitionValues: clonePV(a.PartitionValues), Size: a.Size,
			ModificationTime: a.ModificationTime}
	}
	if len(c.heap) < maxCompactionInputs {
		c.heap = append(c.heap, a)
		for i := len(c.heap) - 1; i > 0; {
			p := (i - 1) / 2
			if !older(c.heap[p], c.heap[i]) {
				break
			}
			c.heap[p], c.heap[i] = c.heap[i], c.heap[p]
			i = p
		}
		return
	}
	c.heap[0] = a
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(c.heap) && older(c.heap[m], c.heap[l]) {
			m = l
		}
		if r < len(c.heap) && older(c.heap[m], c.heap[r]) {
			m = r
		}
		if m == i {
			break
		}
		c.heap[m], c.heap[i] = c.heap[i], c.heap[m]
		i = m
	}
}

// plan returns the oldest candidates whose sizes add up to at most target
// (at least two), or nil when fewer than minFiles small files were
// offered.
func (c *candidates) plan(target int64, minFiles int) []*deltalog.Add {
	if c.small < max(minFiles, 2) || len(c.heap) < 2 {
		return nil
	}
	small := c.heap
	slices.SortFunc(small, func(a, b *deltalog.Add) int {
		if older(a, b) {
			return -1
		}
		return 1
	})
	var sum int64
	n := 0
	for n < len(small) && (n < 2 || sum+small[n].Size <= target) {
		sum += small[n].Size
		n++
	}
	return small[:n]
}

func clonePV(m deltalog.NullStrMap) deltalog.NullStrMap {
	if len(m) == 0 {
		return m
	}
	out := make(deltalog.NullStrMap, len(m))
	for k, v := range m {
		if v != nil {
			c := strings.Clone(*v)
			v = &c
		}
		out[strings.Clone(k)] = v
	}
	return out
}

// inputsLive reports whether every input is still an active file of snap.
// A streamed snapshot tells by the removals it tracked since the
// compaction was planned (false when it is not tracking).
func inputsLive(snap *deltalog.Snapshot, inputs []*deltalog.Add) bool {
	for _, a := range inputs {
		if snap.Streamed() {
			if removed, ok := snap.Removed(a.Path); removed || !ok {
				return false
			}
		} else if _, ok := snap.Files[a.Path]; !ok {
			return false
		}
	}
	return true
}

// rewritten is the output of a compaction: the file written and the
// inputs it holds (those of the plan with the first input's schema).
type rewritten struct {
	add    *deltalog.Add
	inputs []*deltalog.Add
	rows   int64
}

func filePath(p string) string {
	if u, err := url.PathUnescape(p); err == nil {
		return u
	}
	return p
}

// rewrite reads the inputs in order and writes their rows, in that order,
// to one new data file. An input whose Arrow schema differs from the
// first's (an older schema of an evolved table) is left out. The new file
// is unreferenced until a commit adds it.
//
// The output streams to the store (objstore.NewWriter: a temporary file
// locally, a multipart upload on S3), so a compaction holds one input
// file, one buffered row group and at most one upload part in memory, not
// its whole output.
func rewrite(ctx context.Context, store objstore.Store, mem memory.Allocator, inputs []*deltalog.Add) (*rewritten, error) {
	path := fmt.Sprintf("part-00000-%s-c000.snappy.parquet", uuid())
	ow, err := objstore.NewWriter(ctx, store, path)
	if err != nil {
		return nil, fmt.Errorf("compaction: write %s: %w", path, err)
	}
	defer ow.Abort() // after a Commit it does nothing
	var (
		buf    = &objstore.Counting{W: ow}
		fw     *pqarrow.FileWriter
		schema *arrow.Schema
		st     parquetw.Stats
		out    = &rewritten{}
	)
	defer func() {
		if fw != nil {
			fw.Close()
		}
	}()
	for _, in := range inputs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := store.Get(ctx, filePath(in.Path))
		if err != nil {
			return nil, fmt.Errorf("compaction: read %s: %w", in.Path, err)
		}
		err = func() error {
			pf, err := file.NewParquetReader(bytes.NewReader(b), file.WithReadProps(parquet.NewReaderProperties(mem)))
			if err != nil {
				return fmt.Errorf("compaction: %s: %w", in.Path, err)
			}
			defer pf.Close()
			fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 8 << 10}, mem)
			if err != nil {
				return err
			}
			rr, err := fr.GetRecordReader(ctx, nil, nil)
			if err != nil {
				return err
			}
			defer rr.Release()
			if schema != nil && !schema.Equal(rr.Schema()) {
				return nil // left out: another schema
			}
			for rr.Next() {
				rec := rr.RecordBatch()
				if fw == nil {
					schema = rr.Schema()
					if fw, err = newCompactWriter(buf, mem, rec); err != nil {
						return err
					}
					fw.NewBufferedRowGroup()
				}
				if n, _ := fw.RowGroupNumRows(); n > 0 && (int64(n)+rec.NumRows() > compactRowGroupRows ||
					fw.RowGroupTotalCompressedBytes() >= compactRowGroupBytes) {
					fw.NewBufferedRowGroup()
				}
				if err := fw.WriteBuffered(rec); err != nil {
					return fmt.Errorf("compaction: write: %w", err)
				}
				mergeStats(&st, parquetw.Compute(rec))
			}
			if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("compaction: read %s: %w", in.Path, err)
			}
			if schema == nil {
				schema = rr.Schema() // an empty first file
			}
			out.inputs = append(out.inputs, in)
			return nil
		}()
		if err != nil {
			return nil, err
		}
	}
	if fw == nil || len(out.inputs) < 2 {
		return nil, nil // nothing worth a commit
	}
	err = fw.Close()
	fw = nil
	if err != nil {
		return nil, fmt.Errorf("compaction: write: %w", err)
	}
	if err := ow.Commit(ctx); err != nil {
		return nil, fmt.Errorf("compaction: write %s: %w", path, err)
	}
	out.rows = st.NumRecords
	out.add = &deltalog.Add{Path: path, PartitionValues: out.inputs[0].PartitionValues, Size: buf.N,
		ModificationTime: time.Now().UnixMilli(), DataChange: false, Stats: deltalog.StatsJSON(st)}
	return out, nil
}

// newCompactWriter opens the Parquet writer of a compacted file with the
// properties parquetw gives a batch's file, dictionary-encoding the
// columns whose first batch makes it pay.
func newCompactWriter(w io.Writer, mem memory.Allocator, first arrow.RecordBatch) (*pqarrow.FileWriter, error) {
	props := []parquet.WriterProperty{
		parquet.WithAllocator(mem), parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithMaxRowGroupLength(compactRowGroupRows), parquet.WithCreatedBy("flightline"),
		parquet.WithStats(true), parquet.WithVersion(parquet.V2_6), parquet.WithDictionaryDefault(false),
	}
	for i, f := range first.Schema().Fields() {
		if parquetw.DictionaryPays(first.Column(i)) {
			props = append(props, parquet.WithDictionaryFor(f.Name, true))
		}
	}
	aprops := pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem), pqarrow.WithCoerceTimestamps(arrow.Microsecond),
		pqarrow.WithTruncatedTimestamps(true))
	return pqarrow.NewFileWriter(first.Schema(), w, parquet.NewWriterProperties(props...), aprops)
}

// mergeStats folds the statistics of another batch of the same schema
// into acc.
func mergeStats(acc *parquetw.Stats, st parquetw.Stats) {
	if acc.Columns == nil {
		*acc = parquetw.Stats{NumRecords: st.NumRecords, Columns: slices.Clone(st.Columns)}
		return
	}
	acc.NumRecords += st.NumRecords
	for i := range acc.Columns {
		a, b := &acc.Columns[i], st.Columns[i]
		a.NullCount += b.NullCount
		switch {
		case !b.HasMinMax:
		case !a.HasMinMax:
			a.Min, a.Max, a.HasMinMax = b.Min, b.Max, true
		default:
			if less(b.Min, a.Min) {
				a.Min = b.Min
			}
			if less(a.Max, b.Max) {
				a.Max = b.Max
			}
		}
	}
}

func less(x, y any) bool {
	switch x := x.(type) {
	case int64:
		return x < y.(int64)
	case float64:
		return x < y.(float64)
	case string:
		return x < y.(string)
	case decimal128.Num:
		return x.Less(y.(decimal128.Num))
	}
	return false
}

// compactionActions is the commit of a compaction: commitInfo (OPTIMIZE),
// a remove per input and the add of the new file, all with dataChange
// false: the rows are the same, so streaming readers skip the commit.
func compactionActions(r *rewritten, target int64, auto bool, now time.Time) []deltalog.Action {
	ts := now.UnixMilli()
	var removed int64
	acts := []deltalog.Action{{}}
	ext := true
	for _, in := range r.inputs {
		size := in.Size
		removed += size
		acts = append(acts, deltalog.Action{Remove: &deltalog.Remove{Path: in.Path, DeletionTimestamp: &ts, DataChange: false,
			ExtendedFileMetadata: &ext, PartitionValues: in.PartitionValues, Size: &size}})
	}
	acts = append(acts, deltalog.Action{Add: r.add})
	acts[0].CommitInfo = map[string]any{
		"timestamp": ts,
		"operation": "OPTIMIZE",
		"operationParameters": map[string]string{"predicate": "[]", "zOrderBy": "[]", "targetSize": strconv.FormatInt(target, 10),
			"auto": strconv.FormatBool(auto)},
		"operationMetrics": map[string]string{"numRemovedFiles": strconv.Itoa(len(r.inputs)), "numAddedFiles": "1",
			"numRemovedBytes": strconv.FormatInt(removed, 10), "numAddedBytes": strconv.FormatInt(r.add.Size, 10)},
		"isolationLevel": "SnapshotIsolation",
		"isBlindAppend":  false,
		"engineInfo":     "flightline",
		"clientVersion":  "flightline",
		"txnId":          uuid(),
	}
	return acts
}

// OptimizeResult says what Optimize did.
type OptimizeResult struct {
	Commits      int   // compaction commits made
	FilesRemoved int   // small files rewritten
	FilesAdded   int   // files written
	BytesRemoved int64 // their sizes
	BytesAdded   int64
	Yielded      int // compactions given up because a newer commit removed an input
	Version      int64
}

// Optimize compacts the table of target once: every small file (under
// half of TargetFileSize) is rewritten, in bins of at most about the
// target size, one commit (dataChange false) per bin. A bin whose inputs a
// newer commit removed is given up (its file stays unreferenced until
// Vacuum); concurrent appends only move the version it commits at.
func (s *Sink) Optimize(ctx context.Context, target string) (OptimizeResult, error) {
	var res OptimizeResult
	t, err := s.table(target)
	if err != nil {
		return res, err
	}
	snap, err := t.Snapshot(ctx)
	if err != nil {
		return res, err
	}
	res.Version = snap.Version
	if snap.Version < 0 {
		return res, nil
	}
	skip := map[string]bool{}
	for {
		if err := snap.CheckWrite(); err != nil {
			return res, fmt.Errorf("delta optimize %s: %w", t.URL(), err)
		}
		inputs := planCompaction(snap, s.o.target, 2, skip)
		if inputs == nil {
			return res, nil
		}
		r, err := rewrite(ctx, t.Store(), s.o.mem, inputs)
		if err != nil {
			return res, err
		}
		if r == nil {
			for _, in := range inputs {
				skip[in.Path] = true
			}
			continue
		}
		for _, in := range inputs {
			skip[in.Path] = true // never picked twice, whatever becomes of this bin
		}
		for attempt := 0; ; attempt++ {
			if !inputsLive(snap, r.inputs) {
				res.Yielded++
				break
			}
			acts := compactionActions(r, s.o.target, false, time.Now())
			v := snap.Version + 1
			err := t.Commit(ctx, v, acts)
			if err == nil {
				if err := snap.Apply(v, acts); err != nil {
					return res, err
				}
				res.Commits++
				res.FilesRemoved += len(r.inputs)
				res.FilesAdded++
				res.BytesAdded += r.add.Size
				for _, in := range r.inputs {
					res.BytesRemoved += in.Size
				}
				res.Version = v
				break
			}
			if !errors.Is(err, deltalog.ErrVersionExists) || attempt+1 >= s.o.attempts {
				return res, fmt.Errorf("delta optimize %s: commit version %d: %w", t.URL(), v, err)
			}
			if _, err := snap.Update(ctx, t); err != nil {
				return res, err
			}
		}
	}
}
