package coordinator_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// hookSink wraps a sink; after each successful commit its writers call
// after with the 0-based commit number, and return what it returns. It
// models a sink whose final commit call fails after committing.
type hookSink struct {
	flightsink.Sink
	mu    sync.Mutex
	n     int
	after func(n int) error
}

func (s *hookSink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	w, cp, err := s.Sink.Open(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	return &hookWriter{Writer: w, s: s}, cp, nil
}

type hookWriter struct {
	flightsink.Writer
	s *hookSink
}

func (w *hookWriter) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := w.Writer.WriteBatch(ctx, rec, cp); err != nil {
		return err
	}
	w.s.mu.Lock()
	n := w.s.n
	w.s.n++
	w.s.mu.Unlock()
	return w.s.after(n)
}

// committed is what sink holds: rows and batches.
func committed(sink *flightsink.Memory, target string) (rows, batches int64) {
	for _, b := range sink.Batches(target) {
		rows += b.NumRows()
		batches++
		b.Release()
	}
	return rows, batches
}

// A stop that lands while a commit is under way still counts that commit:
// the coordinator collects the acks of what it has submitted before it
// returns, so its summary matches what the sink holds.
func TestStatsCountCommitsAcknowledgedAfterStop(t *testing.T) {
	for _, remote := range []bool{false, true} {
		t.Run(fmt.Sprint("remote=", remote), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			t.Cleanup(func() { mem.AssertSize(t, 0) })
			mstore := flightsink.NewMemory()
			t.Cleanup(mstore.Release)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			hs := &hookSink{Sink: mstore, after: func(n int) error {
				if n == 5 {
					cancel()                          // the stop arrives mid-commit...
					time.Sleep(50 * time.Millisecond) // ...and is seen before the ack
				}
				return nil
			}}
			var sink flightsink.Sink = hs
			if remote {
				url := flighttest.Serve(t, flightsink.NewServer(hs, flightsink.WithLogger(quiet), flightsink.WithAllocator(mem)), endpoint.ServerConfig{})
				rs, err := flightsink.Dial(url, flightsink.ClientConfig{})
				require.NoError(t, err)
				t.Cleanup(func() { rs.Close() })
				sink = rs
			}
			g, err := flightsrc.NewGenerator(flightsrc.GenBatchRows(100), flightsrc.GenAllocator(mem)) // unbounded
			require.NoError(t, err)
			c, err := coordinator.New(g, sink, "orders", flightsink.Pipeline{ID: "p"}, coordinator.WithLogger(quiet))
			require.NoError(t, err)
			require.NoError(t, c.Run(ctx))
			rows, batches := committed(mstore, "")
			require.GreaterOrEqual(t, batches, int64(6))
			st := c.Stats()
			require.Equal(t, rows, st.Rows, "rows counted = rows committed")
			require.Equal(t, batches, st.Batches, "batches counted = batches committed")
			cp, err := mstore.Checkpoint(context.Background(), flightsink.Pipeline{ID: "p"})
			require.NoError(t, err)
			require.Equal(t, string(cp), string(st.LastCheckpoint))
		})
	}
}

// A retried attempt counts the batches the failed attempt committed: those
// acknowledged, and one whose commit reported an error after committing
// (the next Open's checkpoint shows it landed).
func TestStatsCountEveryAttempt(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ambiguous bool
	}{{"failed commit", false}, {"commit then error", true}} {
		for _, remote := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/remote=%v", tc.name, remote), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				t.Cleanup(func() { mem.AssertSize(t, 0) })
				mstore := flightsink.NewMemory()
				t.Cleanup(mstore.Release)
				outage := func(n int) error {
					if n == 3 || n == 8 {
						return fmt.Errorf("%w: injected outage at commit %d", flightline.ErrUnavailable, n)
					}
					return nil
				}
				var hs flightsink.Sink = mstore
				if tc.ambiguous {
					hs = &hookSink{Sink: mstore, after: outage}
				} else {
					mstore.FailCommit(func(_ flightsink.Pipeline, n int) error { return outage(n) })
				}
				sink := hs
				if remote {
					url := flighttest.Serve(t, flightsink.NewServer(hs, flightsink.WithLogger(quiet), flightsink.WithAllocator(mem)), endpoint.ServerConfig{})
					rs, err := flightsink.Dial(url, flightsink.ClientConfig{})
					require.NoError(t, err)
					t.Cleanup(func() { rs.Close() })
					sink = rs
				}
				c, err := coordinator.New(newGen(t, mem, 5_000, 300), sink, "orders", flightsink.Pipeline{ID: "p"},
					coordinator.WithLogger(quiet), coordinator.Backoff(time.Millisecond, 5*time.Millisecond), coordinator.Window(4))
				require.NoError(t, err)
				require.NoError(t, c.Run(context.Background()))
				requireExactlyOnce(t, ids(mstore, ""), 5_000)
				rows, batches := committed(mstore, "")
				st := c.Stats()
				require.Equal(t, 2, st.Restarts)
				require.EqualValues(t, 5_000, st.Rows)
				require.Equal(t, rows, st.Rows, "rows counted = rows committed")
				require.Equal(t, batches, st.Batches, "batches counted = batches committed")
			})
		}
	}
}
