// End-to-end Kafka (JSON orders) → Delta Lake: Flightline's KafkaToDelta
// next to a Python pipeline doing the same job (confluent-kafka, pyarrow,
// deltalake.write_deltalake) on the same topic of the real broker, in the
// same run. Figures and the command in bench/kafkadelta.md.

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/kafkadecode"
	"github.com/flightline/flightline/pipelines"
)

const (
	kdPartitions = 4
	kdBatch      = 10_000 // rows per batch and per Delta commit, both sides
)

// kdOrder is the value schema both pipelines decode into typed columns.
type kdOrder struct {
	OrderID   int64     `arrow:"order_id"`
	Customer  string    `arrow:"customer"`
	Item      string    `arrow:"item"`
	Quantity  int32     `arrow:"quantity"`
	Price     float64   `arrow:"price"`
	CreatedAt time.Time `arrow:"created_at,unit=ms"`
}

var kdItems = []string{"keyboard", "mouse", "monitor", "laptop", "dock", "cable", "headset", "webcam"}

func kdRecords() int {
	if v := os.Getenv("FLIGHTLINE_BENCH_KAFKADELTA_RECORDS"); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil && n > 0 {
			return n
		}
	}
	return 1_000_000 // 250k per partition: whole 10k batches, no partial one waiting for BatchWait
}

var (
	kdOnce  sync.Once
	kdTopic string
	kdBytes int64 // value bytes
	kdErr   error
)

// kdSetup produces (once per broker and size) n JSON orders, lz4, round
// robin over kdPartitions partitions.
func kdSetup(b *testing.B, brokers []string, n int) {
	kdOnce.Do(func() {
		ctx := context.Background()
		kdTopic = fmt.Sprintf("bench-kafkadelta-%d", n)
		var values [][]byte
		for i := range n {
			v := fmt.Appendf(nil, `{"order_id":%d,"customer":"customer-%d","item":"%s","quantity":%d,"price":%d.%02d,"created_at":%d}`,
				i, i%9973, kdItems[i%len(kdItems)], 1+i%5, 5+i%500, i%100, 1767225600000+int64(i))
			values = append(values, v)
			kdBytes += int64(len(v))
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(kdTopic),
			kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()),
			kgo.ProducerLinger(10*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
		if err != nil {
			kdErr = err
			return
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		if ends, err := adm.ListEndOffsets(ctx, kdTopic); err == nil && ends.Error() == nil {
			total := int64(0)
			ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
			if total == int64(n) {
				return // produced by an earlier run
			}
		}
		if _, err := adm.CreateTopic(ctx, kdPartitions, 1, nil, kdTopic); err != nil {
			kdErr = err
			return
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i, v := range values {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "order-%d", i), Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					kdErr = err
					mu.Unlock()
				}
				wg.Done()
			})
		}
		wg.Wait()
	})
	if kdErr != nil {
		b.Fatal(kdErr)
	}
}

// cpuSeconds is this process's user + system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// kdResult is one op: the whole topic into a fresh table.
type kdResult struct{ seconds, cpu float64 }

var kdResults = map[string][]kdResult{}

func kdReport(b *testing.B, name string, rows int, r kdResult) {
	kdResults[name] = append(kdResults[name], r)
	b.ReportMetric(float64(rows)/r.seconds, "rows/s")
	b.ReportMetric(float64(kdBytes)/1e6/r.seconds, "MB/s")
	b.ReportMetric(float64(rows)/r.cpu, "rows/cpu-s")
	b.ReportMetric(float64(kdBytes)/1e6/r.cpu, "MB/cpu-s")
	b.ReportMetric(0, "ns/op") // the op is the whole job; the rates above are the figures
}

