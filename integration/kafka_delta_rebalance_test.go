package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/pipelines"
)

// deltaCommit is what the rebalance test reads back from one commit file.
type deltaCommit struct {
	version  int64
	instance string
	part     int64 // -1: no data file
	first    int64
	last     int64
	states   map[string]checkpoint.Positions // domain → instance checkpoint
}

// readDeltaLog parses every JSON commit of a local table, in order.
func readDeltaLog(t *testing.T, table string) []deltaCommit {
	t.Helper()
	var out []deltaCommit
	for v := int64(0); ; v++ {
		f, err := os.Open(filepath.Join(table, "_delta_log", fmt.Sprintf("%020d.json", v)))
		if os.IsNotExist(err) {
			return out
		}
		require.NoError(t, err)
		c := deltaCommit{version: v, part: -1, states: map[string]checkpoint.Positions{}}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var a struct {
				CommitInfo *struct {
					Flightline struct {
						Instance string `json:"instance"`
					} `json:"flightline"`
				} `json:"commitInfo"`
				Add *struct {
					Stats      string `json:"stats"`
					DataChange bool   `json:"dataChange"`
				} `json:"add"`
				DomainMetadata *struct {
					Domain        string `json:"domain"`
					Configuration string `json:"configuration"`
				} `json:"domainMetadata"`
			}
			require.NoError(t, json.Unmarshal(sc.Bytes(), &a))
			switch {
			case a.CommitInfo != nil:
				c.instance = a.CommitInfo.Flightline.Instance
			case a.Add != nil && !a.Add.DataChange:
				// A compaction commit (dataChange=false) rewrites files of
				// several partitions and writes no new data: not a batch.
			case a.Add != nil:
				var st struct {
					Min struct{ Partition, Offset int64 } `json:"minValues"`
					Max struct{ Partition, Offset int64 } `json:"maxValues"`
				}
				require.NoError(t, json.Unmarshal([]byte(a.Add.Stats), &st))
				require.Equal(t, st.Min.Partition, st.Max.Partition, "a batch holds one partition")
				c.part, c.first, c.last = st.Min.Partition, st.Min.Offset, st.Max.Offset
			case a.DomainMetadata != nil:
				var st struct {
					Checkpoint string `json:"checkpoint"`
				}
				require.NoError(t, json.Unmarshal([]byte(a.DomainMetadata.Configuration), &st))
				if st.Checkpoint != "" {
					p, err := checkpoint.Parse([]byte(st.Checkpoint))
					require.NoError(t, err)
					c.states[a.DomainMetadata.Domain] = p
				}
			}
		}
		require.NoError(t, sc.Err())
		f.Close()
		out = append(out, c)
	}
}

