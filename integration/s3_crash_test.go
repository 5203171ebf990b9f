package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/internal/objstore"
)

// TestIntegrationS3CrashKill9 runs `flightline run --source kafka:…
// --sink s3:…?commit=at-least-once` (the deterministic-key writer kept for
// stores without If-None-Match; the default exactly-once mode has the
// store kill tests, TestIntegrationStoreKill9Generator/s3 and
// TestIntegrationStoreKill9Kafka/s3) on the real broker and versitygw, while records keep
// arriving, and kill -9s it 10 times (32 under FLIGHTLINE_CHAOS=1) at random
// points, restarting
// it each time; a last run catches up. The S3 sink keeps no checkpoint: each
// run resumes from the consumer group's offsets (the coordinator's advisory
// commits), so it replays whatever was written since the last group commit.
// pyarrow.dataset, with its own S3 client, then reads the pipeline's
// directory as one dataset: every record exactly once — the replays
// overwrote the objects they had written — every object one batch of
// batch_rows rows, none of the aborted records.
//
// Batches are cut by batch_rows only (each partition gets a multiple of
// batch_rows records and batch_wait is longer than the test), which is the
// deterministic-boundary condition the S3 sink's key scheme needs.
func TestIntegrationS3CrashKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	brokers := Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker")
	endpoint := Need(t, "FLIGHTLINE_S3_ENDPOINT", "S3 server (versitygw)")
	access := Need(t, "FLIGHTLINE_S3_ACCESS_KEY", "S3 access key")
	secret := Need(t, "FLIGHTLINE_S3_SECRET_KEY", "S3 secret key")
	py := Need(t, "FLIGHTLINE_PYTHON", "python with pyarrow")
	bin := flightlineBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	// Credentials reach the child through the SDK's default chain.
	t.Setenv("AWS_ACCESS_KEY_ID", access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	const bucket = "flightline-test"
	st, err := objstore.NewS3(ctx, bucket, "", objstore.Options{objstore.EndpointURL: endpoint, objstore.AllowHTTP: "true"})
	require.NoError(t, err)
	_, err = st.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		require.NoError(t, err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic := fmt.Sprintf("s3crash-%d", time.Now().UnixNano())
	resp, err := adm.CreateTopic(ctx, 3, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)

	const (
		parts     = 3
		perPart   = 12000
		n         = parts * perPart
		batchRows = 200
	)
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		produceS3CrashRecords(t, brokers, topic, n, parts)
	}()

	prefix := "s3crash-" + fmt.Sprint(time.Now().UnixNano())
	pipeline := topic + "-pipe"
	group := topic + "-g"
	args := []string{"run", "--source",
		fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s&batch_rows=%d&batch_wait=10m&session_timeout=6s&instance_id=s3crash-1", brokers, topic, group, batchRows),
		"--sink", fmt.Sprintf("s3:%s/%s?commit=at-least-once&AWS_ENDPOINT_URL=%s&AWS_ALLOW_HTTP=true&AWS_REGION=us-east-1", bucket, prefix, endpoint),
		"--stream", topic, "--pipeline", pipeline, "--log-level", "warn"}
	groupOffsets := func() map[int32]int64 {
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return nil
		}
		out := map[int32]int64{}
		offs.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o.At })
		return out
	}

	kills := killCount(10, 32)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 8))
	for i := range kills {
		p := start(t, bin, args...)
		time.Sleep(time.Duration(700+rng.IntN(2300)) * time.Millisecond)
		if done, err := p.exited(); done {
			t.Fatalf("run %d exited before its kill (%v):\n%s", i, err, p.log.String())
		}
		p.kill()
		keys, err := st.List(ctx, prefix+"/"+pipeline+"/", "")
		require.NoError(t, err)
		t.Logf("kill %d: group offsets %v, %d objects", i, groupOffsets(), len(keys))
	}
	<-produced
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	// The last run has caught up when each partition's last batch — named
	// by the partition and the topic's end offset — is there. (Group
	// offsets may lag: the coordinator advises the source at most once a
	// second and only when an ack arrives.)
	var last []string
	ends.Each(func(o kadm.ListedOffset) {
		last = append(last, fmt.Sprintf("%s/%s/%s!2F%d~%020d.parquet", prefix, pipeline, topic, o.Partition, o.Offset))
	})
	final := start(t, bin, args...)
	require.Eventually(t, func() bool {
		for _, k := range last {
			if _, err := st.Get(ctx, k); err != nil {
				return false
			}
		}
		return true
	}, 4*time.Minute, 300*time.Millisecond, "the last run did not reach the end of the topic (%v):\n%s", last, final.log)
	time.Sleep(200 * time.Millisecond)
	final.kill()

	// Independent read: pyarrow.dataset over the pipeline's directory.
	out, err := exec.Command(py, "python/s3_read.py", bucket+"/"+prefix+"/"+pipeline, "key").Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("s3_read.py: %v\n%s", err, ee.Stderr)
	}
	require.NoError(t, err)
	var r struct {
		Objects []struct {
			Name   string   `json:"name"`
			Rows   int64    `json:"rows"`
			Codecs []string `json:"codecs"`
		} `json:"objects"`
		Dataset struct {
			Rows int64 `json:"rows"`
		} `json:"dataset"`
		Values []string `json:"values"`
	}
	require.NoError(t, json.Unmarshal(out, &r))
	seen := make(map[string]int, n)
	for _, k := range r.Values {
		require.NotEqual(t, "aborted", k)
		seen[k]++
	}
	var dups, missing int
	for i := range n {
		switch c := seen[fmt.Sprintf("k%d", i)]; {
		case c == 0:
			missing++
		case c > 1:
			dups++
		}
	}
	require.Zerof(t, missing, "records missing (%d objects, %d rows)", len(r.Objects), r.Dataset.Rows)
	require.Zerof(t, dups, "records written twice: replays did not overwrite (%d objects, %d rows)", len(r.Objects), r.Dataset.Rows)
	require.Equal(t, int64(n), r.Dataset.Rows)
	require.Len(t, r.Objects, n/batchRows, "one object per batch")
	for _, o := range r.Objects {
		require.Equal(t, int64(batchRows), o.Rows, o.Name)
		require.Equal(t, []string{"SNAPPY"}, o.Codecs, o.Name)
	}
	t.Logf("%d kills; %d objects; %d records exactly once", kills, len(r.Objects), len(r.Values))
}

// produceS3CrashRecords writes one aborted transaction, then n records
// k0..k(n-1), record i to partition i%parts, in chunks of 1200 every 1.2s.
func produceS3CrashRecords(t *testing.T, brokers, topic string, n, parts int) {
	ctx := context.Background()
	seeds := strings.Split(brokers, ",")
	tx, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.TransactionalID(topic+"-aborter"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	require.NoError(t, tx.BeginTransaction())
	for i := range 30 {
		tx.Produce(ctx, &kgo.Record{Key: []byte("aborted"), Value: []byte("aborted"), Partition: int32(i % parts)}, nil)
	}
	require.NoError(t, tx.Flush(ctx))
	require.NoError(t, tx.EndTransaction(ctx, kgo.TryAbort))
	tx.Close()

	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	require.NoError(t, err)
	defer cl.Close()
	const chunk = 1200
	for c := 0; c*chunk < n; c++ {
		time.Sleep(1200 * time.Millisecond) // spread over most of the kills
		var wg sync.WaitGroup
		var mu sync.Mutex
		var perr error
		for i := c * chunk; i < min(n, (c+1)*chunk); i++ {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "value-%d", i), Partition: int32(i % parts)},
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
