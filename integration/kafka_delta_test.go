package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/internal/objstore"
)

// kafkaTopic creates a fresh topic with parts partitions on the real
// broker and returns a client and admin for it.
func kafkaTopic(t *testing.T, ctx context.Context, brokers, prefix string, parts int32) (*kadm.Client, string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	topic := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	resp, err := adm.CreateTopic(ctx, parts, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	return adm, topic
}

// produceKeys writes records k0..k(n-1) round-robin, in chunks of chunk
// records every pause, and returns when all are acknowledged.
func produceKeys(t *testing.T, brokers, topic string, n, chunk int, pause time.Duration) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	require.NoError(t, err)
	defer cl.Close()
	ctx := context.Background()
	var mu sync.Mutex
	var perr error
	for c := 0; c*chunk < n; c++ {
		if c > 0 {
			time.Sleep(pause)
		}
		var wg sync.WaitGroup
		for i := c * chunk; i < min(n, (c+1)*chunk); i++ {
			wg.Add(1)
			v := fmt.Appendf(nil, `{"order_id":%d,"item":"item-%d","price":%d.25}`, i, i%97, i%1000)
			cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					perr = err
					mu.Unlock()
				}
				wg.Done()
			})
		}
		wg.Wait()
	}
	require.NoError(t, perr)
}

// endPositions is the checkpoint that covers every record of topic.
func endPositions(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) checkpoint.Positions {
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	want := checkpoint.Positions{}
	ends.Each(func(o kadm.ListedOffset) { want[fmt.Sprintf("%s/%d", topic, o.Partition)] = o.Offset })
	return want
}

// deltaSinkSpec is the flightline --sink spec of uri; on S3 the endpoint
// goes in the spec and the credentials reach the child through the AWS
// SDK's default chain (the environment).
func deltaSinkSpec(t *testing.T, uri string, storage objstore.Options, extra string) string {
	spec := "delta:" + uri + "?checkpoint_interval=10" + extra
	if storage != nil {
		spec += "&AWS_ENDPOINT_URL=" + storage[objstore.EndpointURL] + "&AWS_ALLOW_HTTP=true&AWS_REGION=us-east-1"
		t.Setenv("AWS_ACCESS_KEY_ID", storage[objstore.AccessKeyID])
		t.Setenv("AWS_SECRET_ACCESS_KEY", storage[objstore.SecretAccessKey])
	}
	return spec
}

// TestIntegrationKafkaDeltaCrashKill9 runs `flightline run --source kafka:…
// --sink delta:…` on the real broker (3 partitions, records arriving while
// it runs, a member of a consumer group with a static instance id) and
// kill -9s it at random points 10 times (30 under FLIGHTLINE_CHAOS=1),
// restarting it each time; a last
// run catches up to the end of the topic. delta-rs must find every record
// exactly once by key. On local disk and on S3 (versitygw).
func TestIntegrationKafkaDeltaCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	brokers := Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker")
	for _, loc := range deltaLocations {
		t.Run(loc.name, func(t *testing.T) {
			storage := loc.storage(t)
			bin := flightlineBin(t)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			adm, topic := kafkaTopic(t, ctx, brokers, "kdcrash-"+loc.name, 3)
			uri := loc.uri(t, "kafka_orders")
			const n = 24_000
			kills := killCount(10, 30)
			produced := make(chan struct{})
			go func() {
				defer close(produced)
				produceKeys(t, brokers, topic, n, 800, 800*time.Millisecond)
			}()

			pipeline := topic + "-pipe"
			args := []string{"run", "--source",
				fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s-g&batch_rows=300&batch_wait=50ms&session_timeout=6s&instance_id=crash-1", brokers, topic, topic),
				"--sink", deltaSinkSpec(t, uri, storage, ""), "--stream", topic, "--pipeline", pipeline, "--log-level", "warn"}
			sink, err := sinkdelta.New(ctx, sinkdelta.Config{URI: uri, Storage: storage})
			require.NoError(t, err)
			committed := func() checkpoint.Positions {
				cp, err := sink.Checkpoint(ctx, flightsink.Pipeline{ID: pipeline})
				require.NoError(t, err)
				if cp == nil {
					return nil
				}
				p, err := checkpoint.Parse(cp)
				require.NoError(t, err)
				return p
			}

			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
			for i := range kills {
				p := start(t, bin, args...)
				time.Sleep(time.Duration(200+rng.IntN(1200)) * time.Millisecond)
				if done, err := p.exited(); done {
					t.Fatalf("run %d exited before its kill (%v):\n%s", i, err, p.log.String())
				}
				p.kill()
				if i%5 == 4 {
					t.Logf("kill %d: committed %s", i+1, committed().Encode())
				}
			}
			<-produced
			want := endPositions(t, ctx, adm, topic)
			final := start(t, bin, args...)
			require.Eventually(t, func() bool {
				c := committed()
				return c != nil && checkpoint.Covers(c, want)
			}, 3*time.Minute, 200*time.Millisecond, "the last run did not reach the end of the topic %s:\n%s", want.Encode(), final.log)
			final.kill()
			require.Equal(t, string(want.Encode()), string(committed().Encode()), "the table's checkpoint is the end of the topic")
			verifyDeltaKeys(t, uri, storage, "key", n, "k")
		})
	}
}

