package iceberg

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	iceberg "github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"github.com/flightline/flightline/internal/parquetw"
)

// errSlowPath: writeParquetw does not apply to this table or batch;
// iceberg-go's WriteRecords writes it.
var errSlowPath = errors.New("iceberg sink: not for the parquetw path")

// writeParquetw writes rec (already storable) as one data file of tbl
// with internal/parquetw, the Parquet writer the Delta sink uses, instead
// of iceberg-go's WriteRecords: dictionary encoding only where it pays and
// columns encoded in parallel (issue 34's profile: pqarrow's dictionary
// hashing on every column was a quarter of the sink's CPU). The file's
// columns carry the table's field ids (PARQUET:field_id), its codec and
// level are the table's (write.parquet.compression-codec, -level), and its
// DataFile (metrics from the Parquet footer, as iceberg-go computes them
// for files it adds) comes from table.FileToDataFile. It applies to
// unpartitioned tables and flat batches whose column types are the
// table's; anything else returns errSlowPath. A table column the batch
// lacks is written as nulls.
func writeParquetw(ctx context.Context, mem memory.Allocator, tbl *table.Table, rec arrow.RecordBatch) (iceberg.DataFile, error) {
	if !tbl.Spec().IsUnpartitioned() {
		return nil, errSlowPath
	}
	codec, level, ok := tableCodec(tbl.Properties())
	if !ok {
		return nil, errSlowPath
	}
	want, err := table.SchemaToArrowSchema(tbl.Schema(), nil, true, false)
	if err != nil {
		return nil, errSlowPath
	}
	at := make(map[string]int, rec.NumCols())
	for i, f := range rec.Schema().Fields() {
		at[f.Name] = i
	}
	cols := make([]arrow.Array, 0, len(want.Fields()))
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, f := range want.Fields() {
		if nested(f.Type) {
			return nil, errSlowPath
		}
		i, ok := at[f.Name]
		if !ok {
			if !f.Nullable {
				return nil, errSlowPath
			}
			cols = append(cols, array.MakeArrayOfNull(mem, f.Type, int(rec.NumRows())))
			continue
		}
		c := rec.Column(i)
		if !arrow.TypeEqual(c.DataType(), f.Type) || (!f.Nullable && c.NullN() > 0) {
			return nil, errSlowPath
		}
		c.Retain()
		cols = append(cols, c)
	}
	if len(at) > len(cols) {
		return nil, errSlowPath // a batch column the table lacks
	}
	out := array.NewRecordBatch(want, cols, rec.NumRows())
	defer out.Release()

	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	wfs, ok := fs.(icebergio.WriteFileIO)
	if !ok {
		return nil, errSlowPath
	}
	loc, err := tbl.LocationProvider()
	if err != nil {
		return nil, err
	}
	path := loc.NewDataLocation(rand.Text() + "-flightline.parquet")
	f, err := wfs.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	// Only Write: the Parquet writer closes a sink that can be closed, and
	// the close error is checked here.
	_, err = parquetw.Write(struct{ io.Writer }{f}, out, parquetw.Allocator(mem), parquetw.Compression(codec, level), parquetw.KeepTimestampUnit())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = wfs.Remove(path)
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	df, err := table.FileToDataFile(ctx, fs, path, tbl.Schema(), tbl.Spec(), 0, tbl.Properties())
	if err != nil {
		_ = wfs.Remove(path)
		return nil, fmt.Errorf("data file %s: %w", path, err)
	}
	return df, nil
}

// nested reports whether t has children (their field ids would have to be
// carried too: left to WriteRecords).
func nested(t arrow.DataType) bool {
	_, ok := t.(arrow.NestedType)
	return ok
}

// tableCodec is the Parquet codec and level a table's properties name, as
// iceberg-go reads them (zstd, level -1: the codec's default, when unset).
func tableCodec(props iceberg.Properties) (compress.Compression, int, bool) {
	level := props.GetInt(table.ParquetCompressionLevelKey, -1)
	if level == -1 {
		level = compress.DefaultCompressionLevel
	}
	switch props.Get(table.ParquetCompressionKey, table.ParquetCompressionDefault) {
	case "zstd":
		return compress.Codecs.Zstd, level, true
	case "snappy":
		return compress.Codecs.Snappy, level, true
	case "gzip":
		return compress.Codecs.Gzip, level, true
	case "uncompressed":
		return compress.Codecs.Uncompressed, level, true
	case "lz4raw":
		return compress.Codecs.Lz4Raw, level, true
	}
	return 0, 0, false
}
