package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/internal/endpoint"
)

// loudLog records every log record at WARN or above.
type loudLog struct {
	mu   sync.Mutex
	recs []string
}

func (l *loudLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *loudLog) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
	l.mu.Lock()
	l.recs = append(l.recs, b.String())
	l.mu.Unlock()
	return nil
}
func (l *loudLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *loudLog) WithGroup(string) slog.Handler      { return l }
func (l *loudLog) records() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.recs...)
}

// A fresh process in a fresh consumer group: the coordinator's Prepare
// waits for the first assignment before it opens the sink, so the first
// Read serves it. No restart, nothing logged above INFO — in process and
// with the source behind Flight.
func TestKfakeCleanStartNoConflict(t *testing.T) {
	for _, overFlight := range []bool{false, true} {
		t.Run(fmt.Sprintf("flight=%v", overFlight), func(t *testing.T) {
			brokers := fakeCluster(t, 3, "orders")
			produce(t, brokers, "orders", 0, 600, 0)
			mem := checkedMem(t)
			loud := &loudLog{}
			log := slog.New(loud)
			src, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{"orders"}, BatchRows: 100, BatchWait: 20 * time.Millisecond, SessionTimeout: time.Second},
				kafka.Allocator(mem), kafka.Logger(log))
			require.NoError(t, err)
			defer src.Close()
			var from flightsrc.Source = src
			if overFlight {
				gs, _, err := endpoint.NewServer(endpoint.ServerConfig{})
				require.NoError(t, err)
				flight.RegisterFlightServiceServer(gs, flightsrc.NewServer(src, flightsrc.WithAllocator(mem), flightsrc.WithLogger(log)))
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				go gs.Serve(lis)
				defer gs.Stop()
				cl, err := flightsrc.DialWithAllocator("grpc://"+lis.Addr().String(), flightsrc.ClientConfig{}, mem)
				require.NoError(t, err)
				defer cl.Close()
				from = cl
			}
			sink := flightsink.NewMemory()
			defer sink.Release()
			pl := flightsink.Pipeline{ID: "fresh", Target: "orders"}
			c, err := coordinator.New(from, sink, "orders", pl, coordinator.WithLogger(log),
				coordinator.Backoff(20*time.Millisecond, 500*time.Millisecond), coordinator.CommitInterval(50*time.Millisecond))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			require.Eventually(t, func() bool { return countRows(sink, pl.Target) >= 600 }, 50*time.Second, 20*time.Millisecond)
			cancel()
			require.NoError(t, <-done)
			require.Zero(t, c.Stats().Restarts, "a clean start restarted; logged: %q", loud.records())
			require.Empty(t, loud.records(), "a clean start logged above INFO")
		})
	}
}
