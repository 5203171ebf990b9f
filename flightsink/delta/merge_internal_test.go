package delta

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
)

// ops builds a change batch of ids with _op op (v is "v<id>").
func opsBatch(mem memory.Allocator, op string, ids ...int64) arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "v", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "_op", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	for _, id := range ids {
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append("v" + string(rune('a'+id%26)))
		b.Field(2).(*array.StringBuilder).Append(op)
	}
	return b.NewRecordBatch()
}

// A background compaction that read its inputs before a merge removed one
// of them yields: committing would bring back the deleted row's file.
// One that commits first leaves the merge to find the keys in its file.
func TestCompactionRacingMerge(t *testing.T) {
	for _, mergeFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "merge-first", false: "compaction-first"}[mergeFirst], func(t *testing.T) {
			ctx := context.Background()
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			s, err := New(ctx, Config{URI: t.TempDir(), Compaction: "off", Vacuum: "off", TargetFileSize: 1 << 20,
				Mode: ModeMerge, Key: []string{"id"}}, Allocator(mem))
			require.NoError(t, err)
			wr, _, err := s.Open(ctx, flightsink.Pipeline{ID: "m"})
			require.NoError(t, err)
			w := wr.(*writer)
			n := int64(0)
			write := func(op string, ids ...int64) {
				rec := opsBatch(mem, op, ids...)
				defer rec.Release()
				n++
				require.NoError(t, w.WriteBatch(ctx, rec, checkpoint.Positions{"m/0": n}.Encode()))
			}
			for i := range int64(4) {
				write("insert", i*10, i*10+1)
			}
			inputs := planCompaction(w.snap, s.o.target, 2, nil)
			require.Len(t, inputs, 4)
			r, err := rewrite(ctx, w.t.Store(), mem, inputs)
			require.NoError(t, err)
			var committed bool
			if mergeFirst {
				write("delete", 0)
				write("update", 11)
				committed = w.commitCompaction(ctx, r, time.Now())
				require.False(t, committed, "a merge removed its inputs: the compaction yields")
			} else {
				committed = w.commitCompaction(ctx, r, time.Now())
				require.True(t, committed)
				write("delete", 0)
				write("update", 11)
				require.Len(t, w.snap.Files, 2, "the compacted file was rewritten, plus the update's file")
			}
			var ids []int64
			for _, f := range w.snap.SortedFiles() {
				err := readFile(ctx, mustGet(t, w, f.Path), mem, nil, func(rec arrow.RecordBatch) error {
					ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
					return nil
				})
				require.NoError(t, err)
			}
			require.ElementsMatch(t, []int64{1, 10, 11, 20, 21, 30, 31}, ids, "0 deleted, 11 once")
			require.NoError(t, wr.Close(ctx))
		})
	}
}

func mustGet(t *testing.T, w *writer, path string) []byte {
	b, err := w.t.Store().Get(context.Background(), path)
	require.NoError(t, err)
	return b
}
