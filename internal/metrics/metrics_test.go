package metrics

import (
	"io"
	"net/http/httptest"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/arrowmem"
)

func TestExposition(t *testing.T) {
	m := New()
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	m.Committed("sink", "p1", 100, 4096, 3*time.Millisecond)
	m.Moved("source", "orders", 50, 2048)
	m.Error("sink", "p1", "InvalidArgument")
	now = now.Add(42 * time.Second)

	rr := httptest.NewRecorder()
	m.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rr.Body)
	for _, want := range []string{
		`flightline_rows_total{pipeline="p1",role="sink"} 100`,
		`flightline_bytes_total{pipeline="p1",role="sink"} 4096`,
		`flightline_batches_total{pipeline="orders",role="source"} 1`,
		`flightline_errors_total{code="InvalidArgument",pipeline="p1",role="sink"} 1`,
		`flightline_commit_latency_seconds_count{pipeline="p1",role="sink"} 1`,
		`flightline_checkpoint_age_seconds{pipeline="p1",role="sink"} 42`,
		`go_goroutines`,
	} {
		require.Contains(t, string(body), want)
	}
}

func TestNilMetricsAreNoops(t *testing.T) {
	var m *Metrics
	m.Committed("sink", "p", 1, 1, time.Second)
	m.Moved("source", "s", 1, 1)
	m.Error("sink", "p", "Internal")
}

// Components handed the same Registerer share one Metrics, on a registry
// New made or on one the caller made; nil means none.
func TestForSharesOneSetPerRegisterer(t *testing.T) {
	m := New()
	require.Same(t, m, For(m.Registry()))
	reg := prometheus.NewRegistry()
	a, b := For(reg), For(reg)
	require.Same(t, a, b)
	require.NotSame(t, m, a)
	a.Moved("source", "s", 3, 30)
	b.Moved("source", "s", 4, 40)
	n, err := testutil.GatherAndCount(reg, "flightline_rows_total")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 7.0, testutil.ToFloat64(a.rows.WithLabelValues("source", "s")))
	require.Nil(t, For(nil))

	foreign := prometheus.NewRegistry()
	foreign.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "flightline_checkpoint_age_seconds", Help: "x"}))
	require.Panics(t, func() { For(foreign) })
}

// With the process's Arrow allocator counted (arrowmem.Install, as the CLI
// does), New exports its outstanding bytes, and the gauge follows a buffer
// allocated and released.
func TestArrowAllocatedGauge(t *testing.T) {
	c := arrowmem.Install()
	m := New()
	gauge := func() float64 {
		mfs, err := m.Registry().Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == "flightline_arrow_allocated_bytes" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no flightline_arrow_allocated_bytes")
		return 0
	}
	before := gauge()
	require.Equal(t, float64(c.Outstanding()), before)
	buf := memory.NewResizableBuffer(memory.DefaultAllocator)
	buf.Resize(3 << 20)
	require.Equal(t, before+3<<20, gauge())
	buf.Release()
	require.Equal(t, before, gauge())
}

// The Go collector exports the live heap after the last GC beside the
// default memstats: the soak's leak check reads it.
func TestLiveHeapGauge(t *testing.T) {
	m := New()
	runtime.GC()
	rr := httptest.NewRecorder()
	m.Handler().ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rr.Body)
	re := regexp.MustCompile(`(?m)^go_gc_heap_live_bytes ([0-9.e+]+)$`)
	got := re.FindSubmatch(body)
	require.NotNil(t, got, "no go_gc_heap_live_bytes in\n%s", body)
	v, err := strconv.ParseFloat(string(got[1]), 64)
	require.NoError(t, err)
	require.Positive(t, v)
	require.Contains(t, string(body), "go_memstats_heap_alloc_bytes ")
}
