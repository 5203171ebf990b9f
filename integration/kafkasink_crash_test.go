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
// kill -9s it at random points 32 times, restarting it each time, then
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

	// Records keep arriving through all the kills: 64000 in chunks of 500
	// every 300ms (≈ 40 s), after one aborted transaction.
	const n = 64000
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		produceSlowly(t, brokers, a, n, 500, 300*time.Millisecond)
	}()

	pipeline := a + "-pipe"
	args := []string{"run", "--source",
		fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s-g&batch_rows=200&batch_wait=50ms&membership=false", brokers, a, a),
		"--sink", fmt.Sprintf("kafka:?brokers=%s&topic=%s", brokers, b),
		"--stream", a, "--pipeline", pipeline, "--log-level", "warn"}
	sink, err := kafkasink.New(strings.Split(brokers, ","))
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

	const kills = 32
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := range kills {
		p := start(t, bin, args...)
		time.Sleep(time.Duration(300+rng.IntN(1500)) * time.Millisecond)
		if done, err := p.exited(); done {
			t.Fatalf("run %d exited before its kill (%v):\n%s", i, err, p.log.String())
		}
		p.kill()
		t.Logf("kill %d: committed %s", i, committed().Encode())
	}
	<-produced
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

// produceSlowly writes one aborted transaction, then records k0..k(n-1)
// round-robin, chunk at a time every interval, rotating four codecs.
func produceSlowly(t *testing.T, brokers, topic string, n, chunk int, interval time.Duration) {
	ctx := context.Background()
	seeds := strings.Split(brokers, ",")
	tx, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.TransactionalID(topic+"-aborter"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	require.NoError(t, tx.BeginTransaction())
	for range 30 {
		tx.Produce(ctx, &kgo.Record{Key: []byte("aborted"), Value: []byte("aborted")}, nil)
	}
	require.NoError(t, tx.Flush(ctx))
	require.NoError(t, tx.EndTransaction(ctx, kgo.TryAbort))
	tx.Close()
	codecs := []kgo.CompressionCodec{kgo.NoCompression(), kgo.Lz4Compression(), kgo.ZstdCompression(), kgo.GzipCompression()}
	cls := make([]*kgo.Client, len(codecs))
	for i, c := range codecs {
		cls[i], err = kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(c))
		require.NoError(t, err)
		defer cls[i].Close()
	}
	for c := 0; c*chunk < n; c++ {
		time.Sleep(interval)
		recs := make([]*kgo.Record, 0, chunk)
		for i := c * chunk; i < min(n, (c+1)*chunk); i++ {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "value-%d-%0*d", i, i%64, 0)})
		}
		require.NoError(t, cls[c%len(cls)].ProduceSync(ctx, recs...).FirstErr())
	}
}
