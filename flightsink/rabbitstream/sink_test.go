package rabbitstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/rabbitstream"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// env connects to the broker of FLIGHTLINE_RABBITMQ_STREAM_URL with the
// client directly, independently of the sink.
func env(t *testing.T) (string, *stream.Environment) {
	u := servicetest.Need(t, "FLIGHTLINE_RABBITMQ_STREAM_URL", "RabbitMQ streams")
	pu, err := url.Parse(u)
	require.NoError(t, err)
	pw, _ := pu.User.Password()
	port := 5552
	fmt.Sscan(pu.Port(), &port)
	e, err := stream.NewEnvironment(stream.NewEnvironmentOptions().SetHost(pu.Hostname()).SetPort(port).
		SetUser(pu.User.Username()).SetPassword(pw).SetReadBuffer(0).SetWriteBuffer(0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return u, e
}

// record is one message of a stream as a consumer sees it.
type record struct {
	id      string
	props   map[string]any
	row     map[string]any
	control string
}

// readStream reads every message of name from its start: it publishes a
// sentinel with a plain producer and reads until it.
func readStream(t *testing.T, e *stream.Environment, name string) []record {
	sentinel := fmt.Sprintf("sentinel-%d", rand.Int64())
	p, err := e.NewProducer(name, nil)
	require.NoError(t, err)
	m := amqp.NewMessage([]byte("{}"))
	m.ApplicationProperties = map[string]any{"test-sentinel": sentinel}
	require.NoError(t, p.BatchSend([]message.StreamMessage{m}))
	require.NoError(t, p.Close())
	ch := make(chan *amqp.Message, 1024)
	c, err := e.NewConsumer(name, func(_ stream.ConsumerContext, m *amqp.Message) { ch <- m },
		stream.NewConsumerOptions().SetOffset(stream.OffsetSpecification{}.First()))
	require.NoError(t, err)
	defer c.Close()
	var out []record
	timeout := time.After(30 * time.Second)
	for {
		select {
		case m := <-ch:
			if m.ApplicationProperties["test-sentinel"] != nil {
				if m.ApplicationProperties["test-sentinel"] == sentinel {
					return out
				}
				continue
			}
			r := record{props: m.ApplicationProperties}
			if m.Properties != nil {
				r.id, _ = m.Properties.MessageID.(string)
			}
			if ctl, ok := m.ApplicationProperties["flightline-control"].(string); ok {
				r.control = ctl
			} else {
				require.NoError(t, json.Unmarshal(m.Data[0], &r.row), "%s", m.Data[0])
			}
			out = append(out, r)
		case <-timeout:
			t.Fatalf("sentinel not read back from %s", name)
		}
	}
}

func ids(rs []record) []int64 {
	var out []int64
	for _, r := range rs {
		if r.control == "" {
			out = append(out, int64(r.row["id"].(float64)))
		}
	}
	return out
}

func TestSinktest(t *testing.T) {
	u, e := env(t)
	sinktest.Run(t, sinktest.Harness{
		Guarantee: flightsink.ExactlyOnce,
		NewSink: func(t *testing.T) flightsink.Sink {
			s, err := rabbitstream.New(context.Background(), rabbitstream.Config{URL: u + "default_stream_unused"})
			require.NoError(t, err)
			return s
		},
		IDs: func(t *testing.T, p flightsink.Pipeline) []int64 {
			if ok, err := e.StreamExists(p.Target); err != nil || !ok {
				require.NoError(t, err)
				return nil
			}
			return ids(readStream(t, e, p.Target))
		},
	})
}

func requireOnce(t *testing.T, got []int64, from, to int64) {
	t.Helper()
	seen := map[int64]int{}
	for _, id := range got {
		seen[id]++
	}
	for id := from; id < to; id++ {
		require.Equalf(t, 1, seen[id], "id %d", id)
		delete(seen, id)
	}
	require.Empty(t, seen, "ids outside [%d, %d)", from, to)
}

func newSink(t *testing.T, u string) (*rabbitstream.Sink, flightsink.Pipeline) {
	s, err := rabbitstream.New(context.Background(), rabbitstream.Config{URL: u})
	require.NoError(t, err)
	name := fmt.Sprintf("fl_test_%d", rand.Int64())
	return s, flightsink.Pipeline{ID: "p_" + name, Target: name}
}

func write(t *testing.T, w flightsink.Writer, from, to int64) error {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := sinktest.Batch(mem, from, to)
	defer rec.Release()
	return w.WriteBatch(context.Background(), rec, sinktest.CP(to))
}

// TestCutBatchCompletedOnce: a writer dies after the first rows of a
// batch; the next Open returns the checkpoint before the batch, and the
// same batch sent again adds only its missing rows. Twice: the writer
// completing it dies too.
func TestCutBatchCompletedOnce(t *testing.T) {
	u, e := env(t)
	s, p := newSink(t, u)
	ctx := context.Background()
	w, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Nil(t, cp)
	require.NoError(t, write(t, w, 0, 10))
	rabbitstream.CutNextBatch(w, 4)
	require.ErrorIs(t, write(t, w, 10, 20), flightline.ErrUnavailable)
	_ = w.Close(ctx)
	got := ids(readStream(t, e, p.Target))
	requireOnce(t, got, 0, 14) // the cut batch's first 4 rows are in the stream

	w, cp, err = s.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(10)), string(cp), "the cut batch is not committed")
	cp, err = s.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(10)), string(cp))
	rabbitstream.CutNextBatch(w, 3) // dies again while completing it
	require.Error(t, write(t, w, 10, 20))
	_ = w.Close(ctx)
	requireOnce(t, ids(readStream(t, e, p.Target)), 0, 17)

	w, cp, err = s.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(10)), string(cp))
	require.NoError(t, write(t, w, 10, 20))
	require.NoError(t, write(t, w, 20, 25))
	require.NoError(t, w.Close(ctx))
	requireOnce(t, ids(readStream(t, e, p.Target)), 0, 25)
	cp, err = s.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(25)), string(cp))
}

