package deltalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// fileActionColumns are the add and remove columns decodeArrow decodes
// straight from Arrow.
var fileActionColumns = []string{"add.path", "add.partitionValues", "add.size", "add.modificationTime", "add.dataChange",
	"add.stats", "add.tags", "add.deletionVector", "remove.path", "remove.dataChange", "remove.deletionTimestamp",
	"remove.extendedFileMetadata", "remove.partitionValues", "remove.size"}

// deletionVectorMark stands for a deletion vector decodeArrow saw but did
// not decode: enough for a planner to leave the file alone. A table with
// deletion vectors is never written (CheckWrite), so never checkpointed,
// by this package.
var deletionVectorMark = json.RawMessage(`{}`)

// decodeArrow reads the columns cols (of checkpointColumns' paths) of
// checkpoint r straight from Arrow, a batch of rows at a time, with no
// JSON round trip for files: fn gets each add and remove with the fields
// cols hold (an add with deletionVectorMark for a deletion vector), and
// each protocol, metaData, txn and domainMetadata row (few) decoded
// through JSON. Adds and removes are reused between calls and their
// strings alias the decoder's buffers: they live only during the call
// (strings.Clone what is kept).
func (t *Table) decodeArrow(ctx context.Context, r io.ReaderAt, size int64, cols []string, fn func(Action) error) error {
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
	var idx []int
	for i := range sc.NumColumns() {
		if wantColumn(cols, sc.Column(i).ColumnPath().String()) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	rr, err := fr.GetRecordReader(ctx, idx, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	var add Add
	var rm Remove
	var js bytes.Buffer
	for rr.Next() {
		rec := rr.RecordBatch()
		adds, removes := structCol(rec, "add"), structCol(rec, "remove")
		aPath, aStats := strField(adds, "path"), strField(adds, "stats")
		aDV, _ := child(adds, "deletionVector").(*array.Struct)
		rPath := strField(removes, "path")
		var others []*array.Struct
		for _, name := range []string{"txn", "metaData", "protocol", "domainMetadata"} {
			if s := structCol(rec, name); s != nil {
				others = append(others, s)
			}
		}
	rows:
		for i := range int(rec.NumRows()) {
			switch {
			case aPath != nil && adds.IsValid(i) && aPath.IsValid(i):
				add = Add{Path: aPath.Value(i), PartitionValues: mapField(adds, "partitionValues", i),
					Size: derefInt64(optInt64(adds, "size", i)), ModificationTime: derefInt64(optInt64(adds, "modificationTime", i)),
					DataChange: derefBool(optBool(adds, "dataChange", i)), Tags: StrMap(strMapField(adds, "tags", i))}
				if aStats != nil && aStats.IsValid(i) {
					add.Stats = aStats.Value(i)
				}
				if aDV != nil && aDV.IsValid(i) {
					add.DeletionVector = deletionVectorMark
				}
				if err := fn(Action{Add: &add}); err != nil {
					return err
				}
			case rPath != nil && removes.IsValid(i) && rPath.IsValid(i):
				rm = Remove{Path: rPath.Value(i), DeletionTimestamp: optInt64(removes, "deletionTimestamp", i),
					DataChange: derefBool(optBool(removes, "dataChange", i)),
					Size:       optInt64(removes, "size", i), ExtendedFileMetadata: optBool(removes, "extendedFileMetadata", i),
					PartitionValues: mapField(removes, "partitionValues", i)}
				if err := fn(Action{Remove: &rm}); err != nil {
					return err
				}
			default:
				for _, s := range others {
					if !s.IsValid(i) {
						continue
					}
					a, err := decodeRow(rec, i, &js)
					if err != nil {
						return err
					}
					if a != nil {
						if err := fn(*a); err != nil {
							return err
						}
					}
					continue rows
				}
			}
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// decodeRow decodes row i of rec (a protocol, metaData, txn or
// domainMetadata row) through JSON; nil when it holds none of them.
func decodeRow(rec arrow.RecordBatch, i int, js *bytes.Buffer) (*Action, error) {
	row := rec.NewSlice(int64(i), int64(i+1))
	defer row.Release()
	js.Reset()
	if err := array.RecordToJSON(row, js); err != nil {
		return nil, err
	}
	acts, err := DecodeActions(js.Bytes())
	if err != nil {
		return nil, err
	}
	for _, a := range acts {
		if one, ok := rowAction(a); ok {
			return &one, nil
		}
	}
	return nil, nil
}

func derefInt64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func derefBool(p *bool) bool { return p != nil && *p }

func structCol(rec arrow.RecordBatch, name string) *array.Struct {
	idx := rec.Schema().FieldIndices(name)
	if len(idx) == 0 {
		return nil
	}
	s, _ := rec.Column(idx[0]).(*array.Struct)
	return s
}

func child(s *array.Struct, name string) arrow.Array {
	if s == nil {
		return nil
	}
	i, ok := s.DataType().(*arrow.StructType).FieldIdx(name)
	if !ok {
		return nil
	}
	return s.Field(i)
}

func strField(s *array.Struct, name string) *array.String {
	a, _ := child(s, name).(*array.String)
	return a
}

func optInt64(s *array.Struct, name string, i int) *int64 {
	a, ok := child(s, name).(*array.Int64)
	if !ok || a.IsNull(i) {
		return nil
	}
	v := a.Value(i)
	return &v
}

func optBool(s *array.Struct, name string, i int) *bool {
	a, ok := child(s, name).(*array.Boolean)
	if !ok || a.IsNull(i) {
		return nil
	}
	v := a.Value(i)
	return &v
}

func mapField(s *array.Struct, name string, i int) NullStrMap {
	m, ok := child(s, name).(*array.Map)
	if !ok || m.IsNull(i) {
		return nil
	}
	keys, _ := m.Keys().(*array.String)
	items, _ := m.Items().(*array.String)
	if keys == nil || items == nil {
		return nil
	}
	lo, hi := m.ValueOffsets(i)
	if lo == hi {
		return noPartitionValues
	}
	out := make(NullStrMap, hi-lo)
	for j := int(lo); j < int(hi); j++ {
		if items.IsNull(j) {
			out[keys.Value(j)] = nil
			continue
		}
		v := items.Value(j)
		out[keys.Value(j)] = &v
	}
	return out
}

// strMapField is mapField without null items (tags).
func strMapField(s *array.Struct, name string, i int) map[string]string {
	m := mapField(s, name, i)
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}
