// Peak memory of the Kafka source: the flightline CLI runs a Kafka (JSON
// orders, lz4) → Delta Lake pipeline against the real broker, in one
// process and as three (serve-source, serve-sink, run), and the peak RSS of
// each process (VmHWM) is read before it is stopped. Figures and the
// command in bench/README.md ("Peak memory of a Kafka → Delta pipeline").

package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// rssSizes are the stream lengths measured: FLIGHTLINE_BENCH_RSS_RECORDS,
// comma-separated, default 1M and 10M.
func rssSizes() []int {
	v := os.Getenv("FLIGHTLINE_BENCH_RSS_RECORDS")
	if v == "" {
		v = "1000000,10000000"
	}
	var out []int
	for _, s := range strings.Split(v, ",") {
		var n int
		if _, err := fmt.Sscan(s, &n); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

const rssSchema = `{"type":"record","name":"order","fields":[{"name":"order_id","type":"long"},` +
	`{"name":"customer","type":"string"},{"name":"item","type":"string"},{"name":"quantity","type":"int"},` +
	`{"name":"price","type":"double"},{"name":"created_at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`

// rssBinary is FLIGHTLINE_BENCH_BIN (to measure another build), or the CLI
// built from this tree.
func rssBinary(b *testing.B) string {
	if bin := os.Getenv("FLIGHTLINE_BENCH_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(b.TempDir(), "flightline")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/flightline").CombinedOutput()
	if err != nil {
		b.Fatalf("building the CLI: %v\n%s", err, out)
	}
	return bin
}

var rssTopics sync.Map // records -> topic

// rssSetup produces (once per broker and size) n JSON orders as the
// KafkaToDelta benchmark does (lz4, round robin over kdPartitions), without
// keeping them in memory.
func rssSetup(b *testing.B, brokers []string, n int) string {
	if t, ok := rssTopics.Load(n); ok {
		return t.(string)
	}
	ctx := context.Background()
	topic := fmt.Sprintf("bench-rss-%d", n)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.ProducerLinger(10*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if ends, err := adm.ListEndOffsets(ctx, topic); err == nil && ends.Error() == nil {
		total := int64(0)
		ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
		if total == int64(n) {
			rssTopics.Store(n, topic)
			return topic // produced by an earlier run
		}
	}
	if _, err := adm.CreateTopic(ctx, kdPartitions, 1, nil, topic); err != nil {
		b.Fatal(err)
	}
	var (
		mu   sync.Mutex
		perr error
	)
	for i := range n {
		v := fmt.Appendf(nil, `{"order_id":%d,"customer":"customer-%d","item":"%s","quantity":%d,"price":%d.%02d,"created_at":%d}`,
			i, i%9973, kdItems[i%len(kdItems)], 1+i%5, 5+i%500, i%100, 1767225600000+int64(i))
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "order-%d", i), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				perr = err
				mu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if perr != nil {
		b.Fatal(perr)
	}
	rssTopics.Store(n, topic)
	return topic
}

func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// proc is one CLI process of the pipeline.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
}

func startProc(b *testing.B, dir, bin, name string, args ...string) *proc {
	f, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return &proc{name: name, cmd: cmd, log: f}
}

// hwm returns p's peak RSS so far in MiB: VmHWM of /proc/PID/status, the
// high-water mark of the process's own address space since its exec. The
// rusage of a waited-for child is no good here: Linux carries the parent's
// peak RSS into ru_maxrss across the vfork and exec that start the child,
// so every child of this test binary reported at least the binary's own
// peak (124.8 MiB on one machine, for the sink and the coordinator alike).
func (p *proc) hwm() float64 { return vmHWM(p.cmd.Process.Pid) }

// vmHWM is VmHWM of /proc/PID/status in MiB, 0 when unreadable.
func vmHWM(pid int) float64 {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib float64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kib); err == nil {
				return kib / 1024
			}
		}
	}
	return 0
}

