package deltalog

import (
	"bytes"
	"context"
	"errors"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// decodeLean reads the leanColumns of a checkpoint straight from Arrow
// (no JSON round trip: a checkpoint of a lean snapshot reads every file's
// stats back): fn gets an Add with only Path and Stats set, or a Remove.
// The actions are reused between calls.
func (t *Table) decodeLean(ctx context.Context, b []byte, fn func(Action) error) error {
	pf, err := file.NewParquetReader(bytes.NewReader(b), file.WithReadProps(parquet.NewReaderProperties(t.mem)))
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
		if wantColumn(leanColumns, sc.Column(i).ColumnPath().String()) {
			cols = append(cols, i)
		}
	}
	rr, err := fr.GetRecordReader(ctx, cols, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	var add Add
	var rm Remove
	for rr.Next() {
		rec := rr.RecordBatch()
		adds, removes := structCol(rec, "add"), structCol(rec, "remove")
		aPath, aStats := strField(adds, "path"), strField(adds, "stats")
		rPath := strField(removes, "path")
		for i := range int(rec.NumRows()) {
			switch {
			case aPath != nil && adds.IsValid(i) && aPath.IsValid(i):
				add = Add{Path: aPath.Value(i)}
				if aStats != nil && aStats.IsValid(i) {
					add.Stats = aStats.Value(i)
				}
				if err := fn(Action{Add: &add}); err != nil {
					return err
				}
			case rPath != nil && removes.IsValid(i) && rPath.IsValid(i):
				rm = Remove{Path: rPath.Value(i), DeletionTimestamp: optInt64(removes, "deletionTimestamp", i),
					Size: optInt64(removes, "size", i), ExtendedFileMetadata: optBool(removes, "extendedFileMetadata", i),
					PartitionValues: mapField(removes, "partitionValues", i)}
				if err := fn(Action{Remove: &rm}); err != nil {
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
