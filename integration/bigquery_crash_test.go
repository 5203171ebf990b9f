package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// it 10 times (30 under FLIGHTLINE_CHAOS=1), each at a random point
// shortly after the run commits something new (most of them; see below),
// restarting it each time; a last run catches up. The records update keys: key k<j> is written many times,
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
		n     = 12000 // 20 versions of each key
	)
	produced := make(chan struct{})
	var sent atomic.Int64 // records acknowledged by the broker so far
	go func() {
		defer close(produced)
		produceBQCrashRecords(t, brokers, topic, n, keys, parts, &sent)
	}()

	table := strings.ReplaceAll(topic, "-", "_")
	args := []string{"run", "--source",
		fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s-g&batch_rows=300&batch_wait=300ms&session_timeout=6s&instance_id=bqcrash-1", brokers, topic, topic),
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

	// progress is how many of the records so far are reflected: the sum
	// over keys of the highest record index each key holds (a run that
	// commits anything moves it).
	progress := func(m map[string]int) int {
		sum := 0
		for _, v := range m {
			sum += v/keys + 1
		}
		return sum
	}
	// Each run is killed at a random point shortly after it commits
	// something new, so every kill lands on a pipeline that is writing
	// (a slow emulator would otherwise let a time-based kill land before
	// the first commit every time, and the test would prove nothing);
	// when everything produced so far is already in the table, at a random
	// point instead. A run that commits nothing new for two minutes while
	// records wait is a stall, and fails the test.
	kills := killCount(10, 30)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 17))
	m, _, _ := latest()
	midWrite := 0
	for i := range kills {
		before := progress(m)
		p := start(t, bin, args...)
		t0 := time.Now()
		for {
			if done, err := p.exited(); done {
				t.Fatalf("run %d exited before its kill (%v):\n%s", i, err, p.log.String())
			}
			if cur, _, err := latest(); err == nil {
				m = cur
			}
			if progress(m) > before {
				midWrite++
				time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
				break
			}
			if caught := int(sent.Load()); progress(m) >= caught && time.Since(t0) > time.Duration(800+rng.IntN(3200))*time.Millisecond {
				break // nothing new to write yet
			}
			if time.Since(t0) > 2*time.Minute {
				t.Fatalf("run %d committed nothing new in 2 minutes (%d of %d versions produced so far in the table):\n%s",
					i, progress(m), sent.Load(), p.log.String())
			}
			// Not faster: every read is a query job, and the emulator
			// slows as its job history grows (a SELECT 1 takes 20 ms on
			// a fresh emulator, 550 ms after 373 jobs).
			time.Sleep(700 * time.Millisecond)
		}
		p.kill()
		m2, rows, err := latest()
		if err == nil {
			m = m2
		}
		t.Logf("kill %d after %v: %d keys in %d rows, %d versions reflected (%v)", i, time.Since(t0).Round(time.Millisecond), len(m2), rows, progress(m), err)
	}
	t.Logf("%d of %d kills landed after a commit of new records", midWrite, kills)
	require.GreaterOrEqual(t, midWrite, kills/2, "most kills must land while the pipeline writes")
	<-produced
	want := make(map[string]int, keys)
	for i := range n {
		want[fmt.Sprintf("k%d", i%keys)] = i
	}
	final := start(t, bin, args...)
	var (
		got  map[string]int
		rows int
		lerr error
	)
	caughtUp := func() bool {
		got, rows, lerr = latest()
		if lerr != nil {
			return false
		}
		for k, v := range want {
			if got[k] != v {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(8 * time.Minute)
	last := time.Now()
	for !caughtUp() {
		if done, err := final.exited(); done {
			t.Fatalf("the last run exited (%v) before catching up (%d keys, %d rows, %d of %d versions, %v):\n%s",
				err, len(got), rows, progress(got), n, lerr, final.log.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last run did not catch up in 8 minutes (%d keys, %d rows, %d of %d versions, %v):\n%s",
				len(got), rows, progress(got), n, lerr, final.log.String())
		}
		if time.Since(last) > 30*time.Second {
			t.Logf("catching up: %d of %d versions reflected", progress(got), n)
			last = time.Now()
		}
		time.Sleep(2 * time.Second)
	}
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
func produceBQCrashRecords(t *testing.T, brokers, topic string, n, keys, parts int, sent *atomic.Int64) {
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
		sent.Store(int64(min(n, (c+1)*chunk)))
	}
}
