package flightsink_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
)

// dirIDs reads the id column of every .arrow file under root/target with
// arrow's IPC file reader, independently of the sink.
func dirIDs(t *testing.T, root, target string) []int64 {
	files, err := filepath.Glob(filepath.Join(root, target, "*.arrow"))
	require.NoError(t, err)
	var out []int64
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		r, err := ipc.NewFileReader(fh, ipc.WithAllocator(mem))
		require.NoError(t, err)
		for i := range r.NumRecords() {
			rec, err := r.RecordBatch(i)
			require.NoError(t, err)
			out = append(out, rec.Column(0).(*array.Int64).Int64Values()...)
			rec.Release()
		}
		r.Close()
		fh.Close()
	}
	return out
}

func TestDirConformance(t *testing.T) {
	root := t.TempDir()
	sinktest.Run(t, sinktest.Harness{
		NewSink: func(t *testing.T) flightsink.Sink {
			d, err := flightsink.NewDir(root, nil)
			require.NoError(t, err)
			return d
		},
		IDs:       func(t *testing.T, p flightsink.Pipeline) []int64 { return dirIDs(t, root, p.Target) },
		Guarantee: flightsink.ExactlyOnce,
		Group:     true,
	})
}
