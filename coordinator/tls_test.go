package coordinator_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/certtest"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// A TLS problem that appears mid-run stops the run instead of being
// retried for ever: the coordinator writes to a TLS sink until its stream
// breaks; while it waits to retry, the sink restarts with a certificate
// from another CA. The retry's handshake fails verification, a
// configuration error: Run returns it at once. Restarted with a
// certificate of the same CA instead, the sink is reached again and the
// stream runs to its end (an outage, retried).
func TestTLSProblemMidRunIsNotRetried(t *testing.T) {
	for _, replaced := range []bool{true, false} {
		t.Run(fmt.Sprintf("another_CA=%v", replaced), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			t.Cleanup(func() { mem.AssertSize(t, 0) }) // after the servers stopped
			ca, other := certtest.NewCA(t, "ca"), certtest.NewCA(t, "another CA")
			cert, key := ca.Server(t, "sink", "127.0.0.1")
			sink := flightsink.NewMemory()
			defer sink.Release()
			broke := make(chan struct{})
			sink.FailCommit(func(_ flightsink.Pipeline, n int) error {
				if n == 3 {
					close(broke)
					return fmt.Errorf("%w: injected outage", flightline.ErrUnavailable)
				}
				return nil
			})
			serve := func(addr, cert, key string) (string, func()) {
				return flighttest.ServeAt(t, addr, flightsink.NewServer(sink, flightsink.WithLogger(quiet), flightsink.WithAllocator(mem)),
					endpoint.ServerConfig{CertFile: cert, KeyFile: key})
			}
			addr, stop := serve("127.0.0.1:0", cert, key)
			c, err := flightsink.Dial("grpc+tls://"+addr, flightsink.ClientConfig{CAFile: ca.CertFile})
			require.NoError(t, err)
			defer c.Close()

			const rows = 20_000
			src := &gatedSource{Source: newGen(t, mem, rows, 500), gate: make(chan struct{})}
			var logs syncBuf
			co, err := coordinator.New(src, c, "orders", flightsink.Pipeline{ID: "tls"}, coordinator.Window(1),
				coordinator.Backoff(time.Millisecond, 10*time.Millisecond),
				coordinator.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- co.Run(ctx) }()
			<-broke

			stop()
			next := ca
			if replaced {
				next = other
			}
			cert, key = next.Server(t, "restarted", "127.0.0.1")
			serve(addr, cert, key)
			close(src.gate)
			err = <-done
			if !replaced {
				require.NoError(t, err)
				requireExactlyOnce(t, ids(sink, ""), rows)
				return
			}
			require.Error(t, err, "Run stopped by its context: the error was retried until then")
			require.NoError(t, ctx.Err(), "Run returned before its deadline, without retrying until it")
			require.ErrorIs(t, err, flightline.ErrInvalidInput)
			require.False(t, flightline.IsRetryable(err))
			require.ErrorContains(t, err, "x509: certificate signed by unknown authority")
			require.ErrorContains(t, err, "a TLS configuration error, not retried")
			require.Contains(t, logs.String(), `msg="pipeline failed"`)
			require.NotContains(t, logs.String(), "giving up after")
		})
	}
}

// syncBuf is a bytes.Buffer safe for a logger's concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
