package flightsink_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
)

func newDir(t testing.TB) flightsink.Sink {
	d, err := flightsink.NewDir(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func newMemory(t testing.TB) flightsink.Sink {
	m := flightsink.NewMemory()
	t.Cleanup(m.Release)
	return m
}

func newNull(testing.TB) flightsink.Sink { return flightsink.NewNull() }

func TestMalformedDoPutDir(t *testing.T)    { doputtest.Run(t, newDir) }
func TestMalformedDoPutMemory(t *testing.T) { doputtest.Run(t, newMemory) }
func TestMalformedDoPutNull(t *testing.T)   { doputtest.Run(t, newNull) }

// dirStored validates every batch of every file the Dir sink committed.
func dirStored(t *testing.T, s flightsink.Sink, acks int) {
	root := s.(*flightsink.Dir).Root()
	files, _ := filepath.Glob(filepath.Join(root, "*", "*.arrow"))
	if acks > 0 && len(files) == 0 {
		t.Fatalf("%d batches acknowledged, no file committed", acks)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := ipc.NewFileReader(f, ipc.WithAllocator(mem))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range r.NumRecords() {
			rec, err := r.RecordBatch(i)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if err := array.ValidateRecordFull(rec); err != nil {
				t.Fatalf("%s: committed batch fails validation: %v", name, err)
			}
			rec.Release()
		}
		r.Close()
		f.Close()
	}
}

// memoryStored validates every batch the Memory sink holds, then drops them.
func memoryStored(t *testing.T, s flightsink.Sink, _ int) {
	m := s.(*flightsink.Memory)
	for _, b := range m.Batches("") {
		if err := array.ValidateRecordFull(b); err != nil {
			t.Errorf("committed batch fails validation: %v", err)
		}
		b.Release()
	}
	m.Release()
}

func FuzzDoPutDir(f *testing.F)    { doputtest.Fuzz(f, newDir, dirStored) }
func FuzzDoPutMemory(f *testing.F) { doputtest.Fuzz(f, newMemory, memoryStored) }
func FuzzDoPutNull(f *testing.F)   { doputtest.Fuzz(f, newNull, nil) }

// TestDirTargetRule: Dir and Delta share one rule (flightsink.CheckDirTarget);
// delta's test checks the same list.
func TestDirTargetRule(t *testing.T) {
	d := newDir(t)
	for _, target := range BadTargets {
		_, _, err := d.Open(context.Background(), flightsink.Pipeline{ID: "p", Target: target})
		require.ErrorIs(t, err, flightline.ErrInvalidInput, "%q", target)
		_, err = d.Checkpoint(context.Background(), flightsink.Pipeline{ID: "p", Target: target})
		require.ErrorIs(t, err, flightline.ErrInvalidInput, "%q", target)
	}
	_, err := os.Stat(filepath.Join(d.(*flightsink.Dir).Root(), "..", "escaped"))
	require.True(t, os.IsNotExist(err))
}

// BadTargets are targets every directory-backed sink refuses.
var BadTargets = []string{"/abs", "/tmp/escaped", "../escaped", "..", ".", ".hidden", "a/b", `a\b`, "a\x00b", strings.Repeat("t", 2000)}