func median(rs []kdResult, f func(kdResult) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// runGo moves the whole topic into a fresh table with KafkaToDelta and
// returns once every row is committed.
func kdRunGo(b *testing.B, brokers []string, n int, loopback bool) kdResult {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(b, 0)
	quiet := slog.New(slog.DiscardHandler)
	sc, err := kafkadecode.SchemaOf[kdOrder]()
	if err != nil {
		b.Fatal(err)
	}
	opts := []pipelines.Option{pipelines.DeltaOptions(delta.Allocator(mem), delta.Logger(quiet)), pipelines.ValueColumns(), pipelines.Allocator(mem)}
	if loopback {
		opts = append(opts, pipelines.Loopback([]flightsrc.ServerOption{flightsrc.WithAllocator(mem), flightsrc.WithLogger(quiet)},
			[]flightsink.ServerOption{flightsink.WithAllocator(mem), flightsink.WithLogger(quiet)}))
	}
	table := filepath.Join(b.TempDir(), "orders")
	t0, c0 := time.Now(), cpuSeconds()
	r, err := pipelines.KafkaToDelta(context.Background(), pipelines.KafkaConfig{
		Topic:    kdTopic,
		Pipeline: flightsink.Pipeline{ID: "bench"},
		// A fresh group per op: a used group's advisory commit would start
		// the fresh table at the end of the topic.
		Source: []kafka.Option{kafka.Brokers(brokers...), kafka.GroupID(fmt.Sprintf("bench-kd-%d", time.Now().UnixNano())),
			kafka.WithoutGroupMembership(), kafka.BatchRows(kdBatch), kafka.BatchWait(50 * time.Millisecond),
			kafka.Allocator(mem), kafka.Logger(quiet),
			kafka.ValueDecoder(func() (kafkadecode.ValueDecoder, error) { return kafkadecode.NewJSONDecoder(sc) })},
		Coordinator: []coordinator.Option{coordinator.WithLogger(quiet)},
	}, table, opts...)
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for r.Coordinator.Stats().Rows < int64(n) {
		select {
		case err := <-done:
			b.Fatalf("pipeline ended early: %v", err)
		case <-time.After(2 * time.Millisecond):
		}

	}
	res := kdResult{time.Since(t0).Seconds(), cpuSeconds() - c0}
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return res
}

// kdRunPython runs bench/kafkadelta_baseline.py on the same topic; its
// clock starts after the interpreter has imported its modules.
func kdRunPython(b *testing.B, brokers []string, n int) kdResult {
	py := os.Getenv("FLIGHTLINE_PYTHON")
	if py == "" {
		b.Skip("python baseline: FLIGHTLINE_PYTHON unset (integration/services/services.sh up python)")
	}
	table := filepath.Join(b.TempDir(), "orders")
	out, err := exec.Command(py, "kafkadelta_baseline.py", strings.Join(brokers, ","), kdTopic, fmt.Sprint(n), table, fmt.Sprint(kdBatch)).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		b.Fatalf("python baseline: %v\n%s\n%s", err, out, stderr)
	}
	var r struct {
		Rows    int     `json:"rows"`
		Seconds float64 `json:"seconds"`
		CPU     float64 `json:"cpu_seconds"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Rows != n {
		b.Fatalf("python baseline: %v: %s", err, out)
	}
	return kdResult{r.Seconds, r.CPU}
}

// BenchmarkKafkaToDelta moves the whole topic (JSON orders, 4 partitions)
// into a fresh local Delta table per op, 10k-row batches, one commit each,
// typed columns: Flightline in-process (impl=flightline), Flightline with
// both Flight hops on loopback (impl=flightline_loopback, as `flightline
// demo`), and the Python baseline. Run it with -benchtime 1x -count N; the
// output prints (# lines) the medians so far and the ratios to Python, per wall second
// and per CPU second.
func BenchmarkKafkaToDelta(b *testing.B) {
	brokers := kbBrokers(b)
	n := kdRecords()
	kdSetup(b, brokers, n)
	impls := []struct {
		name string
		run  func(b *testing.B) kdResult
	}{
		{"flightline", func(b *testing.B) kdResult { return kdRunGo(b, brokers, n, false) }},
		{"flightline_loopback", func(b *testing.B) kdResult { return kdRunGo(b, brokers, n, true) }},
		{"python", func(b *testing.B) kdResult { return kdRunPython(b, brokers, n) }},
	}
	for _, im := range impls {
		b.Run("impl="+im.name, func(b *testing.B) {
			for b.Loop() {
				kdReport(b, im.name, n, im.run(b))
			}
		})
	}
	py := kdResults["python"]
	if len(py) == 0 {
		return
	}
	for _, name := range []string{"flightline", "flightline_loopback"} {
		rs := kdResults[name]
		if len(rs) == 0 {
			continue
		}
		wall := median(py, func(r kdResult) float64 { return r.seconds }) / median(rs, func(r kdResult) float64 { return r.seconds })
		cpu := median(py, func(r kdResult) float64 { return r.cpu }) / median(rs, func(r kdResult) float64 { return r.cpu })
		fmt.Printf("# %s vs python over %d/%d ops, %d rows, %.1f MB of JSON: %.0f vs %.0f rows/s (ratio %.1fx); %.0f vs %.0f rows per CPU second (ratio %.1fx)\n",
			name, len(rs), len(py), n, float64(kdBytes)/1e6,
			float64(n)/median(rs, func(r kdResult) float64 { return r.seconds }), float64(n)/median(py, func(r kdResult) float64 { return r.seconds }), wall,
			float64(n)/median(rs, func(r kdResult) float64 { return r.cpu }), float64(n)/median(py, func(r kdResult) float64 { return r.cpu }), cpu)
	}
}
