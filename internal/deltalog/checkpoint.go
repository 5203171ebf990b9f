package deltalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/flightline/flightline/internal/objstore"
)

func strMapType() arrow.DataType {
	m := arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String)
	m.SetItemNullable(true)
	return m
}

func nf(name string, t arrow.DataType) arrow.Field {
	return arrow.Field{Name: name, Type: t, Nullable: true}
}

// checkpointSchema is the schema of classic Delta checkpoints (the subset
// of columns this package writes; readers treat missing ones as null).
var checkpointSchema = arrow.NewSchema([]arrow.Field{
	nf("txn", arrow.StructOf(nf("appId", arrow.BinaryTypes.String), nf("version", arrow.PrimitiveTypes.Int64),
		nf("lastUpdated", arrow.PrimitiveTypes.Int64))),
	nf("add", arrow.StructOf(nf("path", arrow.BinaryTypes.String), nf("partitionValues", strMapType()),
		nf("size", arrow.PrimitiveTypes.Int64), nf("modificationTime", arrow.PrimitiveTypes.Int64),
		nf("dataChange", arrow.FixedWidthTypes.Boolean), nf("stats", arrow.BinaryTypes.String),
		nf("tags", strMapType()))),
	nf("remove", arrow.StructOf(nf("path", arrow.BinaryTypes.String), nf("deletionTimestamp", arrow.PrimitiveTypes.Int64),
		nf("dataChange", arrow.FixedWidthTypes.Boolean), nf("extendedFileMetadata", arrow.FixedWidthTypes.Boolean),
		nf("partitionValues", strMapType()), nf("size", arrow.PrimitiveTypes.Int64))),
	nf("metaData", arrow.StructOf(nf("id", arrow.BinaryTypes.String), nf("name", arrow.BinaryTypes.String),
		nf("description", arrow.BinaryTypes.String),
		nf("format", arrow.StructOf(nf("provider", arrow.BinaryTypes.String), nf("options", strMapType()))),
		nf("schemaString", arrow.BinaryTypes.String), nf("partitionColumns", arrow.ListOf(arrow.BinaryTypes.String)),
		nf("configuration", strMapType()), nf("createdTime", arrow.PrimitiveTypes.Int64))),
	nf("protocol", arrow.StructOf(nf("minReaderVersion", arrow.PrimitiveTypes.Int32), nf("minWriterVersion", arrow.PrimitiveTypes.Int32),
		nf("readerFeatures", arrow.ListOf(arrow.BinaryTypes.String)), nf("writerFeatures", arrow.ListOf(arrow.BinaryTypes.String)))),
	nf("domainMetadata", arrow.StructOf(nf("domain", arrow.BinaryTypes.String), nf("configuration", arrow.BinaryTypes.String),
		nf("removed", arrow.FixedWidthTypes.Boolean))),
}, nil)

// DefaultDeletedFileRetention is the tombstone retention of a table
// without delta.deletedFileRetentionDuration (the protocol's default).
const DefaultDeletedFileRetention = 7 * 24 * time.Hour

// DeletedFileRetention returns the table's tombstone retention
// (delta.deletedFileRetentionDuration, e.g. "interval 1 week"). ok is
// false when the property is set but not understood: keep every tombstone
// then.
func (s *Snapshot) DeletedFileRetention() (d time.Duration, ok bool) {
	if s.Metadata == nil {
		return DefaultDeletedFileRetention, true
	}
	v, set := s.Metadata.Configuration["delta.deletedFileRetentionDuration"]
	if !set {
		return DefaultDeletedFileRetention, true
	}
	return parseInterval(v)
}

// parseInterval parses Spark's calendar interval strings without months:
// "interval 1 week", "interval 7 days 12 hours", "168 hours".
func parseInterval(v string) (time.Duration, bool) {
	fs := strings.Fields(strings.ToLower(strings.TrimSpace(v)))
	if len(fs) > 0 && fs[0] == "interval" {
		fs = fs[1:]
	}
	if len(fs) == 0 || len(fs)%2 != 0 {
		return 0, false
	}
	units := map[string]time.Duration{"week": 7 * 24 * time.Hour, "day": 24 * time.Hour, "hour": time.Hour,
		"minute": time.Minute, "second": time.Second, "millisecond": time.Millisecond, "microsecond": time.Microsecond}
	var d time.Duration
	for i := 0; i < len(fs); i += 2 {
		n, err := strconv.ParseInt(fs[i], 10, 64)
		u, ok := units[strings.TrimSuffix(fs[i+1], "s")]
		if err != nil || !ok || n < 0 {
			return 0, false
		}
		d += time.Duration(n) * u
	}
	return d, true
}

