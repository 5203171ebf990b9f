package delta_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	delta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsink/doputtest"
)

// deltaRoots remembers where each test sink writes, for deltaStored.
var deltaRoots = map[flightsink.Sink]string{}

func newDelta(t testing.TB) flightsink.Sink {
	root := t.TempDir()
	s, err := delta.New(context.Background(), delta.Config{URI: root})
	if err != nil {
		t.Fatal(err)
	}
	deltaRoots[s] = root
	t.Cleanup(func() { delete(deltaRoots, s) })
	return s
}

func TestMalformedDoPutDelta(t *testing.T) { doputtest.Run(t, newDelta, "dictionaries") }

// deltaStored reads back every Parquet file the sink wrote with pqarrow and
// validates it fully.
func deltaStored(t *testing.T, s flightsink.Sink, acks int) {
	var files []string
	_ = filepath.WalkDir(deltaRoots[s], func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".parquet" {
			files = append(files, p)
		}
		return nil
	})
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := file.NewParquetReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, mem)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		tbl, err := fr.ReadTable(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range int(tbl.NumCols()) {
			for _, c := range tbl.Column(i).Data().Chunks() {
				if err := array.ValidateFull(c); err != nil {
					t.Errorf("%s: column %d fails validation: %v", name, i, err)
				}
			}
		}
		tbl.Release()
		pf.Close()
	}
}

func FuzzDoPutDelta(f *testing.F) { doputtest.Fuzz(f, newDelta, deltaStored) }

// TestDeltaTargetRule: the rule Dir has (flightsink.CheckDirTarget): an
// absolute target used to create a table under the root.
func TestDeltaTargetRule(t *testing.T) {
	s := newDelta(t)
	root := deltaRoots[s]
	for _, target := range []string{"/abs", "/tmp/escaped", "../escaped", "..", ".", ".hidden", "a/b", `a\b`, "a\x00b"} {
		_, _, err := s.Open(context.Background(), flightsink.Pipeline{ID: "p", Target: target})
		require.ErrorIs(t, err, flightline.ErrInvalidInput, "%q", target)
		_, err = s.Checkpoint(context.Background(), flightsink.Pipeline{ID: "p", Target: target})
		require.ErrorIs(t, err, flightline.ErrInvalidInput, "%q", target)
	}
	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing was created under the root")
}