// stop interrupts p, waits for it and returns its peak RSS in MiB, read
// just before the interrupt (shutdown allocates nothing of note).
func (p *proc) stop(b *testing.B) float64 {
	peak := p.hwm()
	if peak == 0 {
		b.Fatalf("%s: no VmHWM in /proc/%d/status", p.name, p.cmd.Process.Pid)
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
		b.Errorf("%s did not stop on SIGINT", p.name)
	}
	p.log.Close()
	return peak
}

// waitCommitted waits until the group has committed n records in all (the
// coordinator's advisory commit follows every sink commit within 1s).
func waitCommitted(b *testing.B, brokers []string, group string, n int, procs []*proc) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(time.Duration(n/2000+120) * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range procs {
			if p.cmd.ProcessState != nil {
				b.Fatalf("%s exited early; see %s", p.name, p.log.Name())
			}
		}
		offs, err := adm.FetchOffsets(context.Background(), group)
		if err == nil {
			total := int64(0)
			offs.Each(func(o kadm.OffsetResponse) { total += o.At })
			if total >= int64(n) {
				return
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	b.Fatalf("group %s did not reach %d committed records in time", group, n)
}

// BenchmarkKafkaDeltaPeakRSS runs the first n records of the topic into a
// fresh Delta table per op with default settings (10k-row batches, window
// 4, JSON values as typed columns), stops the processes once the group has
// committed n records, and reports each process's peak RSS and the rows/s.
func BenchmarkKafkaDeltaPeakRSS(b *testing.B) {
	brokers := kbBrokers(b)
	bin := rssBinary(b)
	schema := filepath.Join(b.TempDir(), "order.avsc")
	if err := os.WriteFile(schema, []byte(rssSchema), 0o644); err != nil {
		b.Fatal(err)
	}
	// One topic of the largest size; each size reads its first n records,
	// so the sizes differ in length only, not in the shape of the data
	// (producer batch sizes, key lengths).
	sizes := rssSizes()
	topic := rssSetup(b, brokers, slices.Max(sizes))
	for _, n := range sizes {
		for _, mode := range []string{"one-process", "three-processes"} {
			b.Run(fmt.Sprintf("records=%d/mode=%s", n, mode), func(b *testing.B) {
				peaks := map[string]float64{}
				var secs float64
				for i := range b.N {
					dir := b.TempDir()
					group := fmt.Sprintf("rss-%d-%s-%d-%d", n, mode, time.Now().UnixNano(), i)
					// FLIGHTLINE_BENCH_RSS_SOURCE_OPTS: extra spec keys, e.g.
					// "&max_buffered_bytes=4194304", to measure other bounds.
					source := fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s&reset=earliest&format=json&schema=%s%s",
						strings.Join(brokers, ","), topic, group, schema, os.Getenv("FLIGHTLINE_BENCH_RSS_SOURCE_OPTS"))
					sink := "delta:" + filepath.Join(dir, "table")
					start := time.Now()
					var procs []*proc
					if mode == "one-process" {
						procs = append(procs, startProc(b, dir, bin, "pipeline", "run", "--source", source, "--sink", sink,
							"--stream", topic, "--pipeline", group))
					} else {
						srcAddr, sinkAddr := freeAddr(b), freeAddr(b)
						procs = append(procs,
							startProc(b, dir, bin, "source", "serve-source", "--source", source, "--listen", srcAddr),
							startProc(b, dir, bin, "sink", "serve-sink", "--sink", sink, "--listen", sinkAddr))
						time.Sleep(500 * time.Millisecond) // let them listen; run retries anyway
						procs = append(procs, startProc(b, dir, bin, "coordinator", "run", "--source", "grpc://"+srcAddr,
							"--sink", "grpc://"+sinkAddr, "--stream", topic, "--pipeline", group))
					}
					waitCommitted(b, brokers, group, n, procs)
					secs += time.Since(start).Seconds()
					for j := len(procs) - 1; j >= 0; j-- { // coordinator first
						peaks[procs[j].name] = max(peaks[procs[j].name], procs[j].stop(b))
					}
				}
				for name, mib := range peaks {
					b.ReportMetric(mib, name+"-peak-RSS-MiB")
				}
				b.ReportMetric(float64(n)*float64(b.N)/secs, "rows/s")
			})
		}
	}
}