// CheckpointActions calls yield with each action a checkpoint of s holds,
// in order: protocol, metaData, txns, live domains, the active files by
// path and the tombstones (removes) deleted after now minus the table's
// retention, as the protocol asks. Files and removes are passed as copies
// with dataChange false, valid only during the call: nothing per file is
// kept.
func (s *Snapshot) CheckpointActions(now time.Time, yield func(*Action) error) error {
	if err := yield(&Action{Protocol: s.Protocol}); err != nil {
		return err
	}
	if err := yield(&Action{MetaData: s.Metadata}); err != nil {
		return err
	}
	for _, k := range sortedKeys(s.Txns) {
		t := s.Txns[k]
		if err := yield(&Action{Txn: &t}); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(s.Domains) {
		d := s.Domains[k]
		if err := yield(&Action{DomainMetadata: &d}); err != nil {
			return err
		}
	}
	return yieldSince(s, nil, s.expiredBefore(now), yield)
}

// checkpointChunk is how many rows a checkpoint builds in Arrow before it
// encodes them as one Parquet row group: the checkpoint's transient Arrow
// memory is bounded by it, not by the table's file count.
const checkpointChunk = 8192

var checkpointRowGroupRows atomic.Int64

func rowGroupRows() int {
	if n := checkpointRowGroupRows.Load(); n > 0 {
		return int(n)
	}
	return checkpointChunk
}

// SetCheckpointRowGroupRows makes checkpoints written from now on use row
// groups of n rows instead of 8192 (n <= 0: the default) and returns a
// function restoring the previous value. For tests: readers must find a
// checkpoint's actions across its row groups.
func SetCheckpointRowGroupRows(n int) (restore func()) {
	old := checkpointRowGroupRows.Swap(int64(n))
	return func() { checkpointRowGroupRows.Store(old) }
}

// WriteCheckpoint writes a classic single-file checkpoint of s
// (NNN.checkpoint.parquet) and then points _last_checkpoint at it. Both are
// plain puts: any writer's checkpoint of version v has the same content.
// The rows are appended straight to Arrow builders, a row group of at
// most checkpointChunk rows at a time; what grows with the table is the
// encoded file (about a hundred bytes per active file plus its stats,
// compressed) and the sorted list of paths.
func (t *Table) WriteCheckpoint(ctx context.Context, s *Snapshot) error {
	if s.Version < 0 || s.Protocol == nil || s.Metadata == nil {
		return fmt.Errorf("delta: checkpoint of a table without protocol or metadata")
	}
	ow, err := objstore.NewWriter(ctx, t.store, checkpointKey(s.Version))
	if err != nil {
		return fmt.Errorf("delta: write checkpoint %d: %w", s.Version, err)
	}
	defer ow.Abort() // after a Commit it does nothing
	out := &objstore.Counting{W: ow}
	chunk := rowGroupRows()
	props := parquet.NewWriterProperties(parquet.WithAllocator(t.mem), parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithDictionaryDefault(false), parquet.WithCreatedBy("flightline"), parquet.WithMaxRowGroupLength(int64(chunk)))
	fw, err := pqarrow.NewFileWriter(checkpointSchema, out, props, pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(t.mem)))
	if err != nil {
		return err
	}
	cb := newCPBuilder(t.mem)
	defer cb.release()
	flush := func() error {
		rec := cb.record()
		defer rec.Release()
		if err := fw.Write(rec); err != nil {
			return fmt.Errorf("delta: write checkpoint: %w", err)
		}
		return nil
	}
	size, files, small := int64(0), int64(0), int64(0)
	err = t.checkpointActions(ctx, s, time.Now(), func(a *Action) error {
		cb.append(a)
		size++
		if a.Add != nil {
			files++
			if s.small(a.Add) {
				small++
			}
		}
		if cb.rows() >= chunk {
			return flush()
		}
		return nil
	})
	if err == nil && cb.rows() > 0 {
		err = flush()
	}
	if err != nil {
		fw.Close()
		return err
	}
	if err := fw.Close(); err != nil {
		return fmt.Errorf("delta: write checkpoint: %w", err)
	}
	if err := ow.Commit(ctx); err != nil {
		return fmt.Errorf("delta: write checkpoint %d: %w", s.Version, err)
	}
	lc, _ := json.Marshal(lastCheckpoint{Version: s.Version, Size: size, SizeInBytes: out.N, NumOfAddFiles: files})
	if err := t.store.Put(ctx, logDir+"_last_checkpoint", lc); err != nil {
		return fmt.Errorf("delta: write _last_checkpoint: %w", err)
	}
	switch {
	case s.streamed:
		s.checkpointed(files, small)
	case s.lean:
		// The new checkpoint holds the stats and tombstones: drop them.
		for _, a := range s.Files {
			if a.Stats != "" || !a.statsElided {
				c := *a
				c.Stats, c.statsElided = "", true
				s.Files[a.Path] = &c
			}
		}
		s.Tombstones = map[string]*Remove{}
		s.CheckpointVersion, s.checkpointParts = s.Version, 0
	}
	return nil
}

