package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// TestIntegrationCompactedTopic reads a log-compacted topic: every key is
// rewritten in each of eight transactions (two of them aborted),
// and the broker's cleaner compacts the log before the pipeline reads it,
// so the partitions have offset gaps where superseded records, aborted
// records and transaction markers were removed. Kafka → Dir in one
// process, kill -9'd at random points and restarted, must write every
// record of the compacted log exactly once and nothing else; the
// independent reader is kcat with read_committed.
func TestIntegrationCompactedTopic(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	t.Parallel() // own topic, tables, directories and ports; see services.go
	brokers := Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker")
	kcat := Need(t, "FLIGHTLINE_KCAT", "kcat")
	bin := flightlineBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)

	// The cleaner looks for work every 15 s by default; every second here
	// (a cluster-wide dynamic setting of the test broker).
	ar, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "log.cleaner.backoff.ms", Value: kadm.StringPtr("1000")}})
	require.NoError(t, err)
	for _, r := range ar {
		require.NoError(t, r.Err)
	}
	topic := fmt.Sprintf("compact-%d", time.Now().UnixNano())
	resp, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{
		"cleanup.policy":            kadm.StringPtr("compact"),
		"segment.ms":                kadm.StringPtr("200"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
		"min.compaction.lag.ms":     kadm.StringPtr("0"),
		"delete.retention.ms":       kadm.StringPtr("0"),
	}, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)

	t0 := time.Now()
	const keys, rounds = 6000, 8
	tx, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.TransactionalID(topic+"-tx"), kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	require.NoError(t, err)
	committedRecords := 0
	for r := range rounds + 1 {
		require.NoError(t, tx.BeginTransaction())
		n := keys
		if r == rounds {
			n = 2 // rolls the last round's segment, so the cleaner may take it
		}
		for k := range n {
			tx.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "c%d", k), Value: fmt.Appendf(nil, "r%d-c%d", r, k)}, nil)
		}
		require.NoError(t, tx.Flush(ctx))
		abort := r%4 == 1 && r < rounds // two of eight
		end := kgo.TryCommit
		if abort {
			end = kgo.TryAbort
		} else {
			committedRecords += n
		}
		require.NoError(t, tx.EndTransaction(ctx, end))
		time.Sleep(300 * time.Millisecond)
	}
	tx.Close()

	// Wait for the cleaner, then for the log to settle.
	var before map[[2]int64]string
	require.Eventually(t, func() bool {
		before = kcatListing(t, kcat, brokers, topic)
		return len(before) < committedRecords/2
	}, 2*time.Minute, time.Second, "the broker did not compact %s (%d committed records produced)", topic, committedRecords)
	require.Eventually(t, func() bool {
		time.Sleep(2 * time.Second)
		again := kcatListing(t, kcat, brokers, topic)
		same := len(again) == len(before)
		before = again
		return same
	}, time.Minute, 10*time.Millisecond)
	gaps := 0
	for po := range before {
		if _, ok := before[[2]int64{po[0], po[1] - 1}]; !ok && po[1] > 0 {
			gaps++
		}
	}
	require.Positive(t, gaps, "no offset gaps: nothing was compacted")
	t.Logf("%d committed records produced; %d left after compaction, with %d offset gaps (%v)",
		committedRecords, len(before), gaps, time.Since(t0).Round(time.Second))

	dir := t.TempDir()
	pipeline := topic + "-pipe"
	args := []string{"run", "--source",
		fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s-g&batch_rows=5&batch_wait=20ms&session_timeout=6s&instance_id=compact-1", brokers, topic, topic),
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
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 21))
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	want := checkpoint.Positions{}
	ends.Each(func(o kadm.ListedOffset) { want[fmt.Sprintf("%s/%d", topic, o.Partition)] = o.Offset })
	done := func() bool { c := committed(); return c != nil && checkpoint.Covers(c, want) }

	// Each run is killed at a random point after its first commit, until
	// one reaches the end.
	last, midStream := string(committed().Encode()), 0
	for i := 0; i < 4 && !done(); i++ {
		p := start(t, bin, args...)
		require.Eventually(t, func() bool { return string(committed().Encode()) != last }, time.Minute, 10*time.Millisecond,
			"run %d committed nothing:\n%s", i, p.log)
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		p.kill()
		last = string(committed().Encode())
		if !done() {
			midStream++
		}
		t.Logf("kill %d: committed %s (%v)", i, last, time.Since(t0).Round(time.Second))
	}
	// The point of the test is a resume in the middle of a compacted
	// topic (offset gaps behind and ahead): at least one kill must land
	// before the end (batch_rows=5 keeps the read long).
	t.Logf("%d of the kills landed before the end of the topic", midStream)
	require.Positive(t, midStream, "no kill landed before the end of the topic: the resume across offset gaps was not tested")
	final := start(t, bin, args...)
	require.Eventually(t, func() bool {
		c := committed()
		return c != nil && checkpoint.Covers(c, want)
	}, 2*time.Minute, 200*time.Millisecond, "the last run did not reach the end of the topic %s:\n%s", want.Encode(), final.log)
	final.kill()
	t.Logf("the last run reached the end %s (%v)", want.Encode(), time.Since(t0).Round(time.Second))
	after := kcatListing(t, kcat, brokers, topic)

	// Every record written is one the compacted log held when the pipeline
	// started, with its key, written once; every record it still holds was
	// written.
	got := map[[2]int64]int{}
	files, err := filepath.Glob(filepath.Join(dir, "out", "*.arrow"))
	require.NoError(t, err)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	for _, f := range files {
		fh, err := os.Open(f)
		require.NoError(t, err)
		r, err := ipc.NewFileReader(fh, ipc.WithAllocator(mem))
		require.NoError(t, err)
		sc := r.Schema()
		pi, oi, ki := sc.FieldIndices("partition"), sc.FieldIndices("offset"), sc.FieldIndices("key")
		require.Len(t, pi, 1)
		require.Len(t, oi, 1)
		require.Len(t, ki, 1)
		for i := range r.NumRecords() {
			rec, err := r.RecordBatch(i)
			require.NoError(t, err)
			ps, offs, ks := rec.Column(pi[0]).(*array.Int32), rec.Column(oi[0]).(*array.Int64), rec.Column(ki[0]).(*array.BinaryView)
			for j := range int(rec.NumRows()) {
				po := [2]int64{int64(ps.Value(j)), offs.Value(j)}
				key, ok := before[po]
				require.Truef(t, ok, "record %v was not in the compacted log", po)
				require.Equal(t, key, string(ks.Value(j)), "record %v", po)
				got[po]++
			}
		}
		r.Close()
		fh.Close()
	}
	mem.AssertSize(t, 0)
	for po, n := range got {
		require.Equalf(t, 1, n, "record %v written %d times", po, n)
	}
	for po := range after {
		require.Containsf(t, got, po, "record %v of the compacted log is missing", po)
	}
	t.Logf("%d records written exactly once (%d in the log before the pipeline, %d after); %d commit files",
		len(got), len(before), len(after), len(files))
}

// kcatListing reads topic to its end with kcat (read_committed) and
// returns each record's key by (partition, offset).
func kcatListing(t *testing.T, kcat, brokers, topic string) map[[2]int64]string {
	t.Helper()
	var out, stderr bytes.Buffer
	cmd := exec.Command(kcat, "-C", "-b", brokers, "-t", topic, "-X", "isolation.level=read_committed", "-e", "-q",
		"-f", "%p %o %k\n")
	cmd.Stdout, cmd.Stderr = &out, &stderr
	require.NoError(t, cmd.Run(), "kcat: %s", stderr.String())
	m := map[[2]int64]string{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		require.Len(t, f, 3, "kcat line %q", sc.Text())
		p, err := strconv.ParseInt(f[0], 10, 32)
		require.NoError(t, err)
		o, err := strconv.ParseInt(f[1], 10, 64)
		require.NoError(t, err)
		m[[2]int64{p, o}] = f[2]
	}
	return m
}
