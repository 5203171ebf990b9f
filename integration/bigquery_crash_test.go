package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/internal/bqrest"
)

// TestIntegrationBigQueryCrashKill9 runs `flightline run --source kafka:…
// --sink bigquery:…` (the Kafka → BigQuery pipeline) against the real
// broker and the BigQuery emulator while records keep arriving, kill -9s
// it at least 30 times at random points, restarting it each time; a last
// run catches up. The records update keys: key k<j> is written many times,
// always to one partition, with a growing value. The sink is at-least-once
// (each run resumes from the group's offsets and replays what followed),
// made idempotent by its MERGE on the key column. Read back through the
// emulator's REST API with plain HTTP (not the sink's client): every key
// once, with the value of its last record.
//
// The test is named TestIntegrationBigQuery… so `make test` runs it in its
// last phase, once the emulator is up (see the Makefile).
func TestIntegrationBigQueryCrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	brokers := Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker")
	endpoint := Need(t, "FLIGHTLINE_BQ_ENDPOINT", "the BigQuery emulator")
	grpcAddr := Need(t, "FLIGHTLINE_BQ_GRPC", "the BigQuery emulator")
	project := Need(t, "FLIGHTLINE_BQ_PROJECT", "the BigQuery emulator")
	dataset := Need(t, "FLIGHTLINE_BQ_DATASET", "the BigQuery emulator")
	bin := flightlineBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic := fmt.Sprintf("bqcrash-%d", time.Now().UnixNano())
	resp, err := adm.CreateTopic(ctx, 3, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)

	const (
		parts = 3
		keys  = 600
		n     = 9000 // 15 versions of each key
	)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		produceBQCrashRecords(t, brokers, topic, n, keys, parts)
	}()

	table := strings.ReplaceAll(topic, "-", "_")
	args := []string{"run", "--source",
		fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s-g&batch_rows=500&batch_wait=300ms&session_timeout=6s&instance_id=bqcrash-1", brokers, topic, topic),
		"--sink", fmt.Sprintf("bigquery:%s/%s?table=%s&key=key&emulator_endpoint=%s&emulator_grpc=%s", project, dataset, table, endpoint, grpcAddr),
		"--stream", topic, "--pipeline", topic + "-pipe", "--log-level", "warn"}

	// latest reads key → value through the REST API, and the row count.
	latest := func() (map[string]int, int, error) {
		rows, err := bqrest.Query(ctx, endpoint, project, fmt.Sprintf("SELECT TO_BASE64(key), TO_BASE64(value) FROM `%s.%s.%s`", project, dataset, table))
		if err != nil {
			return nil, 0, err
		}
		out := map[string]int{}
		for _, r := range rows {
			k, err1 := base64.StdEncoding.DecodeString(*r[0])
			v, err2 := base64.StdEncoding.DecodeString(*r[1])
			if err1 != nil || err2 != nil {
				return nil, 0, fmt.Errorf("bad row %v %v", err1, err2)
			}
			i, err := strconv.Atoi(string(v))
			if err != nil {
				return nil, 0, err
			}
			out[string(k)] = i
		}
		return out, len(rows), nil
	}

	const kills = 30
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))
	for i := range kills {
		p := start(t, bin, args...)
		time.Sleep(time.Duration(800+rng.IntN(3200)) * time.Millisecond)
		if done, err := p.exited(); done {
			t.Fatalf("run %d exited before its kill (%v):\n%s", i, err, p.log.String())
		}
		p.kill()
		m, rows, err := latest()
		t.Logf("kill %d: %d keys in %d rows (%v)", i, len(m), rows, err)
	}
	<-produced
	want := make(map[string]int, keys)
	for i := range n {
		want[fmt.Sprintf("k%d", i%keys)] = i
	}
	final := start(t, bin, args...)
	var got map[string]int
	var rows int
	require.Eventually(t, func() bool {
		got, rows, err = latest()
		if err != nil {
			return false
		}
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	}, 8*time.Minute, time.Second, "the last run did not catch up (%d keys, %d rows, %v):\n%s", len(got), rows, err, final.log)
	final.kill()
	got, rows, err = latest()
	require.NoError(t, err)
	require.Equal(t, keys, rows, "every key once")
	require.Equal(t, want, got, "every key with its latest value")
	t.Logf("%d kills; %d keys each once with its latest value", kills, len(got))
}

// produceBQCrashRecords writes records 0..n-1: record i has key k<i%keys>,
// value i, and goes to partition (i%keys)%parts, so a key's versions are
// in order in one partition; in chunks of 300 every 1.5 s.
func produceBQCrashRecords(t *testing.T, brokers, topic string, n, keys, parts int) {
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	const chunk = 300
	for c := 0; c*chunk < n; c++ {
		time.Sleep(1500 * time.Millisecond)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var perr error
		for i := c * chunk; i < min(n, (c+1)*chunk); i++ {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%keys), Value: fmt.Appendf(nil, "%d", i), Partition: int32((i % keys) % parts)},
				func(_ *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						perr = err
						mu.Unlock()
					}
					wg.Done()
				})
		}
		wg.Wait()
		require.NoError(t, perr)
	}
}