// TestCutBatchReplayedDifferently: when the cut batch comes back as other
// batches, the rows it left cannot be taken back: they are in the stream
// twice, and nothing is lost (the documented at-least-once case).
func TestCutBatchReplayedDifferently(t *testing.T) {
	u, e := env(t)
	s, p := newSink(t, u)
	ctx := context.Background()
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	rabbitstream.CutNextBatch(w, 4)
	require.Error(t, write(t, w, 0, 10))
	_ = w.Close(ctx)
	w, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Nil(t, cp)
	require.NoError(t, write(t, w, 0, 6)) // cut differently
	require.NoError(t, write(t, w, 6, 10))
	require.NoError(t, w.Close(ctx))
	got := ids(readStream(t, e, p.Target))
	require.Len(t, got, 14)
	requireOnce(t, got[4:], 0, 10)
	cp, err = s.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(10)), string(cp))
}

// TestZombieMessagesDroppedByBroker: the fence is the broker's: an older
// writer's batch published after a newer claim lands nowhere, and the
// older writer learns it after the confirms.
func TestZombieMessagesDroppedByBroker(t *testing.T) {
	u, e := env(t)
	s, p := newSink(t, u)
	ctx := context.Background()
	old, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.NoError(t, write(t, old, 0, 5))
	newer, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(5)), string(cp))
	err = write(t, old, 5, 50)
	require.ErrorIs(t, err, flightline.ErrFenced)
	rs := readStream(t, e, p.Target)
	requireOnce(t, ids(rs), 0, 5)
	claims := 0
	for _, r := range rs {
		if r.control == "claim" {
			claims++
		}
	}
	require.Equal(t, 2, claims, "one claim message per Open")
	require.NoError(t, write(t, newer, 5, 8))
	_ = old.Close(ctx)
	require.NoError(t, newer.Close(ctx))
	requireOnce(t, ids(readStream(t, e, p.Target)), 0, 8)
}

func TestBrokerDownIsUnavailable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	s, err := rabbitstream.New(context.Background(), rabbitstream.Config{URL: "rabbitmq-stream://guest:guest@" + addr + "/s"})
	require.NoError(t, err)
	_, _, err = s.Open(context.Background(), flightsink.Pipeline{ID: "down"})
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.ErrorIs(t, s.Ping(context.Background()), flightline.ErrUnavailable)
}

