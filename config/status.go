package config

import (
	"context"
	"encoding/json"
	"html/template"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsrc/postgrescdc"
)

// statusBoard is what `sync --metrics-addr` serves at /status (HTML) and
// /status.json: for each pipeline its state, last committed checkpoint and
// its age, rows/s over the last minute, the source's lag where it reports
// one, the last error, and the restart and dead-letter counts.
type statusBoard struct {
	reg prometheus.Gatherer // for the Kafka source's lag gauges; nil: none

	mu sync.Mutex
	ps map[string]*pipelineStatus
}

// pipelineStatus is one pipeline's entry; the board's mutex guards it.
type pipelineStatus struct {
	name, id, stream string
	state            string
	co               *coordinator.Coordinator
	dl               *deadLetterRouter
	lastCP           []byte
	lastCPAt         time.Time
	lastErr          string
	lastErrAt        time.Time
	samples          []rowSample // the last minute's, oldest first
}

type rowSample struct {
	at   time.Time
	rows int64
}

// PipelineStatus is the JSON of one pipeline at /status.json.
type PipelineStatus struct {
	Name              string    `json:"name"`
	ID                string    `json:"id"`
	Stream            string    `json:"stream,omitempty"`
	State             string    `json:"state"`
	Rows              int64     `json:"rows"`
	Batches           int64     `json:"batches"`
	RowsPerSecond     float64   `json:"rows_per_second"` // over the last minute
	Checkpoint        string    `json:"checkpoint,omitempty"`
	CheckpointAgeSecs *float64  `json:"checkpoint_age_seconds,omitempty"`
	LagRecords        *float64  `json:"lag_records,omitempty"` // where the source reports it
	LagBytes          *float64  `json:"lag_bytes,omitempty"`   // postgres-cdc: WAL bytes the sink has not committed
	LastError         string    `json:"last_error,omitempty"`
	LastErrorAt       time.Time `json:"last_error_at,omitzero"`
	Restarts          int       `json:"restarts"`
	DeadLetters       int64     `json:"dead_letters"`
}

func newStatusBoard(reg prometheus.Gatherer) *statusBoard {
	return &statusBoard{reg: reg, ps: map[string]*pipelineStatus{}}
}

// add registers a pipeline in state "starting".
func (b *statusBoard) add(p *pipelineConf) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ps[p.name] = &pipelineStatus{name: p.name, id: p.id, state: "starting"}
}

func (b *statusBoard) set(name string, f func(*pipelineStatus)) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.ps[name]; s != nil {
		f(s)
	}
}

// setState records a pipeline's state.
func (b *statusBoard) setState(name, state string) {
	b.set(name, func(s *pipelineStatus) { s.state = state })
}

// setError records a pipeline's last error.
func (b *statusBoard) setError(name string, err error) {
	b.set(name, func(s *pipelineStatus) { s.lastErr, s.lastErrAt = err.Error(), time.Now() })
}

// sample records each running pipeline's rows and checkpoint; sync calls
// it every second.
func (b *statusBoard) sample(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range b.ps {
		if s.co == nil {
			continue
		}
		st := s.co.Stats()
		if n := len(s.samples); s.state == "restarting" && n > 0 && st.Rows > s.samples[n-1].rows {
			s.state = "running"
		}
		if st.LastCheckpoint != nil && string(st.LastCheckpoint) != string(s.lastCP) {
			s.lastCP, s.lastCPAt = st.LastCheckpoint, now
		}
		s.samples = append(s.samples, rowSample{now, st.Rows})
		for len(s.samples) > 1 && now.Sub(s.samples[1].at) >= time.Minute {
			s.samples = s.samples[1:]
		}
	}
}

