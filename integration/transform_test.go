package integration

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
	"github.com/flightline/flightline/transform"
	"github.com/flightline/flightline/transform/flighttransform"
)

// pythonTransform runs examples/transforms/python/transform.py on port
// (0: a free one) and returns its URL and a function that kills it
// (SIGKILL) and waits for it.
func pythonTransform(t *testing.T, port int, args ...string) (string, func()) {
	t.Helper()
	return startTransform(t, Need(t, "FLIGHTLINE_PYTHON", "python with pyarrow"), "python", port, args...)
}

// startTransform runs examples/transforms/<example>/transform.py with py.
func startTransform(t *testing.T, py, example string, port int, args ...string) (string, func()) {
	t.Helper()
	cmd := exec.Command(py, append([]string{"../examples/transforms/" + example + "/transform.py", "--port", fmt.Sprint(port)}, args...)...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	kill := func() {
		if cmd.Process != nil {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			cmd.Process = nil
		}
	}
	t.Cleanup(kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoErrorf(t, err, "transform.py did not start: %s", stderr.String())
	addr := strings.TrimPrefix(strings.TrimSpace(line), "listening on ")
	return "grpc://" + addr, kill
}

// TestIntegrationPythonTransformDelta: generator → the Python example
// transform (pyarrow.flight) → Delta, with the transform killed and
// restarted mid-run; delta-rs finds every kept row exactly once, with the
// computed column.
func TestIntegrationPythonTransformDelta(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	_, portStr, err := net.SplitHostPort(freePort(t))
	require.NoError(t, err)
	port, err := strconv.Atoi(portStr)
	require.NoError(t, err)
	url, kill := pythonTransform(t, port)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	const rows, batch = 18_000, 500
	gen, err := flightsrc.NewGenerator(flightsrc.GenRows(rows), flightsrc.GenBatchRows(batch), flightsrc.GenAllocator(mem),
		flightsrc.GenInterval(20*time.Millisecond))
	require.NoError(t, err)
	uri := t.TempDir() + "/orders"
	sink, err := sinkdelta.New(ctx, sinkdelta.Config{URI: uri}, sinkdelta.Allocator(mem))
	require.NoError(t, err)
	cl, err := flighttransform.Dial(url, flightline.ClientConfig{}, flighttransform.WithAllocator(mem), flighttransform.ForPipeline("py", "orders"))
	require.NoError(t, err)
	defer cl.Close()
	c, err := coordinator.New(gen, sink, "orders", flightsink.Pipeline{ID: "py"}, coordinator.WithChain(cl),
		coordinator.ChainAllocator(mem), coordinator.Backoff(50*time.Millisecond, 500*time.Millisecond))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()

	// Kill the transform once a few batches are committed, and bring a
	// new one up on the same port.
	require.Eventually(t, func() bool { return c.Stats().Batches >= 5 }, time.Minute, 20*time.Millisecond)
	kill()
	pythonTransform(t, port)
	require.NoError(t, <-done)
	require.Positive(t, c.Stats().Restarts, "the kill interrupted the pipeline")

	// quantity = 1 + id%9 >= 5 keeps ids with id%9 >= 4: 5 of every 9.
	want := int64(0)
	for i := int64(0); i < rows; i++ {
		if i%9 >= 4 {
			want++
		}
	}
	got := checkWithDeltaRs(t, uri, nil, "py")
	require.Equal(t, want, got.Rows)
	require.Equal(t, want, got.Distinct, "no id twice")
	require.Equal(t, "double", got.Schema["total"])
	require.Equal(t, `{"positions":{"orders/0":18000}}`, got.LastCheckpoint)
	require.EqualValues(t, 4, got.Sample[0]["id"])
	require.InDelta(t, 1.48*5, got.Sample[0]["total"], 1e-9, "total = amount * quantity")
}

// TestIntegrationGoTransformChainDelta: generator → a built-in in the
// coordinator → a Go DoExchange service (serving a built-in filter) →
// Delta; delta-rs reads the selected columns of the kept rows, once each.
func TestIntegrationGoTransformChainDelta(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	smem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0); smem.AssertSize(t, 0) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	filter, err := transform.Filter("quantity", transform.Ge, "5", smem)
	require.NoError(t, err)
	url := flighttest.Serve(t, flighttransform.NewServer(transform.Map(filter), flighttransform.WithServerAllocator(smem)), endpoint.ServerConfig{})
	cl, err := flighttransform.Dial(url, flightline.ClientConfig{}, flighttransform.WithAllocator(mem))
	require.NoError(t, err)
	defer cl.Close()
	sel, err := transform.Select("id", "quantity")
	require.NoError(t, err)

	const rows = 9_000
	gen, err := flightsrc.NewGenerator(flightsrc.GenRows(rows), flightsrc.GenBatchRows(700), flightsrc.GenAllocator(mem))
	require.NoError(t, err)
	uri := t.TempDir() + "/orders"
	sink, err := sinkdelta.New(ctx, sinkdelta.Config{URI: uri}, sinkdelta.Allocator(mem))
	require.NoError(t, err)
	c, err := coordinator.New(gen, sink, "orders", flightsink.Pipeline{ID: "go"}, coordinator.WithChain(transform.Map(sel), cl), coordinator.ChainAllocator(mem))
	require.NoError(t, err)
	require.NoError(t, c.Run(ctx))

	got := checkWithDeltaRs(t, uri, nil, "go")
	require.EqualValues(t, rows/9*5, got.Rows)
	require.Equal(t, got.Rows, got.Distinct)
	require.Equal(t, map[string]string{"id": "int64", "quantity": "int32"}, got.Schema)
	require.Equal(t, `{"positions":{"orders/0":9000}}`, got.LastCheckpoint)
}

// TestIntegrationPolarsTransformDelta: generator → the polars example,
// splitting every answer into pieces of at most 128 rows → Delta. The
// coordinator joins the pieces; delta-rs finds every kept row once.
func TestIntegrationPolarsTransformDelta(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	url, _ := startTransform(t, Need(t, "FLIGHTLINE_POLARS_PYTHON", "python with polars"), "polars", 0, "--max-rows", "128")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const rows, batch = 9_000, 500
	gen, err := flightsrc.NewGenerator(flightsrc.GenRows(rows), flightsrc.GenBatchRows(batch), flightsrc.GenAllocator(mem))
	require.NoError(t, err)
	uri := t.TempDir() + "/orders"
	sink, err := sinkdelta.New(ctx, sinkdelta.Config{URI: uri}, sinkdelta.Allocator(mem))
	require.NoError(t, err)
	cl, err := flighttransform.Dial(url, flightline.ClientConfig{}, flighttransform.WithAllocator(mem))
	require.NoError(t, err)
	defer cl.Close()
	c, err := coordinator.New(gen, sink, "orders", flightsink.Pipeline{ID: "polars"}, coordinator.WithChain(cl), coordinator.ChainAllocator(mem))
	require.NoError(t, err)
	require.NoError(t, c.Run(ctx))
	require.EqualValues(t, rows/batch, c.Stats().Batches, "one commit per input: the pieces were joined")

	got := checkWithDeltaRs(t, uri, nil, "polars")
	require.EqualValues(t, rows/9*5, got.Rows)
	require.Equal(t, got.Rows, got.Distinct)
	require.Equal(t, "double", got.Schema["total"])
	require.Equal(t, `{"positions":{"orders/0":9000}}`, got.LastCheckpoint)
	require.InDelta(t, 1.48*5, got.Sample[0]["total"], 1e-9)
}

// TestInteropPythonTransformClient: a plain pyarrow.flight client drives
// flightline's Go transform server over DoExchange: one answer per input,
// checkpoints unchanged and in order, a 0-row input answered, a batch
// without a checkpoint refused with INVALID_ARGUMENT, a wrong token with
// UNAUTHENTICATED.
func TestInteropPythonTransformClient(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	f, err := transform.Filter("quantity", transform.Ge, "5", mem)
	require.NoError(t, err)
	url := flighttest.Serve(t, flighttransform.NewServer(transform.Map(f), flighttransform.WithServerAllocator(mem), flighttransform.WithLogger(quiet)),
		endpoint.ServerConfig{Token: "interop-token"})
	s := runPython(t, "transform_client.py", url, "interop-token")
	require.EqualValues(t, 4, s["answers"])
	require.EqualValues(t, 300/9*5, s["rows"], "ids 0..299 with 1+id%9 >= 5: 5 of every 9, none of the last 3")
	require.Equal(t, []any{"id", "quantity"}, s["schema"])
	require.Equal(t, "ArrowInvalid", s["no_metadata_error"], "INVALID_ARGUMENT surfaces as ArrowInvalid in pyarrow")
	require.Equal(t, "FlightUnauthenticatedError", s["wrong_token"])
}