func TestWrongCredentialsUnauthenticated(t *testing.T) {
	u, _ := env(t)
	pu, err := url.Parse(u)
	require.NoError(t, err)
	pu.User = url.UserPassword("guest", "not-the-password")
	pu.Path = "/s"
	s, err := rabbitstream.New(context.Background(), rabbitstream.Config{URL: pu.String()})
	require.NoError(t, err)
	_, _, err = s.Open(context.Background(), flightsink.Pipeline{ID: "creds"})
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
	require.NotContains(t, err.Error(), "not-the-password")
}

func TestBadConfig(t *testing.T) {
	for _, u := range []string{"amqp://h/s", "rabbitmq-stream:///s", "rabbitmq-stream://h/s?foo=1"} {
		_, err := rabbitstream.New(context.Background(), rabbitstream.Config{URL: u})
		require.ErrorIs(t, err, flightline.ErrInvalidInput, u)
	}
	s, err := rabbitstream.New(context.Background(), rabbitstream.Config{URL: "rabbitmq-stream://h"})
	require.NoError(t, err)
	_, _, err = s.Open(context.Background(), flightsink.Pipeline{ID: "x"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput, "no stream anywhere")
}

// TestCutBatchOtherPositionFirst: with Positions checkpoints (Kafka: one
// key per partition) the restarted source may send another partition's
// batch before the cut one; the cut batch stays pending until its own
// position comes back, then is completed once.
func TestCutBatchOtherPositionFirst(t *testing.T) {
	u, e := env(t)
	s, p := newSink(t, u)
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	put := func(w flightsink.Writer, from, to int64, key string, pos int64) error {
		rec := sinktest.Batch(mem, from, to)
		defer rec.Release()
		return w.WriteBatch(ctx, rec, checkpoint.Positions{key: pos}.Encode())
	}
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.NoError(t, put(w, 0, 10, "t/0", 10))
	require.NoError(t, put(w, 1000, 1010, "t/1", 10))
	rabbitstream.CutNextBatch(w, 5)
	require.Error(t, put(w, 10, 20, "t/0", 20))
	_ = w.Close(ctx)

	w, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(checkpoint.Positions{"t/0": 10, "t/1": 10}.Encode()), string(cp))
	require.NoError(t, put(w, 1010, 1020, "t/1", 20)) // the other partition first
	rabbitstream.CutNextBatch(w, 2)
	require.Error(t, put(w, 10, 20, "t/0", 20)) // cut again, while completing it
	_ = w.Close(ctx)

	w, cp, err = s.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(checkpoint.Positions{"t/0": 10, "t/1": 20}.Encode()), string(cp))
	require.NoError(t, put(w, 1020, 1030, "t/1", 30))
	require.NoError(t, put(w, 10, 20, "t/0", 20))
	require.NoError(t, w.Close(ctx))
	got := ids(readStream(t, e, p.Target))
	want := map[int64]int{}
	for _, id := range got {
		want[id]++
	}
	for _, r := range [][2]int64{{0, 20}, {1000, 1030}} {
		for id := r[0]; id < r[1]; id++ {
			require.Equalf(t, 1, want[id], "id %d", id)
		}
	}
	require.Len(t, got, 50)
	cp, err = s.Checkpoint(ctx, p)
	require.NoError(t, err)
	require.Equal(t, string(checkpoint.Positions{"t/0": 20, "t/1": 30}.Encode()), string(cp))
}

// TestCloseAfterAbandonedBatch: a batch abandoned on a cancelled context
// leaves its confirms unread; Close must still return (the client's
// confirm channel would otherwise block its reader and Close for ever).
func TestCloseAfterAbandonedBatch(t *testing.T) {
	u, _ := env(t)
	s, p := newSink(t, u)
	w, _, err := s.Open(context.Background(), p)
	require.NoError(t, err)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	// Many frames, so many confirm frames come back and nobody reads them.
	rec := sinktest.Batch(mem, 0, 30000)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = w.WriteBatch(ctx, rec, sinktest.CP(30000))
	rec.Release()
	require.ErrorIs(t, err, context.Canceled, "a batch sent on a cancelled context is abandoned, however fast its confirms")
	time.Sleep(time.Second) // the confirms arrive
	done := make(chan error, 1)
	go func() { done <- w.Close(context.Background()) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Close hung after an abandoned batch")
	}
}
