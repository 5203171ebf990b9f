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
	var add Add
	act := Action{Add: &add}
	for _, k := range sortedKeys(s.Files) {
		add = *s.Files[k]
		add.DataChange = false
		if err := yield(&act); err != nil {
			return err
		}
	}
	retention, known := s.DeletedFileRetention()
	minTS := now.Add(-retention).UnixMilli()
	var r Remove
	act = Action{Remove: &r}
	for _, k := range sortedKeys(s.Tombstones) {
		r = *s.Tombstones[k]
		// A tombstone without deletionTimestamp counts as deleted at 0.
		if known && (r.DeletionTimestamp == nil || *r.DeletionTimestamp <= minTS) {
			continue
		}
		r.DataChange = false
		if err := yield(&act); err != nil {
			return err
		}
	}
	return nil
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
	var buf bytes.Buffer
	chunk := rowGroupRows()
	props := parquet.NewWriterProperties(parquet.WithAllocator(t.mem), parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithDictionaryDefault(false), parquet.WithCreatedBy("flightline"), parquet.WithMaxRowGroupLength(int64(chunk)))
	fw, err := pqarrow.NewFileWriter(checkpointSchema, &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(t.mem)))
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
	size := int64(0)
	err = s.CheckpointActions(time.Now(), func(a *Action) error {
		cb.append(a)
		size++
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
	if err := t.store.Put(ctx, checkpointKey(s.Version), buf.Bytes()); err != nil {
		return fmt.Errorf("delta: write checkpoint %d: %w", s.Version, err)
	}
	lc, _ := json.Marshal(lastCheckpoint{Version: s.Version, Size: size, SizeInBytes: int64(buf.Len()), NumOfAddFiles: int64(len(s.Files))})
	if err := t.store.Put(ctx, logDir+"_last_checkpoint", lc); err != nil {
		return fmt.Errorf("delta: write _last_checkpoint: %w", err)
	}
	return nil
}

// checkpointColumns are the leaf columns read from checkpoints.
var checkpointColumns = []string{"txn", "add.path", "add.partitionValues", "add.size", "add.modificationTime",
	"add.dataChange", "add.stats", "add.tags", "add.deletionVector", "remove.path", "remove.dataChange",
	"remove.deletionTimestamp", "remove.extendedFileMetadata", "remove.partitionValues", "remove.size",
	"metaData", "protocol", "domainMetadata"}

func wantColumn(path string) bool {
	for _, p := range checkpointColumns {
		if path == p || strings.HasPrefix(path, p+".") {
			return true
		}
	}
	return false
}

// readCheckpoint applies the checkpoint of version v (in parts files, 0:
// single file) to s.
func (t *Table) readCheckpoint(ctx context.Context, s *Snapshot, v, parts int64) error {
	keys := []string{checkpointKey(v)}
	if parts > 0 {
		keys = keys[:0]
		for i := int64(1); i <= parts; i++ {
			keys = append(keys, fmt.Sprintf("%s%020d.checkpoint.%010d.%010d.parquet", logDir, v, i, parts))
		}
	}
	var acts []Action
	for _, k := range keys {
		b, err := t.store.Get(ctx, k)
		if errors.Is(err, objstore.ErrNotExist) && t.v2CheckpointAt(ctx, v) {
			return t.errV2Checkpoint(fmt.Sprintf("checkpoint %d", v))
		}
		if err != nil {
			return fmt.Errorf("delta: %s: read checkpoint: %w", t.URL(), err)
		}
		a, err := t.decodeCheckpoint(ctx, b)
		if err != nil {
			return fmt.Errorf("delta: %s: checkpoint %s: %w", t.URL(), k, err)
		}
		acts = append(acts, a...)
	}
	if err := s.Apply(v, acts); err != nil {
		return err
	}
	s.CheckpointVersion = v
	return nil
}

func (t *Table) decodeCheckpoint(ctx context.Context, b []byte) ([]Action, error) {
	pf, err := file.NewParquetReader(bytes.NewReader(b), file.WithReadProps(parquet.NewReaderProperties(t.mem)))
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 4096}, t.mem)
	if err != nil {
		return nil, err
	}
	sc := pf.MetaData().Schema
	var cols []int
	for i := range sc.NumColumns() {
		if wantColumn(sc.Column(i).ColumnPath().String()) {
			cols = append(cols, i)
		}
	}
	rr, err := fr.GetRecordReader(ctx, cols, nil)
	if err != nil {
		return nil, err
	}
	defer rr.Release()
	var out []Action
	var js bytes.Buffer
	for rr.Next() {
		js.Reset()
		if err := array.RecordToJSON(rr.RecordBatch(), &js); err != nil {
			return nil, err
		}
		acts, err := DecodeActions(js.Bytes())
		if err != nil {
			return nil, err
		}
		for _, a := range acts {
			switch {
			case a.Add != nil && a.Add.Path != "":
				out = append(out, Action{Add: a.Add})
			case a.Remove != nil && a.Remove.Path != "":
				out = append(out, Action{Remove: a.Remove})
			case a.MetaData != nil && a.MetaData.SchemaString != "":
				out = append(out, Action{MetaData: a.MetaData})
			case a.Protocol != nil && a.Protocol.MinReaderVersion > 0:
				out = append(out, Action{Protocol: a.Protocol})
			case a.Txn != nil && a.Txn.AppID != "":
				out = append(out, Action{Txn: a.Txn})
			case a.DomainMetadata != nil && a.DomainMetadata.Domain != "":
				out = append(out, Action{DomainMetadata: a.DomainMetadata})
			}
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return out, nil
}
