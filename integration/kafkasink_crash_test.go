package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	kafkasink "github.com/flightline/flightline/flightsink/kafka"
)

// TestIntegrationKafkaSinkCrashKill9 runs `flightline run` from Kafka topic
// A (3 partitions, four codecs, an aborted transaction, records arriving
// while it runs) into Kafka topic B through the transactional Kafka sink,
// kill -9s it at random points 10 times (32 under FLIGHTLINE_CHAOS=1),
// restarting it each time, then
// lets a last run catch up. kcat (librdkafka, independent of franz-go)
// reads B with read_committed: every input record is there exactly once,
// with its value, and the aborted records are not.
func TestIntegrationKafkaSinkCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	brokers := Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker")
	kcat := Need(t, "FLIGHTLINE_KCAT", "kcat (librdkafka)")
	bin := flightlineBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	a := fmt.Sprintf("sinkcrash-a-%d", time.Now().UnixNano())
	b := strings.Replace(a, "-a-", "-b-", 1)
	for _, topic := range []string{a, b} {
		resp, err := adm.CreateTopic(ctx, 3, 1, nil, topic)
		require.NoError(t, err)
		require.NoError(t, resp.Err)
	}

	// Records keep arriving through all the kills: each run gets a fresh
	// chunk of 2000 while it is live (after one aborted transaction).
	const chunk = 2000
	kills := killCount(10, 32)
	n := kills * chunk
	abortTxn(t, brokers, a)
	pipeline := a + "-pipe"
	args := []string{"run", "--source",
		fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s-g&batch_rows=200&batch_wait=50ms&membership=false", brokers, a, a),
		"--sink", fmt.Sprintf("kafka:?brokers=%s&topic=%s&transaction_timeout=10s", brokers, b),
		"--stream", a, "--pipeline", pipeline, "--log-level", "warn"}
	sink, err := kafkasink.New(context.Background(), kafkasink.Config{Brokers: strings.Split(brokers, ",")})
	require.NoError(t, err)
	defer sink.Close()
	committed := func() checkpoint.Positions {
		cp, err := sink.Checkpoint(ctx, flightsink.Pipeline{ID: pipeline, Target: b})
		require.NoError(t, err)
		if cp == nil {
			return nil
		}
		p, err := checkpoint.Parse(cp)
		require.NoError(t, err)
		return p
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := range kills {
		produced := make(chan struct{})
		go func() {
			defer close(produced)
			produceChunk(t, brokers, a, i*chunk, (i+1)*chunk, i)
		}()
		p := start(t, bin, args...)
		time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		if done, err := p.exited(); done {
			t.Fatalf("run %d exited before its kill (%v):\n%s", i, err, p.log.String())
		}
		p.kill()
		<-produced
	}
	t.Logf("after %d kills: committed %s", kills, committed().Encode())
	ends, err := adm.ListEndOffsets(ctx, a)
	require.NoError(t, err)
	want := checkpoint.Positions{}
	ends.Each(func(o kadm.ListedOffset) { want[fmt.Sprintf("%s/%d", a, o.Partition)] = o.Offset })
	final := start(t, bin, args...)
	require.Eventually(t, func() bool {
		c := committed()
		return c != nil && checkpoint.Covers(c, want)
	}, 3*time.Minute, 200*time.Millisecond, "the last run did not reach the end of %s %s:\n%s", a, want.Encode(), final.log)
	final.kill()

	out, err := exec.CommandContext(ctx, kcat, "-C", "-b", brokers, "-t", b, "-X", "isolation.level=read_committed",
		"-o", "beginning", "-e", "-q", "-f", "%k %s\n").Output()
	require.NoError(t, err)
	seen := map[string]int{}
	rows := 0
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, " ")
		require.True(t, ok, "line %q", line)
		require.NotEqual(t, "aborted", k)
		var i int
		_, err := fmt.Sscanf(k, "k%d", &i)
		require.NoError(t, err, "key %q", k)
		require.True(t, strings.HasPrefix(v, fmt.Sprintf("value-%d-", i)), "record %s has value %q", k, v)
		seen[k]++
		rows++
	}
	for i := range n {
		require.Equalf(t, 1, seen[fmt.Sprintf("k%d", i)], "record k%d in %s", i, b)
	}
	require.Equal(t, n, rows)
	t.Logf("%d kills; %d records read back by kcat (read_committed) exactly once", kills, rows)
}

// abortTxn writes 30 records keyed "aborted" in a transaction it aborts.
func abortTxn(t *testing.T, brokers, topic string) {
	ctx := context.Background()
	tx, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.TransactionalID(topic+"-aborter"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	defer tx.Close()
	require.NoError(t, tx.BeginTransaction())
	for range 30 {
		tx.Produce(ctx, &kgo.Record{Key: []byte("aborted"), Value: []byte("aborted")}, nil)
	}
	require.NoError(t, tx.Flush(ctx))
	require.NoError(t, tx.EndTransaction(ctx, kgo.TryAbort))
}

// produceChunk writes records k<from>..k<to-1> round-robin in four slices
// 150ms apart, with codec number c (mod 4).
func produceChunk(t *testing.T, brokers, topic string, from, to, c int) {
	ctx := context.Background()
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.Lz4Compression(), kgo.ZstdCompression(), kgo.GzipCompression()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(codecs[c%len(codecs)]))
	require.NoError(t, err)
	defer cl.Close()
	step := (to - from + 3) / 4
	for lo := from; lo < to; lo += step {
		time.Sleep(150 * time.Millisecond)
		recs := make([]*kgo.Record, 0, step)
		for i := lo; i < min(to, lo+step); i++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "value-%d-%0*d", i, i%64, 0)})
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	}
}
