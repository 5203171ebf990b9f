package config

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// The router counts what it discards in flightline_deadletters_total.
func TestDeadLetterRouterCounts(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := newDeadLetterRouter(&pipelineConf{name: "p", id: "p", discard: true}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	require.NoError(t, r.route(context.Background(), []deadLetter{{topic: "t", offset: 1, stage: "decode", reason: "bad"}, {topic: "t", offset: 2, stage: "load", reason: "big"}}))
	require.NoError(t, r.route(context.Background(), []deadLetter{{topic: "t", offset: 3, stage: "decode", reason: "bad"}}))
	require.Equal(t, 2.0, testutil.ToFloat64(r.count.WithLabelValues("p", "decode", "discarded")))
	require.Equal(t, 1.0, testutil.ToFloat64(r.count.WithLabelValues("p", "load", "discarded")))
	// A second router on the same registry shares the counter.
	r2 := newDeadLetterRouter(&pipelineConf{name: "q", id: "q", discard: true}, nil, r.log, reg)
	require.Same(t, r.count, r2.count)
}