// TestIntegrationKafkaDeltaSplitKill9 runs the Kafka source (serve-source,
// a consumer-group member), the Delta sink (serve-sink) and the
// coordinator (run) as three processes talking Flight over loopback, on
// the real broker with records arriving, and kill -9s a random one of
// them 10 times (30 under FLIGHTLINE_CHAOS=1), restarting it each time.
// delta-rs must find every record
// exactly once by key.
func TestIntegrationKafkaDeltaSplitKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	brokers := Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker")
	Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	bin := flightlineBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adm, topic := kafkaTopic(t, ctx, brokers, "kdsplit", 3)
	uri := filepath.Join(t.TempDir(), "orders")
	const n = 20_000
	kills := killCount(10, 30)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		produceKeys(t, brokers, topic, n, 800, 800*time.Millisecond)
	}()

	pipeline := topic + "-pipe"
	srcAddr, sinkAddr := freePort(t), freePort(t)
	argv := map[string][]string{
		"source": {"serve-source", "--listen", srcAddr, "--log-level", "warn", "--source",
			fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s-g&batch_rows=300&batch_wait=50ms&session_timeout=6s&instance_id=split-1", brokers, topic, topic)},
		"sink": {"serve-sink", "--listen", sinkAddr, "--log-level", "warn", "--sink", "delta:" + uri + "?checkpoint_interval=10"},
		"run": {"run", "--source", "grpc://" + srcAddr, "--sink", "grpc://" + sinkAddr, "--stream", topic,
			"--pipeline", pipeline, "--log-level", "warn"},
	}
	names := []string{"source", "sink", "run"}
	procs := map[string]*proc{}
	for _, name := range names {
		procs[name] = start(t, bin, argv[name]...)
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 13))
	victims := map[string]int{}
	for range kills {
		time.Sleep(time.Duration(300+rng.IntN(900)) * time.Millisecond)
		for _, name := range names {
			if done, err := procs[name].exited(); done {
				t.Fatalf("%s exited before its kill (%v):\n%s", name, err, procs[name].log.String())
			}
		}
		victim := names[rng.IntN(len(names))]
		procs[victim].kill()
		victims[victim]++
		procs[victim] = start(t, bin, argv[victim]...)
	}
	t.Logf("kills: %v", victims)
	<-produced
	want := endPositions(t, ctx, adm, topic)
	sink, err := sinkdelta.New(ctx, sinkdelta.Config{URI: uri})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		cp, err := sink.Checkpoint(ctx, flightsink.Pipeline{ID: pipeline})
		require.NoError(t, err)
		if cp == nil {
			return false
		}
		p, err := checkpoint.Parse(cp)
		require.NoError(t, err)
		return checkpoint.Covers(p, want)
	}, 3*time.Minute, 200*time.Millisecond, "the pipeline did not reach the end of the topic %s:\n%s", want.Encode(), procs["run"].log)
	for _, name := range names {
		procs[name].kill()
	}
	verifyDeltaKeys(t, uri, nil, "key", n, "k")
}
