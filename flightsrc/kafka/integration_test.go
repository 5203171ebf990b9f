package kafka_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/integration"
)

// realBroker returns the test broker's address (services.sh up kafka).
func realBroker(t *testing.T) []string {
	t.Helper()
	return strings.Split(integration.Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker"), ",")
}

// createTopic creates a fresh topic with a unique name.
func createTopic(t testing.TB, brokers []string, prefix string, partitions int32) string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	name := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, name)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	return name
}

// produceMixed writes n records in four rounds, each with another
// compression codec, plus one aborted transaction.
func produceMixed(t testing.TB, brokers []string, topic string, n int) {
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.Lz4Compression(), kgo.ZstdCompression(), kgo.SnappyCompression()}
	q := n / len(codecs)
	for i, c := range codecs {
		cnt := q
		if i == len(codecs)-1 {
			cnt = n - q*i
		}
		aborted := 0
		if i == 1 {
			aborted = 25
		}
		produce(t, brokers, topic, q*i, cnt, aborted, kgo.ProducerBatchCompression(c))
	}
}

// TestIntegrationKafkaExactlyOnce reads a real broker's topic (3
// partitions, four codecs, an aborted transaction) into the in-memory sink
// through the coordinator, stopping and restarting the pipeline at random
// points: every record arrives exactly once, in order per partition.
func TestIntegrationKafkaExactlyOnce(t *testing.T) {
	brokers := realBroker(t)
	topic := createTopic(t, brokers, "eo", 3)
	const n = 20000
	produceMixed(t, brokers, topic, n)
	mem := checkedMem(t)
	sink := flightsink.NewMemory()
	defer sink.Release()
	pl := flightsink.Pipeline{ID: topic + "-pipe", Target: topic}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for round := 0; ; round++ {
		src, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{topic}, GroupID: topic + "-g", BatchRows: 500, BatchWait: 50 * time.Millisecond, SessionTimeout: 6 * time.Second, InstanceID: "eo-1"},
			kafka.Allocator(mem), kafka.Logger(quietLog()))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		c, err := coordinator.New(src, sink, topic, pl, coordinator.WithLogger(quietLog()),
			coordinator.Backoff(20*time.Millisecond, time.Second), coordinator.CommitInterval(100*time.Millisecond))
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		if round < 4 {
			time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		} else {
			require.Eventually(t, func() bool { return countRows(sink, topic) >= n }, 60*time.Second, 50*time.Millisecond)
		}
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, src.Close())
		if round >= 4 {
			break
		}
	}
	rows := sinkRows(t, sink, topic)
	checkExactlyOnce(t, rows, n)
	t.Logf("%d rows, exactly once, after 4 interrupted runs", len(rows))
}

// mergeSink lets several instances write one logical pipeline: each
// instance has its own sub-pipeline (so fencing is per instance), Open
// returns the per-partition maximum over every commit of every instance,
// as the Delta sink does. It records every commit for the checks.
type mergeSink struct {
	*flightsink.Memory
	mu      sync.Mutex
	merged  checkpoint.Positions
	commits []commit
	t       *testing.T
}

type commit struct {
	pipeline string
	cp       checkpoint.Positions
	before   checkpoint.Positions // merged positions before this commit
	part     int32
	first    int64 // first offset of the batch's rows, -1 if none
}

func (m *mergeSink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	w, _, err := m.Memory.Open(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var cp []byte
	if len(m.merged) > 0 {
		cp = m.merged.Encode()
	}
	return &mergeWriter{Writer: w, m: m, p: p}, cp, nil
}

type mergeWriter struct {
	flightsink.Writer
	m *mergeSink
	p flightsink.Pipeline
}

func (w *mergeWriter) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	w.m.mu.Lock() // one commit at a time, so "before" is exact
	defer w.m.mu.Unlock()
	if err := w.Writer.WriteBatch(ctx, rec, cp); err != nil {
		return err
	}
	pos, err := checkpoint.Parse(cp)
	if err != nil {
		return err
	}
	c := commit{pipeline: w.p.ID, cp: pos, before: checkpoint.Merge(nil, w.m.merged), first: -1}
	if rec.NumRows() > 0 {
		rows := rowsOf(w.m.t, []arrow.RecordBatch{rec})
		c.part, c.first = rows[0].p, rows[0].off
	}
	w.m.commits = append(w.m.commits, c)
	w.m.merged = checkpoint.Merge(w.m.merged, pos)
	return nil
}

