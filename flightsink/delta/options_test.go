package delta_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	delta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
)

// The Parquet options reach the files the sink writes; bad values are
// refused at construction; nil logger and allocator mean the defaults.
func TestParquetOptionsAndNilDefaults(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := delta.New(ctx, delta.Config{URI: dir}, delta.ParquetRowGroupRows(4), delta.ParquetDictionary("never"), delta.Logger(nil), delta.Allocator(nil))
	require.NoError(t, err)
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "pq"})
	require.NoError(t, err)
	rec := sinktest.Batch(memory.DefaultAllocator, 0, 10)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(10)))
	rec.Release()
	require.NoError(t, w.Close(ctx))

	st, err := objstore.NewLocal(dir)
	require.NoError(t, err)
	snap, err := deltalog.NewTable(st, nil).Snapshot(ctx)
	require.NoError(t, err)
	require.Len(t, snap.Files, 1)
	for _, f := range snap.SortedFiles() {
		b, err := st.Get(ctx, f.Path)
		require.NoError(t, err)
		pf, err := file.NewParquetReader(bytes.NewReader(b))
		require.NoError(t, err)
		require.Equal(t, 3, pf.NumRowGroups(), "10 rows in groups of at most 4")
		for c := range pf.MetaData().Schema.NumColumns() {
			col, err := pf.RowGroup(0).MetaData().ColumnChunk(c)
			require.NoError(t, err)
			require.False(t, col.HasDictionaryPage(), "column %d: dictionary encoding is off", c)
		}
		pf.Close()
	}

	for _, o := range []delta.Option{delta.ParquetDictionary("sometimes"), delta.ParquetRowGroupRows(0)} {
		_, err := delta.New(ctx, delta.Config{URI: dir}, o)
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
	}
}
