package parquetw

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// flat reports whether every top-level field of sc is one Parquet leaf
// column (no nested or extension types), so that column i of a batch is
// leaf i of the file.
func flat(sc *arrow.Schema) bool {
	for _, f := range sc.Fields() {
		switch f.Type.(type) {
		case arrow.NestedType, arrow.ExtensionType:
			return false
		}
	}
	return true
}

// writeParallel writes rec as one file with one buffered row group whose
// columns are encoded by up to workers goroutines at once. It writes what
// pqarrow.FileWriter.Write writes for the same properties: the same schema
// conversion and key-value metadata, the same leaf values and definition
// levels per column, each column's last page built and compressed by the
// goroutine that encoded it (flushLastPage); closing the row group then
// writes the dictionary pages and copies the columns into w in order.
func writeParallel(w io.Writer, rec arrow.RecordBatch, props *parquet.WriterProperties, aprops pqarrow.ArrowWriterProperties, workers int) (Stats, error) {
	sc := rec.Schema()
	pqschema, err := pqarrow.ToParquet(sc, props, aprops)
	if err != nil {
		return Stats{}, fmt.Errorf("parquetw: %w", err)
	}
	meta := make(metadata.KeyValueMetadata, 0, sc.Metadata().Len())
	for i, k := range sc.Metadata().Keys() {
		meta.Append(k, sc.Metadata().Values()[i])
	}
	fw, err := file.NewParquetWriterWithError(w, pqschema.Root(), file.WithWriterProps(props), file.WithWriteMetadata(meta))
	if err != nil {
		return Stats{}, fmt.Errorf("parquetw: %w", err)
	}
	rg, err := fw.AppendBufferedRowGroupChecked()
	if err != nil {
		fw.Close()
		return Stats{}, fmt.Errorf("parquetw: %w", err)
	}

	var (
		st   Stats
		wg   sync.WaitGroup
		next = make(chan int)
		errs = make([]error, rec.NumCols())
	)
	// NullN caches a count it computes (a slice's, a concatenation's) in
	// the array: compute them all here, not in two goroutines at once.
	for _, c := range rec.Columns() {
		settleNullCounts(c)
	}
	wg.Add(1)
	go func() { defer wg.Done(); st = Compute(rec) }()
	for range min(workers, int(rec.NumCols())) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var defs []int16
			for i := range next {
				defs, errs[i] = writeColumn(rg, i, rec.Column(i), sc.Field(i).Nullable, aprops, defs)
			}
		}()
	}
	for i := range int(rec.NumCols()) {
		next <- i
	}
	close(next)
	wg.Wait()

	for _, e := range errs {
		if e != nil {
			err = e
			break
		}
	}
	if err != nil {
		// Close discards the columns of a row group whose row counts
		// differ; either way everything is released.
		rg.Close()
		fw.Close()
		return Stats{}, fmt.Errorf("parquetw: %w", err)
	}
	if err := rg.Close(); err != nil {
		fw.Close()
		return Stats{}, fmt.Errorf("parquetw: %w", err)
	}
	if err := fw.Close(); err != nil {
		return Stats{}, fmt.Errorf("parquetw: %w", err)
	}
	return st, nil
}

// writeColumn encodes col as leaf i of rg, with the definition levels the
// serial path computes for a top-level leaf: none for a required column,
// 1 for a value and 0 for a null otherwise. defs is a scratch slice,
// returned for reuse.
func writeColumn(rg file.BufferedRowGroupWriter, i int, col arrow.Array, nullable bool, aprops pqarrow.ArrowWriterProperties, defs []int16) ([]int16, error) {
	cw, err := rg.Column(i)
	if err != nil {
		return defs, err
	}
	var levels []int16
	if cw.LevelInfo().DefLevel > 0 {
		defs = defs[:0]
		for j := range col.Len() {
			if col.IsValid(j) {
				defs = append(defs, 1)
			} else {
				defs = append(defs, 0)
			}
		}
		levels = defs
	}
	ctx := pqarrow.NewArrowWriteContext(context.Background(), &aprops)
	if err := pqarrow.WriteArrowToColumn(ctx, cw, col, levels, nil, nullable); err != nil {
		return defs, err
	}
	return defs, flushLastPage(cw)
}

// flushLastPage builds (and compresses) the column's last data page on
// the calling goroutine, where closing the row group would do it later,
// serially, column after column: the same page with the same bytes, since
// Close flushes only a page that holds values. Whether it holds any is
// read from the page statistics (values and nulls since the last page;
// reset with every page): without them the page is left to Close.
func flushLastPage(cw file.ColumnChunkWriter) error {
	f, ok := cw.(interface{ FlushCurrentPage() error })
	if !ok {
		return nil
	}
	ps := cw.PageStatistics()
	if ps == nil || !ps.HasNullCount() || ps.NumValues()+ps.NullCount() == 0 {
		return nil
	}
	return f.FlushCurrentPage()
}

// settleNullCounts computes (and so caches) the null counts of a and of
// the arrays it holds.
func settleNullCounts(a arrow.Array) {
	a.NullN()
	switch a := a.(type) {
	case *array.Struct:
		for i := range a.NumField() {
			settleNullCounts(a.Field(i))
		}
	case array.ListLike:
		settleNullCounts(a.ListValues())
	case *array.Dictionary:
		settleNullCounts(a.Dictionary())
	}
}
