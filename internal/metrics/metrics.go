// Package metrics holds the Prometheus metrics every Flightline endpoint and
// the coordinator export, and the HTTP handler that serves them.
package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/flightline/flightline/internal/arrowmem"
)

// Metrics are the counters of one process (of one registry). Role is "source", "sink" or
// "coordinator"; pipeline is the pipeline id (or stream name for sources).
// Safe for concurrent use.
type Metrics struct {
	reg           *prometheus.Registry
	rows          *prometheus.CounterVec
	bytes         *prometheus.CounterVec
	batches       *prometheus.CounterVec
	errors        *prometheus.CounterVec
	commitLatency *prometheus.HistogramVec

	mu         sync.Mutex
	lastCommit map[[2]string]time.Time
	now        func() time.Time
}

// liveHeap adds go_gc_heap_live_bytes to the Go collector's default set:
// the runtime/metrics value /gc/heap/live:bytes, the heap the last GC
// marked live. Unlike go_memstats_heap_alloc_bytes, which counts garbage
// not yet collected and so rises towards the GC's goal (and the soft
// memory limit) between cycles, it moves only when what the process keeps
// moves: it is the series that tells a leak from the collector's pacing.
// Reading it costs no collection.
var liveHeap = collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)}

// New returns Metrics registered on a fresh registry, with Go and process
// collectors (the Go collector's defaults plus go_gc_heap_live_bytes, see
// liveHeap) and, when the process counts its Arrow allocator
// (arrowmem.Install, as the CLI does), the gauge
// flightline_arrow_allocated_bytes: bytes allocated by the default Arrow
// allocator and not yet freed. Registry returns that registry;
// For(m.Registry()) returns m.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(liveHeap)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if c := arrowmem.Installed(); c != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "flightline_arrow_allocated_bytes",
			Help: "Bytes allocated by the process's default Arrow allocator and not yet freed."},
			func() float64 { return float64(c.Outstanding()) }))
	}
	m := For(reg)
	m.reg = reg
	return m
}

// For returns the Metrics registered on reg, registering them on first
// use: every component given the same Registerer (a source server, a sink
// server, a coordinator in one process) shares one set of collectors. nil
// returns nil, and a nil *Metrics records nothing. For panics, as
// prometheus.MustRegister does, when reg already holds other collectors
// under Flightline's metric names.
func For(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		return nil
	}
	m := newMetrics()
	// The age collector is registered first: when it is already there, it
	// names the Metrics that registered it, which are reused whole.
	if err := reg.Register(ageCollector{m}); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if a, ok := are.ExistingCollector.(ageCollector); ok {
				return a.m
			}
		}
		panic(fmt.Sprintf("metrics: registering Flightline's metrics: %v", err))
	}
	reg.MustRegister(m.rows, m.bytes, m.batches, m.errors, m.commitLatency)
	return m
}

func newMetrics() *Metrics {
	return &Metrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flightline_rows_total", Help: "Rows moved (committed by sinks, sent by sources)."}, []string{"role", "pipeline"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flightline_bytes_total", Help: "Arrow buffer bytes moved."}, []string{"role", "pipeline"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flightline_batches_total", Help: "Record batches moved."}, []string{"role", "pipeline"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flightline_errors_total", Help: "Failed calls, by gRPC code."}, []string{"role", "pipeline", "code"}),
		commitLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "flightline_commit_latency_seconds", Help: "Time to commit one batch with its checkpoint.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}, []string{"role", "pipeline"}),
		lastCommit: map[[2]string]time.Time{},
		now:        time.Now,
	}
}

// Moved counts one batch that passed through without a commit (sources).
func (m *Metrics) Moved(role, pipeline string, rows, bytes int64) {
	if m == nil {
		return
	}
	m.rows.WithLabelValues(role, pipeline).Add(float64(rows))
	m.bytes.WithLabelValues(role, pipeline).Add(float64(bytes))
	m.batches.WithLabelValues(role, pipeline).Inc()
}

// Committed counts one committed batch and its commit latency, and restarts
// the checkpoint-age clock of pipeline.
func (m *Metrics) Committed(role, pipeline string, rows, bytes int64, took time.Duration) {
	if m == nil {
		return
	}
	m.Moved(role, pipeline, rows, bytes)
	m.commitLatency.WithLabelValues(role, pipeline).Observe(took.Seconds())
	m.mu.Lock()
	m.lastCommit[[2]string{role, pipeline}] = m.now()
	m.mu.Unlock()
}

// Error counts a failed call with its gRPC code name.
func (m *Metrics) Error(role, pipeline, code string) {
	if m == nil {
		return
	}
	m.errors.WithLabelValues(role, pipeline, code).Inc()
}

// Handler serves the metrics of the registry New made in the Prometheus
// text format (Metrics from For have no registry of their own: serve the
// caller's).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry exposes the registry New made, for components that add their
// own metrics and for For; nil for Metrics from For.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

var ageDesc = prometheus.NewDesc("flightline_checkpoint_age_seconds",
	"Seconds since the pipeline last committed a checkpoint.", []string{"role", "pipeline"}, nil)

// ageCollector reports checkpoint age at scrape time, so a stalled pipeline
// shows a growing age without any goroutine ticking.
type ageCollector struct{ m *Metrics }

func (c ageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- ageDesc }

func (c ageCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	now := c.m.now()
	for k, t := range c.m.lastCommit {
		ch <- prometheus.MustNewConstMetric(ageDesc, prometheus.GaugeValue, now.Sub(t).Seconds(), k[0], k[1])
	}
}
