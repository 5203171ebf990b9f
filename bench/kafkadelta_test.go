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
	"regexp"
	"strconv"
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
type kdResult struct{ seconds, cpu, peakMiB float64 }

// watchHWM samples the process's VmHWM (/proc/PID/status, its peak RSS
// since exec) every 10 ms until stop, which returns the last value read in
// MiB. Sampling from outside is needed for a process that exits by itself:
// its rusage ru_maxrss would include this binary's peak (see proc.hwm).
func watchHWM(pid int) (stop func() float64) {
	done := make(chan struct{})
	res := make(chan float64, 1)
	go func() {
		peak := 0.0
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if v := vmHWM(pid); v > peak {
				peak = v
			}
			select {
			case <-done:
				res <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 { close(done); return <-res }
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
	table := filepath.Join(kdTempDir(b), "orders")
	t0, c0 := time.Now(), cpuSeconds()
	r, err := pipelines.KafkaToDelta(context.Background(), pipelines.KafkaConfig{
		Topic:    kdTopic,
		Pipeline: flightsink.Pipeline{ID: "bench"},
		// A fresh group per op: a used group's advisory commit would start
		// the fresh table at the end of the topic.
		Source: kafka.Config{Brokers: brokers, GroupID: fmt.Sprintf("bench-kd-%d", time.Now().UnixNano()), WithoutGroupMembership: true, BatchRows: kdBatch, BatchWait: 50 * time.Millisecond},
		SourceOptions: []kafka.Option{kafka.Allocator(mem),
			kafka.Logger(quiet),
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
	res := kdResult{time.Since(t0).Seconds(), cpuSeconds() - c0, 0}
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	return res
}

// kdRunPython runs bench/kafkadelta_baseline.py (mode "json" or
// "vectorised") on the same topic as its own process, and times it from the
// outside as /usr/bin/time does: wall from the start of the process to its
// exit (the interpreter's imports included), CPU from its rusage (user +
// system, every thread). self is the script's own clock, which starts after
// the imports.
func kdRunPython(b *testing.B, brokers []string, n int, mode string) (ext, self kdResult) {
	py := os.Getenv("FLIGHTLINE_PYTHON")
	if py == "" {
		b.Skip("python baseline: FLIGHTLINE_PYTHON unset (integration/services/services.sh up python)")
	}
	table := filepath.Join(kdTempDir(b), "orders")
	t0 := time.Now()
	cmd := exec.Command(py, "kafkadelta_baseline.py", strings.Join(brokers, ","), kdTopic, fmt.Sprint(n), table, fmt.Sprint(kdBatch), mode)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stopHWM := watchHWM(cmd.Process.Pid)
	err := cmd.Wait()
	wall := time.Since(t0).Seconds()
	peak := stopHWM()
	out := []byte(stdout.String())
	if err != nil {
		b.Fatalf("python baseline: %v\n%s\n%s", err, out, stderr.String())
	}
	var r struct {
		Rows    int     `json:"rows"`
		Seconds float64 `json:"seconds"`
		CPU     float64 `json:"cpu_seconds"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Rows != n {
		b.Fatalf("python baseline: %v: %s", err, out)
	}
	return kdResult{wall, processCPU(cmd), peak}, kdResult{r.Seconds, r.CPU, 0}
}

// processCPU is a finished child's user + system CPU seconds.
func processCPU(cmd *exec.Cmd) float64 {
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// kdRunCLI runs the same job with the flightline CLI as its own process
// (`flightline run --source kafka:… --sink delta:…`, default settings, JSON
// values typed by an Avro schema as in BenchmarkKafkaDeltaPeakRSS). A
// streaming pipeline does not exit at the end of the topic: wall runs from
// the start of the process until the Delta log holds n rows (polled every
// 5 ms), then the process is interrupted; CPU is its rusage after it exits
// (start-up and shutdown included).
func kdRunCLI(b *testing.B, bin string, brokers []string, n int) kdResult {
	dir := kdTempDir(b)
	schema := filepath.Join(dir, "order.avsc")
	if err := os.WriteFile(schema, []byte(rssSchema), 0o644); err != nil {
		b.Fatal(err)
	}
	group := fmt.Sprintf("bench-kd-cli-%d", time.Now().UnixNano())
	source := fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s&reset=earliest&format=json&schema=%s",
		strings.Join(brokers, ","), kdTopic, group, schema)
	table := filepath.Join(dir, "table")
	t0 := time.Now()
	p := startProc(b, dir, bin, "pipeline", "run", "--source", source, "--sink", "delta:"+table, "--stream", kdTopic, "--pipeline", group)
	deadline := t0.Add(time.Duration(n/2000+120) * time.Second)
	seen := map[string]int64{}
	var rows int64
	for rows < int64(n) {
		if p.cmd.ProcessState != nil || processGone(p.cmd.Process.Pid) {
			b.Fatalf("the CLI exited before committing %d rows (%d); see %s", n, rows, p.log.Name())
		}
		if time.Now().After(deadline) {
			_ = p.cmd.Process.Kill()
			b.Fatalf("the CLI did not commit %d rows in time (%d); see %s", n, rows, p.log.Name())
		}
		ents, _ := os.ReadDir(filepath.Join(table, "_delta_log"))
		for _, e := range ents {
			if _, ok := seen[e.Name()]; ok || !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			data, err := os.ReadFile(filepath.Join(table, "_delta_log", e.Name()))
			if err != nil {
				continue
			}
			var k int64
			for _, m := range numRecordsRE.FindAllSubmatch(data, -1) {
				v, _ := strconv.ParseInt(string(m[1]), 10, 64)
				k += v
			}
			seen[e.Name()] = k
			rows += k
		}
		time.Sleep(5 * time.Millisecond)
	}
	wall := time.Since(t0).Seconds()
	peak := p.stop(b)
	return kdResult{wall, processCPU(p.cmd), peak}
}

// kdTempDir is a fresh directory removed at the end of the benchmark. Not
// b.TempDir: its name holds an interleaved side's round ("#01"), which a
// URL (a spec, a Delta table location) reads as a fragment.
func kdTempDir(b *testing.B) string {
	dir, err := os.MkdirTemp("", "bench-kd")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// processGone reports whether pid has exited (a zombie not yet waited for
// counts as gone).
func processGone(pid int) bool {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

var numRecordsRE = regexp.MustCompile(`numRecords\\?":(\d+)`)

// BenchmarkKafkaToDelta moves the whole topic (JSON orders, 4 partitions)
// into a fresh local Delta table per op, 10k-row batches, one commit each,
// typed columns; the sides interleaved round by round:
//
//   - flightline: pipelines.KafkaToDelta inside the test process (wall and
//     CPU of this process around the job);
//   - flightline-process: the flightline CLI as its own process (kdRunCLI);
//   - python-json: kafkadelta_baseline.py, json.loads per record, its own
//     process timed from outside (kdRunPython);
//   - python-vectorised: the same script parsing each batch with
//     pyarrow.json: the headline peer.
//
// Run it with -benchtime 1x and FLIGHTLINE_BENCH_ROUNDS=N. The main figure
// is rows per wall second; rows per CPU second (per core) is reported too,
// and for the separate processes their peak RSS (VmHWM).
func BenchmarkKafkaToDelta(b *testing.B) {
	brokers := kbBrokers(b)
	n := kdRecords()
	kdSetup(b, brokers, n)
	bin := rssBinary(b)
	run := func(f func(b *testing.B) (kdResult, kdResult)) func(b *testing.B) {
		return func(b *testing.B) {
			var ext, self kdResult
			for b.Loop() {
				e, s := f(b)
				ext.seconds += e.seconds
				ext.cpu += e.cpu
				self.seconds += s.seconds
				self.cpu += s.cpu
				ext.peakMiB = max(ext.peakMiB, e.peakMiB)
			}
			rows := float64(n) * float64(b.N)
			b.ReportMetric(rows/ext.seconds, "rows/s")
			b.ReportMetric(rows/ext.cpu, "rows/cpu-s")
			b.ReportMetric(float64(kdBytes)*float64(b.N)/1e6/ext.seconds, "MB/s")
			if self.seconds > 0 {
				b.ReportMetric(rows/self.seconds, "self-timed-rows/s")
			}
			b.ReportMetric(0, "ns/op") // the op is the whole job; the rates above are the figures
			extra := map[string]float64{"rows/cpu-s": rows / ext.cpu}
			if ext.peakMiB > 0 { // separate processes only
				extra["peak-RSS-MiB"] = ext.peakMiB
				b.ReportMetric(ext.peakMiB, "peak-RSS-MiB")
			}
			measured(b, rows/ext.seconds, extra)
		}
	}
	interleave(b, comparison{unit: "rows/s", ratios: []pair{
		{"flightline-process", "python-vectorised"}, {"flightline", "python-vectorised"},
		{"flightline-process", "python-json"}, {"flightline", "python-json"},
		{"python-vectorised", "python-json"},
	}},
		side{"flightline", run(func(b *testing.B) (kdResult, kdResult) { return kdRunGo(b, brokers, n, false), kdResult{} })},
		side{"flightline-process", run(func(b *testing.B) (kdResult, kdResult) { return kdRunCLI(b, bin, brokers, n), kdResult{} })},
		side{"python-json", run(func(b *testing.B) (kdResult, kdResult) { return kdRunPython(b, brokers, n, "json") })},
		side{"python-vectorised", run(func(b *testing.B) (kdResult, kdResult) { return kdRunPython(b, brokers, n, "vectorised") })},
	)
}
