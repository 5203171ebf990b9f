package postgrescdc

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// LagMetric is the gauge of a reader's lag: the bytes of WAL from the
// position the sink has committed (what the slot may confirm) to the
// server's WAL end, as the server last reported it. Labels stream and slot.
const LagMetric = "flightline_postgres_cdc_lag_bytes"

// Registerer registers the lag gauge (LagMetric) with r; nil, the
// default, registers nothing.
func Registerer(r prometheus.Registerer) Option {
	return func(o *options) error { o.reg = r; return nil }
}

func newLagGauge(r prometheus.Registerer) (*prometheus.GaugeVec, error) {
	if r == nil {
		return nil, nil
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: LagMetric,
		Help: "Bytes of WAL from the position the sink committed to the server's WAL end."}, []string{"stream", "slot"})
	if err := r.Register(g); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			return nil, err
		}
		g = are.ExistingCollector.(*prometheus.GaugeVec) // a second source on one registry
	}
	return g, nil
}