// TestIntegrationKafkaRebalance runs two source instances in one consumer
// group into one logical pipeline while records keep arriving, and forces
// rebalances by starting, stopping and restarting the second instance.
// Every record must arrive exactly once; no commit may move a partition's
// position backwards (a stale position of a partition the instance no
// longer owns), and a partition taken over by the other instance continues
// exactly at the position the previous owner committed.
func TestIntegrationKafkaRebalance(t *testing.T) {
	brokers := realBroker(t)
	topic := createTopic(t, brokers, "rb", 4)
	group := topic + "-g"
	mem := checkedMem(t)
	sink := &mergeSink{Memory: flightsink.NewMemory(), t: t}
	defer sink.Release()

	// Keep producing while instances come and go (at least 10,000
	// records); the count produced comes back on produced.
	stopProducing, produced := make(chan struct{}), make(chan int, 1)
	go func() {
		i := 0
		for ; ; i += 1000 {
			select {
			case <-stopProducing:
				if i >= 10_000 {
					produced <- i
					return
				}
			default:
			}
			produce(t, brokers, topic, i, 1000, 0, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
			time.Sleep(100 * time.Millisecond)
		}
	}()

	type instance struct {
		src    *kafka.Source
		cancel context.CancelFunc
		done   chan error
	}
	startInstance := func(name string) *instance {
		src, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{topic}, GroupID: group, BatchRows: 300, BatchWait: 50 * time.Millisecond, SessionTimeout: 6 * time.Second},
			kafka.Allocator(mem), kafka.Logger(quietLog()))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		c, err := coordinator.New(src, sink, topic, flightsink.Pipeline{ID: group + "#" + name, Target: topic},
			coordinator.WithLogger(quietLog()), coordinator.Backoff(20*time.Millisecond, 500*time.Millisecond),
			coordinator.CommitInterval(100*time.Millisecond))
		require.NoError(t, err)
		in := &instance{src: src, cancel: cancel, done: make(chan error, 1)}
		go func() { in.done <- c.Run(ctx) }()
		return in
	}
	stop := func(in *instance) {
		in.cancel()
		require.NoError(t, <-in.done)
		require.NoError(t, in.src.Close()) // leaves the group: a rebalance
	}

	// waitCommit waits until instance name commits records (of one of
	// parts, when given) after the sink's first since commits, and
	// returns the number of commits then and the partitions name has
	// committed records of so far: each step below waits for the
	// rebalance before it to be done, not for a time.
	waitCommit := func(name string, since int, parts map[int32]bool, why string) (int, map[int32]bool) {
		pipeline := group + "#" + name
		require.Eventually(t, func() bool {
			sink.mu.Lock()
			defer sink.mu.Unlock()
			for _, c := range sink.commits[since:] {
				if c.pipeline == pipeline && c.first >= 0 && (parts == nil || parts[c.part]) {
					return true
				}
			}
			return false
		}, 90*time.Second, 20*time.Millisecond, why)
		sink.mu.Lock()
		defer sink.mu.Unlock()
		owned := map[int32]bool{}
		for _, c := range sink.commits {
			if c.pipeline == pipeline && c.first >= 0 {
				owned[c.part] = true
			}
		}
		return len(sink.commits), owned
	}
	a := startInstance("a")
	since, _ := waitCommit("a", 0, nil, "a never committed")
	b := startInstance("b") // rebalance: b takes some partitions from a
	since, ofB := waitCommit("b", since, nil, "b never committed: no rebalance gave it partitions")
	stop(b) // rebalance: a takes them back
	since, _ = waitCommit("a", since, ofB, "a did not take over b's partitions")
	b = startInstance("b") // and once more
	waitCommit("b", since, nil, "the restarted b never committed")
	close(stopProducing)
	n := <-produced
	require.Eventually(t, func() bool { return countRows(sink.Memory, topic) >= n }, 90*time.Second, 50*time.Millisecond)
	stop(a)
	stop(b)

	checkExactlyOnce(t, sinkRows(t, sink.Memory, topic), n)

	sink.mu.Lock()
	defer sink.mu.Unlock()
	owners := map[int32]map[string]bool{}
	for _, c := range sink.commits {
		for k, v := range c.cp {
			require.GreaterOrEqualf(t, v, c.before[k], "%s committed %s=%d behind the merged %d: a stale position of a partition it did not own", c.pipeline, k, v, c.before[k])
		}
		if c.first >= 0 {
			k := fmt.Sprintf("%s/%d", topic, c.part)
			require.GreaterOrEqualf(t, c.first, c.before[k], "%s re-wrote %s from %d below the committed %d", c.pipeline, k, c.first, c.before[k])
			if owners[c.part] == nil {
				owners[c.part] = map[string]bool{}
			}
			owners[c.part][c.pipeline] = true
		}
	}
	moved := 0
	for _, o := range owners {
		if len(o) > 1 {
			moved++
		}
	}
	require.Positive(t, moved, "no partition changed owner: the test forced no rebalance")
	t.Logf("%d commits; %d of 4 partitions served by both instances", len(sink.commits), moved)

	// The advisory group commit reached the broker.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), group)
	require.NoError(t, err)
	require.NotEmpty(t, offs)
}

func TestIntegrationKafkaErrors(t *testing.T) {
	brokers := realBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	src, err := kafka.New(context.Background(), kafka.Config{Brokers: brokers, Topics: []string{"no-such-topic"}, GroupID: "g"}, kafka.Logger(quietLog()))
	require.NoError(t, err)
	defer src.Close()
	_, err = src.Read(ctx, flightsrc.ReadRequest{Stream: "no-such-topic"})
	require.ErrorIs(t, err, flightline.ErrNotFound)
	require.Contains(t, err.Error(), "does not exist")

	sasl := integration.Need(t, "FLIGHTLINE_KAFKA_SASL_BROKERS", "Kafka SASL listener")
	topic := createTopic(t, brokers, "auth", 1)
	bad, err := kafka.New(context.Background(), kafka.Config{Brokers: []string{sasl}, Topics: []string{topic}, GroupID: "g",
		SASL: "PLAIN", User: "flightline", Password: "wrong-password"}, kafka.Logger(quietLog()))
	require.NoError(t, err)
	defer bad.Close()
	_, err = bad.Read(ctx, flightsrc.ReadRequest{Stream: topic})
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
	require.Contains(t, err.Error(), "credentials")
	require.False(t, flightline.IsRetryable(err))

	good, err := kafka.New(context.Background(), kafka.Config{Brokers: []string{sasl}, Topics: []string{topic}, GroupID: "g",
		SASL: "PLAIN", User: integration.Need(t, "FLIGHTLINE_KAFKA_SASL_USER", "SASL user"),
		Password: integration.Need(t, "FLIGHTLINE_KAFKA_SASL_PASSWORD", "SASL password")}, kafka.Logger(quietLog()))
	require.NoError(t, err)
	defer good.Close()
	rd, err := good.Read(ctx, flightsrc.ReadRequest{Stream: topic})
	require.NoError(t, err)
	require.NoError(t, rd.Close())
}