// checkpointActions is CheckpointActions, for a lean snapshot loaded from
// (or last checkpointed at) a checkpoint with what it left out streamed
// from that checkpoint: the rows of its files still active, with their
// stats, and its tombstones unexpired and not since re-added; then the
// files and tombstones of the commits since. Files come in that order, not
// by path.
func (t *Table) checkpointActions(ctx context.Context, s *Snapshot, now time.Time, yield func(*Action) error) error {
	if !s.lean || s.CheckpointVersion < 0 {
		return s.CheckpointActions(now, yield)
	}
	for _, a := range []*Action{{Protocol: s.Protocol}, {MetaData: s.Metadata}} {
		if err := yield(a); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(s.Txns) {
		tx := s.Txns[k]
		if err := yield(&Action{Txn: &tx}); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(s.Domains) {
		d := s.Domains[k]
		if err := yield(&Action{DomainMetadata: &d}); err != nil {
			return err
		}
	}
	expired := s.expiredBefore(now)
	if s.streamed {
		return t.streamedCheckpointActions(ctx, s, expired, yield)
	}
	defer func() {
		for _, a := range s.Files {
			a.seen = false
		}
	}()
	var add Add
	act := Action{Add: &add}
	err := t.eachCheckpointAction(ctx, s.CheckpointVersion, s.checkpointParts, leanColumns, func(a Action) error {
		switch {
		case a.Add != nil:
			cur, ok := s.Files[a.Add.Path]
			if !ok || !cur.statsElided || cur.seen {
				return nil
			}
			cur.seen = true
			add = *cur
			add.Stats, add.DataChange = a.Add.Stats, false
			return yield(&act)
		case a.Remove != nil:
			if _, live := s.Files[a.Remove.Path]; live {
				return nil
			}
			if _, newer := s.Tombstones[a.Remove.Path]; newer || expired(a.Remove) {
				return nil
			}
			a.Remove.DataChange = false
			return yield(&Action{Remove: a.Remove})
		}
		return nil
	})
	if err != nil && !errors.Is(err, objstore.ErrNotExist) {
		return fmt.Errorf("delta: checkpoint %d of a lean snapshot: %w", s.Version, err)
	}
	// The previous checkpoint gone (a cleanup deleted it): the files
	// below are written without the stats left in it, and its tombstones
	// are lost; the checkpoint is still a valid one (stats are optional).
	// Added since (with stats), or, should the old checkpoint have lost
	// it, without.
	return yieldSince(s, func(a *Add) bool { return a.seen }, expired, yield)
}

// rowAction returns the one action a checkpoint row decoded through JSON
// holds (the row's other columns decode as empty structs), false when it
// holds none.
func rowAction(a Action) (Action, bool) {
	switch {
	case a.Add != nil && a.Add.Path != "":
		return Action{Add: a.Add}, true
	case a.Remove != nil && a.Remove.Path != "":
		return Action{Remove: a.Remove}, true
	case a.MetaData != nil && a.MetaData.SchemaString != "":
		return Action{MetaData: a.MetaData}, true
	case a.Protocol != nil && a.Protocol.MinReaderVersion > 0:
		return Action{Protocol: a.Protocol}, true
	case a.Txn != nil && a.Txn.AppID != "":
		return Action{Txn: a.Txn}, true
	case a.DomainMetadata != nil && a.DomainMetadata.Domain != "":
		return Action{DomainMetadata: a.DomainMetadata}, true
	}
	return Action{}, false
}

// checkpointColumns are the leaf columns read from checkpoints.
var checkpointColumns = []string{"txn", "add.path", "add.partitionValues", "add.size", "add.modificationTime",
	"add.dataChange", "add.stats", "add.tags", "add.deletionVector", "remove.path", "remove.dataChange",
	"remove.deletionTimestamp", "remove.extendedFileMetadata", "remove.partitionValues", "remove.size",
	"metaData", "protocol", "domainMetadata"}

// leanColumns are the columns a lean snapshot's checkpoint reads back
// from the previous one: the stats of its files (the rest of each file is
// in memory) and its tombstones.
var leanColumns = []string{"add.path", "add.stats", "remove.path", "remove.dataChange", "remove.deletionTimestamp",
	"remove.extendedFileMetadata", "remove.partitionValues", "remove.size"}

func wantColumn(cols []string, path string) bool {
	for _, p := range cols {
		if path == p || strings.HasPrefix(path, p+".") {
			return true
		}
	}
	return false
}

// readCheckpoint applies the checkpoint of version v (in parts files, 0:
// single file) to s, a batch of rows at a time: the decoded actions of the
// whole checkpoint are never held at once. A lean snapshot keeps no
// tombstones of the checkpoint and no stats of its files (see
// Table.LeanSnapshot).
func (t *Table) readCheckpoint(ctx context.Context, s *Snapshot, v, parts int64) error {
	if s.streamed {
		err := t.eachCheckpointAction(ctx, v, parts, loadColumns, func(a Action) error {
			switch {
			case a.Add != nil:
				s.baseFiles++
				if s.small(a.Add) {
					s.baseSmall++
				}
				return nil
			case a.Remove != nil:
				return nil
			}
			return s.apply(a)
		})
		if err != nil {
			return err
		}
		s.Version, s.CheckpointVersion, s.checkpointParts = v, v, parts
		return nil
	}
	err := t.eachCheckpointAction(ctx, v, parts, nil, func(a Action) error {
		if s.lean {
			switch {
			case a.Remove != nil:
				return nil
			case a.Add != nil:
				a.Add.Stats, a.Add.statsElided = "", true
			}
		}
		return s.apply(a)
	})
	if err != nil {
		return err
	}
	s.Version, s.CheckpointVersion, s.checkpointParts = v, v, parts
	return nil
}

// eachCheckpointAction calls fn with each action of the checkpoint of
// version v, in file order. The checkpoint is read in ranges
// (objstore.OpenObject), a row group at a time. With cols it reads only
// those columns, straight from Arrow (decodeArrow: fn's strings alias the
// decoder's buffers); nil cols decode every checkpointColumns column
// through JSON.
func (t *Table) eachCheckpointAction(ctx context.Context, v, parts int64, cols []string, fn func(Action) error) error {
	keys := []string{checkpointKey(v)}
	if parts > 0 {
		keys = keys[:0]
		for i := int64(1); i <= parts; i++ {
			keys = append(keys, fmt.Sprintf("%s%020d.checkpoint.%010d.%010d.parquet", logDir, v, i, parts))
		}
	}
	for _, k := range keys {
		o, err := objstore.OpenObject(ctx, t.store, k)
		if errors.Is(err, objstore.ErrNotExist) && t.v2CheckpointAt(ctx, v) {
			return t.errV2Checkpoint(fmt.Sprintf("checkpoint %d", v))
		}
		if err != nil {
			return fmt.Errorf("delta: %s: read checkpoint: %w", t.URL(), err)
		}
		if cols != nil {
			err = t.decodeArrow(ctx, o, o.Size(), cols, fn)
		} else {
			err = t.decodeCheckpointEach(ctx, o, o.Size(), fn)
		}
		o.Close()
		if err != nil {
			return fmt.Errorf("delta: %s: checkpoint %s: %w", t.URL(), k, err)
		}
	}
	return nil
}

func (t *Table) decodeCheckpointEach(ctx context.Context, r io.ReaderAt, size int64, fn func(Action) error) error {
	pf, err := file.NewParquetReader(io.NewSectionReader(r, 0, size), file.WithReadProps(parquet.NewReaderProperties(t.mem)))
	if err != nil {
		return err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 4096}, t.mem)
	if err != nil {
		return err
	}
	sc := pf.MetaData().Schema
	var cols []int
	for i := range sc.NumColumns() {
		if wantColumn(checkpointColumns, sc.Column(i).ColumnPath().String()) {
			cols = append(cols, i)
		}
	}
	rr, err := fr.GetRecordReader(ctx, cols, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	var js bytes.Buffer
	for rr.Next() {
		js.Reset()
		if err := array.RecordToJSON(rr.RecordBatch(), &js); err != nil {
			return err
		}
		acts, err := DecodeActions(js.Bytes())
		if err != nil {
			return err
		}
		for _, a := range acts {
			if one, ok := rowAction(a); ok {
				if err := fn(one); err != nil {
					return err
				}
			}
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// CheckpointStats calls fn with the path and stats string of every add
// action of the checkpoint s was loaded from or last wrote (none when it
// has none): the stats a lean snapshot left in the checkpoint (see
// Table.LeanSnapshot), for a writer that needs some of them (the Delta
// sink's merge prunes by key ranges). It reads the whole checkpoint, a
// batch of rows at a time. fn's strings may alias the decoder's buffers:
// they live only during the call (copy what is kept).
func (t *Table) CheckpointStats(ctx context.Context, s *Snapshot, fn func(path, stats string)) error {
	if s.CheckpointVersion < 0 {
		return nil
	}
	return t.eachCheckpointAction(ctx, s.CheckpointVersion, s.checkpointParts, leanColumns, func(a Action) error {
		if a.Add != nil && a.Add.Stats != "" {
			fn(a.Add.Path, a.Add.Stats)
		}
		return nil
	})
}