// run samples every second until ctx ends.
func (b *statusBoard) run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		b.sample(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// lag sums the Kafka source's acknowledged-lag gauges of group and topic.
func (b *statusBoard) lag(group, topic string) *float64 {
	if b.reg == nil || topic == "" {
		return nil
	}
	mfs, err := b.reg.Gather()
	if err != nil {
		return nil
	}
	var sum float64
	found := false
	for _, mf := range mfs {
		if mf.GetName() != "flightline_kafka_lag_acknowledged_records" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var g, tp string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "group":
					g = l.GetValue()
				case "topic":
					tp = l.GetValue()
				}
			}
			if g == group && tp == topic && m.GetGauge().GetValue() >= 0 {
				sum += m.GetGauge().GetValue()
				found = true
			}
		}
	}
	if !found {
		return nil
	}
	return &sum
}

// gauge returns the value of the gauge name whose label has value, or nil.
func (b *statusBoard) gauge(name, label, value string) *float64 {
	if b.reg == nil || value == "" {
		return nil
	}
	mfs, err := b.reg.Gather()
	if err != nil {
		return nil
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					v := m.GetGauge().GetValue()
					return &v
				}
			}
		}
	}
	return nil
}

// snapshot returns every pipeline's status, by name.
func (b *statusBoard) snapshot(now time.Time) []PipelineStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []PipelineStatus
	for _, s := range b.ps {
		ps := PipelineStatus{Name: s.name, ID: s.id, Stream: s.stream, State: s.state, LastError: s.lastErr, LastErrorAt: s.lastErrAt}
		if s.co != nil {
			st := s.co.Stats()
			ps.Rows, ps.Batches, ps.Restarts = st.Rows, st.Batches, st.Restarts
		}
		if n := len(s.samples); n > 1 {
			first, last := s.samples[0], s.samples[n-1]
			if dt := last.at.Sub(first.at).Seconds(); dt > 0 {
				ps.RowsPerSecond = float64(last.rows-first.rows) / dt
			}
		}
		if s.lastCP != nil {
			ps.Checkpoint = string(s.lastCP)
			age := now.Sub(s.lastCPAt).Seconds()
			ps.CheckpointAgeSecs = &age
		}
		if s.dl != nil {
			ps.DeadLetters = s.dl.total()
		}
		ps.LagRecords = b.lag(s.id, s.stream)
		ps.LagBytes = b.gauge(postgrescdc.LagMetric, "stream", s.stream)
		out = append(out, ps)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

var statusPage = template.Must(template.New("status").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="2"><title>Flightline status</title>
<style>body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}</style>
</head><body><h1>Flightline pipelines</h1>
<table id="pipelines"><tr><th>pipeline</th><th>state</th><th>rows</th><th>rows/s (1 min)</th><th>last checkpoint</th><th>age</th><th>lag</th><th>last error</th><th>restarts</th><th>dead letters</th></tr>
{{range .}}<tr data-pipeline="{{.Name}}"><td>{{.Name}}</td><td class="state">{{.State}}</td><td class="rows">{{.Rows}}</td><td>{{printf "%.0f" .RowsPerSecond}}</td>
<td><code>{{.Checkpoint}}</code></td><td>{{with .CheckpointAgeSecs}}{{printf "%.0fs" .}}{{end}}</td><td>{{with .LagRecords}}{{printf "%.0f" .}}{{else}}{{with .LagBytes}}{{printf "%.0f B" .}}{{else}}–{{end}}{{end}}</td>
<td>{{.LastError}}</td><td>{{.Restarts}}</td><td>{{.DeadLetters}}</td></tr>
{{end}}</table><p>JSON: <a href="/status.json">/status.json</a> · metrics: <a href="/metrics">/metrics</a></p></body></html>
`))

// routes are the board's HTTP handlers.
func (b *statusBoard) routes(log *slog.Logger) map[string]http.Handler {
	return map[string]http.Handler{
		"/status.json": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"pipelines": b.snapshot(time.Now())})
		}),
		"/status": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			if err := statusPage.Execute(w, b.snapshot(time.Now())); err != nil {
				log.Warn("status page", "err", err)
			}
		}),
	}
}
