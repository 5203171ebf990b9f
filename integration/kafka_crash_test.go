package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
)

// TestIntegrationKafkaCrashKill9 runs `flightline run` from a real Kafka
// topic (3 partitions, records in four codecs, an aborted transaction) into
// a dir: sink, as a member of a consumer group, and kill -9s it at random
// points, restarting it each time. Then a last run catches up to the end of
// the topic. Every record must be in the sink exactly once, in offset order
// per partition, and the aborted records not at all.
func TestIntegrationKafkaCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	brokers := Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker")
	bin := flightlineBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic := fmt.Sprintf("crash-%d", time.Now().UnixNano())
	resp, err := adm.CreateTopic(ctx, 3, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)

	// Records keep arriving while the pipeline is killed: 60 chunks of
	// 1000, one every 150ms, rotating codecs; an aborted transaction first.
	const n = 60000
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		produceCrashRecords(t, brokers, topic, n)
	}()

	dir := t.TempDir()
	pipeline := topic + "-pipe"
	args := []string{"run", "--source",
		fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s-g&batch_rows=200&batch_wait=50ms&session_timeout=6s&instance_id=crash-1", brokers, topic, topic),
		"--sink", "dir:" + dir, "--stream", topic, "--pipeline", pipeline, "--target", "out", "--log-level", "warn"}
	sink, err := flightsink.NewDir(dir, nil)
	require.NoError(t, err)
	committed := func() checkpoint.Positions {
		cp, err := sink.Checkpoint(ctx, flightsink.Pipeline{ID: pipeline, Target: "out"})
		require.NoError(t, err)
		if cp == nil {
			return nil
		}
		p, err := checkpoint.Parse(cp)
		require.NoError(t, err)
		return p
	}

	const kills = 12
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
	for i := range kills {
		p := start(t, bin, args...)
		time.Sleep(time.Duration(700+rng.IntN(1500)) * time.Millisecond)
		if done, err := p.exited(); done {
			t.Fatalf("run %d exited before its kill (%v):\n%s", i, err, p.log.String())
		}
		p.kill()
		t.Logf("kill %d: committed %s", i, committed().Encode())
	}
	<-produced
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	want := checkpoint.Positions{}
	ends.Each(func(o kadm.ListedOffset) { want[fmt.Sprintf("%s/%d", topic, o.Partition)] = o.Offset })
	final := start(t, bin, args...)
	require.Eventually(t, func() bool {
		c := committed()
		return c != nil && checkpoint.Covers(c, want)
	}, 3*time.Minute, 200*time.Millisecond, "the last run did not reach the end of the topic %s:\n%s", want.Encode(), final.log)
	final.kill()

	// Read every commit file back, independently of the sink's reader.
	files, err := filepath.Glob(filepath.Join(dir, "out", "*.arrow"))
	require.NoError(t, err)
	seen := map[string]int{}
	last := map[int32]int64{}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	rows := 0
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		r, err := ipc.NewFileReader(fh, ipc.WithAllocator(mem))
		require.NoError(t, err)
		for i := range r.NumRecords() {
			rec, err := r.RecordBatch(i)
			require.NoError(t, err)
			ps := rec.Column(0).(*array.Int32)
			offs := rec.Column(1).(*array.Int64)
			keys := rec.Column(3).(*array.BinaryView)
			for j := 0; j < int(rec.NumRows()); j++ {
				p, off, k := ps.Value(j), offs.Value(j), string(keys.Value(j))
				require.NotEqual(t, "aborted", k)
				if l, ok := last[p]; ok {
					require.Greater(t, off, l, "partition %d out of order in %s", p, f)
				}
				last[p] = off
				seen[k]++
				rows++
			}
		}
		r.Close()
		fh.Close()
	}
	mem.AssertSize(t, 0)
	for i := range n {
		require.Equalf(t, 1, seen[fmt.Sprintf("k%d", i)], "record k%d", i)
	}
	require.Equal(t, n, rows)
	t.Logf("%d kills; %d commit files; %d records exactly once", kills, len(files), rows)
}

// produceCrashRecords writes one aborted transaction, then n records
// k0..k(n-1) round-robin in chunks of 1000 every 150ms, rotating four
// codecs.
func produceCrashRecords(t *testing.T, brokers, topic string, n int) {
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
	for c := 0; c*1000 < n; c++ {
		time.Sleep(150 * time.Millisecond)
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(codecs[c%4]))
		require.NoError(t, err)
		var wg sync.WaitGroup
		var perr error
		var mu sync.Mutex
		for i := c * 1000; i < min(n, (c+1)*1000); i++ {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "value-%d-%0*d", i, i%64, 0)}, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					perr = err
					mu.Unlock()
				}
				wg.Done()
			})
		}
		wg.Wait()
		cl.Close()
		require.NoError(t, perr)
	}
}
