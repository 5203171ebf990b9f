package integration

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

func runRust(t *testing.T, args ...string) map[string]any {
	t.Helper()
	bin := Need(t, "FLIGHTLINE_RUST_CLIENT", "the Rust arrow-flight interop client")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("rust client failed: %v\nstderr:\n%s", err, ee.Stderr)
	}
	require.NoError(t, err)
	var summary map[string]any
	require.NoError(t, json.Unmarshal(out, &summary), "output: %s", out)
	t.Logf("rust client: %s", out)
	return summary
}

// TestInteropRustSink: the Rust arrow-flight crate pushes batches with
// checkpoints into a Go sink, matches acks, resumes from the checkpoint
// action and replays; Go checks every row landed exactly once.
func TestInteropRustSink(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	sink := flightsink.NewMemory()
	t.Cleanup(sink.Release)
	url := flighttest.Serve(t, flightsink.NewServer(sink, flightsink.WithAllocator(mem), flightsink.WithLogger(quiet)),
		endpoint.ServerConfig{Token: "rust-token"})

	s := runRust(t, "sink", url, "rs-pipeline", "rust-token")
	require.Equal(t, "Unauthenticated", s["wrong_token"])
	var ids []int64
	for _, b := range sink.Batches("rs") {
		ids = append(ids, b.Column(0).(*array.Int64).Int64Values()...)
		b.Release()
	}
	slices.Sort(ids)
	require.Len(t, ids, 1000)
	for i, v := range ids {
		require.EqualValues(t, i, v)
	}
}

// TestInteropRustSource: the Rust arrow-flight crate reads a Go source with
// DoGet after a checkpoint and checks ids and per-batch checkpoints.
func TestInteropRustSource(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	gen, err := flightsrc.NewGenerator(flightsrc.GenRows(10_000), flightsrc.GenBatchRows(700), flightsrc.GenAllocator(mem))
	require.NoError(t, err)
	url := flighttest.Serve(t, flightsrc.NewServer(gen, flightsrc.WithAllocator(mem), flightsrc.WithLogger(quiet)), endpoint.ServerConfig{})
	s := runRust(t, "source", url)
	require.EqualValues(t, 7000, s["rows"])
}