// TestIntegrationKafkaDeltaRebalance runs two Kafka → Delta instances
// (pipelines.KafkaToDelta) in one consumer group on the real broker, as two
// Delta sink Instances of one pipeline writing one table, while records
// keep arriving, and forces real rebalances: b joins (taking partitions
// from a), b leaves (a takes them back), b joins again. Then:
//   - delta-rs finds every record exactly once by key;
//   - no data commit starts a partition below the position merged (max)
//     over both instances' earlier commits: neither instance under-resumed
//     a partition the other had moved on;
//   - on resume the pipeline's checkpoint is the per-partition max over the
//     instances' states, and it is the end of the topic;
//   - at least one partition was written by both instances.
func TestIntegrationKafkaDeltaRebalance(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	brokers := Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	adm, topic := kafkaTopic(t, ctx, brokers, "kdrb", 4)
	group := topic + "-g"
	pl := flightsink.Pipeline{ID: topic + "-pipe"}
	table := filepath.Join(t.TempDir(), "orders")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	quiet := slog.New(slog.DiscardHandler)

	const n = 24_000
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		produceKeys(t, brokers, topic, n, 1000, 250*time.Millisecond)
	}()

	type instance struct {
		r    *pipelines.Runner
		stop context.CancelFunc
		done chan error
	}
	startInstance := func(name string) *instance {
		r, err := pipelines.KafkaToDelta(ctx, pipelines.KafkaConfig{
			Topic:    topic,
			Pipeline: pl,
			Source:   kafka.Config{Brokers: strings.Split(brokers, ","), GroupID: group, BatchRows: 300, BatchWait: 50 * time.Millisecond, SessionTimeout: 6 * time.Second},
			SourceOptions: []kafka.Option{kafka.Allocator(mem),
				kafka.Logger(quiet)},
			Coordinator: []coordinator.Option{coordinator.WithLogger(quiet), coordinator.Backoff(20*time.Millisecond, 500*time.Millisecond),
				coordinator.CommitInterval(100 * time.Millisecond)},
		}, table, pipelines.DeltaConfig(sinkdelta.Config{Instance: name}), pipelines.DeltaOptions(sinkdelta.Allocator(mem), sinkdelta.Logger(quiet)), pipelines.Allocator(mem))
		require.NoError(t, err)
		rctx, stop := context.WithCancel(ctx)
		in := &instance{r: r, stop: stop, done: make(chan error, 1)}
		go func() { in.done <- r.Run(rctx) }() // Run leaves the group when it returns: a rebalance
		return in
	}
	stop := func(in *instance) {
		in.stop()
		require.NoError(t, <-in.done)
	}

	da, db := sinkdelta.Domain(pl.ID, "a"), sinkdelta.Domain(pl.ID, "b")
	states := map[string]checkpoint.Positions{}
	committedBy := func(domain string) bool {
		for _, c := range readDeltaLog(t, table) {
			for d, p := range c.states {
				states[d] = p
			}
		}
		_, ok := states[domain]
		return ok
	}
	// Waits on what the instances did, not on the clock: a loaded machine
	// makes joins and first commits slow.
	a := startInstance("a")
	require.Eventually(t, func() bool { return committedBy(da) }, 90*time.Second, 100*time.Millisecond, "a never committed")
	b := startInstance("b") // rebalance: b takes partitions from a
	require.Eventually(t, func() bool { return committedBy(db) }, 90*time.Second, 100*time.Millisecond, "b never committed")
	time.Sleep(time.Second)
	stop(b) // rebalance: a takes them back
	// Until a has written past b's positions in some partition (it took
	// b's partitions back): waited for, not slept on — a fixed 2 s failed
	// on a loaded machine.
	aPastB := func() bool {
		committedBy(da)
		for k, v := range states[db] {
			if states[da][k] > v {
				return true
			}
		}
		return false
	}
	require.Eventually(t, aPastB, 90*time.Second, 100*time.Millisecond, "a did not move past b's positions while b was away: the merge went untested")

	// On resume, b's pipeline checkpoint is the per-partition max over both
	// instances' states, not b's own (stale) positions.
	committedBy(db)
	b = startInstance("b") // rebalance again
	cp, err := b.r.Checkpoint(ctx)
	require.NoError(t, err)
	got, err := checkpoint.Parse(cp)
	require.NoError(t, err)
	require.True(t, checkpoint.Covers(got, states[da]) && checkpoint.Covers(got, states[db]),
		"resume point %s is behind an instance's state (a %s, b %s)", cp, states[da].Encode(), states[db].Encode())
	behind := false
	for k, v := range states[db] {
		behind = behind || states[da][k] > v
	}
	require.True(t, behind, "a did not move past b's positions while b was away: the merge went untested")
	t.Logf("b resumes at %s; its own state was %s, a's %s", cp, states[db].Encode(), states[da].Encode())

	<-produced
	want := endPositions(t, ctx, adm, topic)
	require.Eventually(t, func() bool {
		cp, err := a.r.Checkpoint(ctx)
		if err != nil || cp == nil {
			return false
		}
		p, err := checkpoint.Parse(cp)
		return err == nil && checkpoint.Covers(p, want)
	}, 2*time.Minute, 100*time.Millisecond, "the instances did not reach the end of the topic %s", want.Encode())
	stop(a)
	stop(b)

	// Read the whole log back: positions merged to the max, never
	// under-resumed; a partition changed hands.
	commits := readDeltaLog(t, table)
	merged := checkpoint.Positions{}
	owners := map[int64]map[string]bool{}
	last := map[string]checkpoint.Positions{}
	for _, c := range commits {
		if c.part >= 0 {
			k := fmt.Sprintf("%s/%d", topic, c.part)
			require.GreaterOrEqualf(t, c.first, merged[k], "version %d: instance %s wrote %s from offset %d, below the merged position %d",
				c.version, c.instance, k, c.first, merged[k])
			if owners[c.part] == nil {
				owners[c.part] = map[string]bool{}
			}
			owners[c.part][c.instance] = true
		}
		for d, p := range c.states {
			merged = checkpoint.Merge(merged, p)
			last[d] = p
		}
	}
	moved := 0
	for _, o := range owners {
		if len(o) > 1 {
			moved++
		}
	}
	require.Positive(t, moved, "no partition changed instance: the test forced no rebalance")
	final, err := sinkdelta.New(ctx, sinkdelta.Config{URI: table})
	require.NoError(t, err)
	cp, err = final.Checkpoint(ctx, pl)
	require.NoError(t, err)
	require.Equal(t, string(checkpoint.Merge(last[da], last[db]).Encode()), string(cp), "the pipeline's checkpoint is the per-partition max over its instances")
	require.Equal(t, string(want.Encode()), string(cp))
	t.Logf("%d commits; %d of 4 partitions written by both instances; a %s; b %s", len(commits), moved, last[da].Encode(), last[db].Encode())
	verifyDeltaKeys(t, table, nil, "key", n, "k")
}
