package integration

import (
	"context"
	"encoding/json"
	"log/slog"
	"os/exec"
	"path/filepath"
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

func runPython(t *testing.T, script string, args ...string) map[string]any {
	t.Helper()
	py := Need(t, "FLIGHTLINE_PYTHON", "python with pyarrow")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{filepath.Join("python", script)}, args...)...)
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("%s failed: %v\nstderr:\n%s", script, err, ee.Stderr)
	}
	require.NoError(t, err)
	var summary map[string]any
	require.NoError(t, json.Unmarshal(out, &summary), "output: %s", out)
	t.Logf("%s: %s", script, out)
	return summary
}

var quiet = slog.New(slog.DiscardHandler)

// TestInteropPythonSink: pyarrow.flight pushes batches with checkpoints into
// a Go sink, reads the acks, asks for the checkpoint, replays, and sees the
// documented errors. Go then checks every row landed exactly once.
func TestInteropPythonSink(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
	sink := flightsink.NewMemory()
	defer sink.Release()
	url := flighttest.Serve(t, flightsink.NewServer(sink, flightsink.WithAllocator(mem), flightsink.WithLogger(quiet)),
		endpoint.ServerConfig{Token: "interop-token"})

	s := runPython(t, "sink_client.py", url, "py-pipeline", "interop-token")
	require.Equal(t, "exactly-once", s["guarantee"])
	require.Equal(t, "FlightUnauthenticatedError", s["wrong_token"])
	require.Equal(t, "ArrowInvalid", s["no_metadata_error"], "INVALID_ARGUMENT surfaces as ArrowInvalid in pyarrow")

	var ids []int64
	for _, b := range sink.Batches("py") {
		ids = append(ids, b.Column(0).(*array.Int64).Int64Values()...)
		b.Release()
	}
	slices.Sort(ids)
	want := make([]int64, 800)
	for i := range want {
		want[i] = int64(i)
	}
	require.Equal(t, want, ids, "every row pushed from Python exactly once")
}

// TestInteropPythonSource: pyarrow.flight lists a Go source's streams and
// reads one with DoGet from a resume checkpoint.
func TestInteropPythonSource(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
	gen, err := flightsrc.NewGenerator(flightsrc.GenRows(12_345), flightsrc.GenBatchRows(1000), flightsrc.GenAllocator(mem))
	require.NoError(t, err)
	url := flighttest.Serve(t, flightsrc.NewServer(gen, flightsrc.WithAllocator(mem), flightsrc.WithLogger(quiet)), endpoint.ServerConfig{})

	s := runPython(t, "source_client.py", url)
	require.Equal(t, []any{"orders"}, s["streams"])
	require.EqualValues(t, 12_345-5000, s["rows"])
	require.Equal(t, map[string]any{"positions": map[string]any{"orders/0": float64(12_345)}}, s["last_checkpoint"])
	require.Equal(t, "ArrowInvalid", s["bad_ticket"])
	require.Equal(t, "KeyError", s["unknown_stream"], "NOT_FOUND surfaces as KeyError in pyarrow")
}
