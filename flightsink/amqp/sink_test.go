package amqp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/amqp"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// broker returns the broker URL and a topic exchange of the test's own,
// with one queue bound to every routing key ("#"), so the sink's messages
// are routable and read back independently of the sink.
func broker(t *testing.T) (string, string, string) {
	u := servicetest.Need(t, "FLIGHTLINE_AMQP_URL", "RabbitMQ")
	conn, err := amqp091.Dial(u)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	name := fmt.Sprintf("fl_test_%d", rand.Int64())
	require.NoError(t, ch.ExchangeDeclare(name, "topic", false, true, false, false, nil))
	_, err = ch.QueueDeclare(name, false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(name, "#", name, false, nil))
	t.Cleanup(func() { _, _ = ch.QueueDelete(name, false, false, false) })
	return u, name, name
}

type delivery struct {
	key, id string
	row     map[string]any
}

// readAll reads every message in queue without acknowledging it, then
// closes the channel, which puts them all back.
func readAll(t *testing.T, u, queue string) []delivery {
	conn, err := amqp091.Dial(u)
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	var out []delivery
	for {
		m, ok, err := ch.Get(queue, false)
		require.NoError(t, err)
		if !ok {
			return out
		}
		require.Equal(t, "application/json", m.ContentType)
		d := delivery{key: m.RoutingKey, id: m.MessageId}
		require.NoError(t, json.Unmarshal(m.Body, &d.row), "%s", m.Body)
		out = append(out, d)
	}
}

func ids(ds []delivery, target string) []int64 {
	var out []int64
	for _, d := range ds {
		if d.key == target {
			out = append(out, int64(d.row["id"].(float64)))
		}
	}
	return out
}

func TestSinktest(t *testing.T) {
	u, exchange, queue := broker(t)
	sinktest.Run(t, sinktest.Harness{
		Guarantee: flightsink.AtLeastOnce,
		Repeats:   true,
		NewSink: func(t *testing.T) flightsink.Sink {
			s, err := amqp.New(context.Background(), amqp.Config{URL: u, Exchange: exchange, RoutingKey: "default"})
			require.NoError(t, err)
			return s
		},
		IDs: func(t *testing.T, p flightsink.Pipeline) []int64 {
			key := p.Target
			if key == "" {
				key = "default"
			}
			return ids(readAll(t, u, queue), key)
		},
	})
}

// TestReplayDedupByMessageID restarts a writer and replays its batches:
// every row arrives at least once, and exactly once after dropping
// repeated MessageIds.
func TestReplayDedupByMessageID(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	u, exchange, queue := broker(t)
	ctx := context.Background()
	s, err := amqp.New(context.Background(), amqp.Config{URL: u, Exchange: exchange, RoutingKey: "k", Headers: []string{"name"}})
	require.NoError(t, err)
	p := flightsink.Pipeline{ID: "dedup"}
	write := func(w flightsink.Writer, from, to int64) {
		rec := sinktest.Batch(mem, from, to)
		defer rec.Release()
		require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(to)))
	}
	w, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Nil(t, cp)
	write(w, 0, 10)
	write(w, 10, 20)
	require.NoError(t, w.Close(ctx))
	// A restart resumes from the source's commit (here: before id 10).
	w, _, err = s.Open(ctx, p)
	require.NoError(t, err)
	write(w, 10, 20)
	write(w, 20, 25)
	require.NoError(t, w.Close(ctx))

	got := readAll(t, u, queue)
	all := ids(got, "k")
	slices.Sort(all)
	require.Len(t, all, 35, "ids 10..19 twice")
	seen := map[string]bool{}
	var once []int64
	for _, d := range got {
		if !seen[d.id] {
			seen[d.id] = true
			once = append(once, int64(d.row["id"].(float64)))
		}
	}
	slices.Sort(once)
	want := make([]int64, 25)
	for i := range want {
		want[i] = int64(i)
	}
	require.Equal(t, want, once, "deduplicated by MessageId: every row exactly once")
	require.Equal(t, amqp.MessageID(p, sinktest.CP(20), 3), amqp.MessageID(p, sinktest.CP(20), 3))
	require.NotEqual(t, amqp.MessageID(p, sinktest.CP(20), 3), amqp.MessageID(p, sinktest.CP(20), 4))
}

func TestUnroutableIsAnError(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	u, _, _ := broker(t)
	conn, err := amqp091.Dial(u)
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	ex := fmt.Sprintf("fl_unbound_%d", rand.Int64())
	require.NoError(t, ch.ExchangeDeclare(ex, "direct", false, true, false, false, nil))
	// Keep the auto-delete exchange alive with a binding on another key.
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(q.Name, "bound", ex, false, nil))

	s, err := amqp.New(context.Background(), amqp.Config{URL: u, Exchange: ex, RoutingKey: "nowhere"})
	require.NoError(t, err)
	w, _, err := s.Open(context.Background(), flightsink.Pipeline{ID: "unroutable"})
	require.NoError(t, err)
	defer w.Close(context.Background())
	rec := sinktest.Batch(mem, 0, 3)
	defer rec.Release()
	err = w.WriteBatch(context.Background(), rec, sinktest.CP(3))
	require.Error(t, err)
	require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
	require.Contains(t, err.Error(), ex)
	require.Contains(t, err.Error(), `"nowhere"`)
}

func TestBrokerDownIsUnavailable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	s, err := amqp.New(context.Background(), amqp.Config{URL: "amqp://guest:guest@" + addr + "/"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err = s.Open(ctx, flightsink.Pipeline{ID: "down"})
	require.ErrorIs(t, err, flightline.ErrUnavailable)
}

func TestWrongCredentialsUnauthenticated(t *testing.T) {
	u, _, _ := broker(t)
	pu, err := url.Parse(u)
	require.NoError(t, err)
	pu.User = url.UserPassword("guest", "not-the-password")
	s, err := amqp.New(context.Background(), amqp.Config{URL: pu.String()})
	require.NoError(t, err)
	_, _, err = s.Open(context.Background(), flightsink.Pipeline{ID: "creds"})
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
	require.NotContains(t, err.Error(), "not-the-password")
}

// TestLargeBatch publishes more rows than the confirm channel holds.
func TestLargeBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	u, exchange, queue := broker(t)
	ctx := context.Background()
	s, err := amqp.New(context.Background(), amqp.Config{URL: u, Exchange: exchange, RoutingKey: "big"})
	require.NoError(t, err)
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "big"})
	require.NoError(t, err)
	defer w.Close(ctx)
	rec := sinktest.Batch(mem, 0, 5000)
	defer rec.Release()
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(5000)))
	got := ids(readAll(t, u, queue), "big")
	slices.Sort(got)
	require.Len(t, got, 5000)
	require.Equal(t, int64(4999), got[4999])
}
