package kafka

import (
	"errors"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// lagMetrics are the per-partition lag gauges. A nil *lagMetrics records
// nothing.
type lagMetrics struct {
	hw, acked, fetched *prometheus.GaugeVec

	mu   sync.Mutex
	last map[lagKey]*lagState
}

type lagKey struct {
	group, topic string
	partition    int32
}

type lagState struct{ hw, acked, fetched int64 }

var lagLabels = []string{"group", "topic", "partition"}

func newLagMetrics(r prometheus.Registerer) (*lagMetrics, error) {
	if r == nil {
		return nil, nil
	}
	l := &lagMetrics{
		hw: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flightline_kafka_high_watermark",
			Help: "High watermark of the partition at its last fetch."}, lagLabels),
		acked: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flightline_kafka_lag_acknowledged_records",
			Help: "High watermark minus the last offset acknowledged by the sink and committed to the group."}, lagLabels),
		fetched: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flightline_kafka_lag_fetched_records",
			Help: "High watermark minus the next offset to fetch (records the source has not fetched yet)."}, lagLabels),
		last: map[lagKey]*lagState{},
	}
	for _, g := range []**prometheus.GaugeVec{&l.hw, &l.acked, &l.fetched} {
		if err := r.Register(*g); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			*g = are.ExistingCollector.(*prometheus.GaugeVec) // a second source on one registry
		}
	}
	return l, nil
}

func (l *lagMetrics) state(k lagKey) *lagState {
	s := l.last[k]
	if s == nil {
		s = &lagState{hw: -1, acked: -1, fetched: -1}
		l.last[k] = s
	}
	return s
}

func (l *lagMetrics) set(k lagKey, s *lagState) {
	lv := []string{k.group, k.topic, strconv.Itoa(int(k.partition))}
	if s.hw < 0 {
		return
	}
	l.hw.WithLabelValues(lv...).Set(float64(s.hw))
	if s.fetched >= 0 {
		l.fetched.WithLabelValues(lv...).Set(float64(max(0, s.hw-s.fetched)))
	}
	if s.acked >= 0 {
		l.acked.WithLabelValues(lv...).Set(float64(max(0, s.hw-s.acked)))
	}
}

// fetchedAt records a fetch: the partition's high watermark and the next
// offset the source will fetch.
func (l *lagMetrics) fetchedAt(group, topic string, p int32, hw, next int64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := lagKey{group, topic, p}
	s := l.state(k)
	s.hw, s.fetched = hw, next
	l.set(k, s)
}

// acknowledged records offsets acknowledged by the sink and committed.
func (l *lagMetrics) acknowledged(group, topic string, offs map[int32]int64) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, o := range offs {
		k := lagKey{group, topic, p}
		s := l.state(k)
		s.acked = o
		l.set(k, s)
	}
}

// forget drops the gauges of partitions this instance no longer serves.
func (l *lagMetrics) forget(group, topic string, ps []int32) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range ps {
		k := lagKey{group, topic, p}
		delete(l.last, k)
		lv := []string{group, topic, strconv.Itoa(int(p))}
		l.hw.DeleteLabelValues(lv...)
		l.acked.DeleteLabelValues(lv...)
		l.fetched.DeleteLabelValues(lv...)
	}
}
