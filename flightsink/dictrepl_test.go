package flightsink_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
)

// dictBatch is n rows of a dictionary<int32, utf8> column "d" (values
// prefix0..prefix2) and, nested in a struct "s", another one.
func dictBatch(mem memory.Allocator, prefix string, n int) arrow.RecordBatch {
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "d", Type: dt, Nullable: true},
		{Name: "s", Type: arrow.StructOf(arrow.Field{Name: "e", Type: dt, Nullable: true}), Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	db := b.Field(0).(*array.BinaryDictionaryBuilder)
	sb := b.Field(1).(*array.StructBuilder)
	eb := sb.FieldBuilder(0).(*array.BinaryDictionaryBuilder)
	for i := range n {
		_ = db.AppendString(fmt.Sprintf("%s%d", prefix, i%3))
		sb.Append(true)
		_ = eb.AppendString(fmt.Sprintf("%s-e%d", prefix, i%2))
	}
	return b.NewRecordBatch()
}

// dictValues reads the rows of "d" and "s.e" of every file the Dir sink
// committed under root.
func dictValues(t *testing.T, root string) []string {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	files, _ := filepath.Glob(filepath.Join(root, "*", "*.arrow"))
	var out []string
	for _, name := range files {
		f, err := os.Open(name)
		require.NoError(t, err)
		r, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
		require.NoError(t, err)
		for i := range r.NumRecords() {
			rec, err := r.RecordBatch(i)
			require.NoError(t, err)
			require.NoError(t, array.ValidateRecordFull(rec))
			d := rec.Column(0).(*array.Dictionary)
			e := rec.Column(1).(*array.Struct).Field(0).(*array.Dictionary)
			for j := range int(rec.NumRows()) {
				out = append(out, d.Dictionary().(*array.String).Value(d.GetValueIndex(j))+"/"+
					e.Dictionary().(*array.String).Value(e.GetValueIndex(j)))
			}
		}
		r.Close()
		f.Close()
	}
	return out
}

func wantDictValues(prefixes ...string) []string {
	var out []string
	for _, p := range prefixes {
		for i := range 10 {
			out = append(out, fmt.Sprintf("%s%d/%s-e%d", p, i%3, p, i%2))
		}
	}
	return out
}

// A stream whose dictionaries are replaced between batches (as arrow
// writers do when a batch's dictionary differs) commits to the Dir sink:
// an Arrow IPC file holds one dictionary per field, so a group of such
// batches is written as one batch with its dictionaries unified. It used to
// fail with UNAVAILABLE, which a retry could never fix.
func TestDirDictionaryReplacement(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()

	t.Run("group", func(t *testing.T) {
		root := t.TempDir()
		d, err := flightsink.NewDir(root, nil)
		require.NoError(t, err)
		w, _, err := d.Open(ctx, flightsink.Pipeline{ID: "p", Target: "t"})
		require.NoError(t, err)
		a, b, c := dictBatch(mem, "a", 10), dictBatch(mem, "b", 10), dictBatch(mem, "c", 10)
		defer a.Release()
		defer b.Release()
		defer c.Release()
		require.NoError(t, w.(flightsink.GroupWriter).WriteBatches(ctx, []flightsink.Batch{
			{Rec: a, CP: doputtest.Checkpoint(1)}, {Rec: b, CP: doputtest.Checkpoint(2)}, {Rec: c, CP: doputtest.Checkpoint(3)}}))
		require.NoError(t, w.Close(ctx))
		require.Equal(t, wantDictValues("a", "b", "c"), dictValues(t, root))
	})

	t.Run("DoPut", func(t *testing.T) {
		root := t.TempDir()
		d, err := flightsink.NewDir(root, nil)
		require.NoError(t, err)
		a, b := dictBatch(mem, "a", 10), dictBatch(mem, "b", 10)
		msgs := doputtest.Encode(a.Schema(), []arrow.RecordBatch{a, b})
		a.Release()
		b.Release()
		srv := flightsink.NewServer(d, flightsink.WithAllocator(mem), flightsink.WithLogger(slog.New(slog.DiscardHandler)))
		acks, err := doputtest.InProcess(ctx, srv, doputtest.FlightData(doputtest.Descriptor, msgs))
		require.NoError(t, err)
		require.Len(t, acks, 2)
		require.Equal(t, wantDictValues("a", "b"), dictValues(t, root))
	})
}
