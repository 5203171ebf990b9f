// Command scaling measures how one pipeline scales with the cores it gets:
// the three processes of a pipeline (flightline serve-source, serve-sink
// with a Delta table, run) pinned with taskset to the first N cores, for N
// = 1, 2, 4, … up to nproc, generator → Delta and Kafka → Delta. It prints
// rows/s and the CPU seconds of the three processes per core count, with
// the ratio to one core, and writes the figures as JSON (-json) for
// bench/scaling/report.py, which draws the chart and the table of
// bench/report.md.
//
// Rounds are interleaved: one round runs every core count once (the order
// rotated from round to round), so drift of a shared machine lands on
// every core count alike; figures are medians of the rounds.
//
//	go run ./bench/scaling                      # generator → Delta; Kafka too when FLIGHTLINE_KAFKA_BROKERS is set
//	go run ./bench/scaling -cores 1,2 -rounds 5 -rows 4000000 -json /tmp/scaling.json
//
// On another machine: build the CLI and this program statically and copy
// both (nothing else is needed for generator → Delta; Kafka → Delta needs
// a broker, -brokers):
//
//	CGO_ENABLED=0 go build -o flightline ./cmd/flightline
//	CGO_ENABLED=0 go build -o scaling ./bench/scaling
//	./scaling -bin ./flightline -rows 10000000
//
// Generator → Delta: rows/s is the rows over the wall time from the start
// of `run` (the servers already listen) to its exit at the end of the
// stream. Kafka → Delta: the topic (JSON orders, lz4, -partitions
// partitions) is produced once and reused; wall time runs from the start
// of `run` until the Delta log holds every record (polled every 20 ms,
// reading only new commits), when the processes are stopped. -nice -20
// (as root) runs the processes ahead of other load on a shared machine;
// the Kafka broker keeps its own priority. CPU seconds
// are the rusage of the three processes (start-up and idle time
// included); the Kafka broker's CPU is not counted, nor pinned.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sys/unix"
)

type config struct {
	bin        string
	static     bool
	cores      []int
	rounds     int
	rows       int
	batchRows  int
	records    int
	partitions int
	brokers    []string
	scenarios  []string
	jsonOut    string
	sinkOpts   string
	sinkFlags  []string
	runFlags   []string
	keep       bool
	nice       int
	verbose    bool
}

// Run is one measured run of one scenario at one core count.
type Run struct {
	Scenario string  `json:"scenario"`
	Cores    int     `json:"cores"`
	Round    int     `json:"round"`
	Rows     int     `json:"rows"`
	Wall     float64 `json:"wall_s"`
	RowsPerS float64 `json:"rows_per_s"`
	// CPU seconds (user + system) per process and in all.
	CPU       map[string]float64 `json:"cpu_s"`
	CPUTotal  float64            `json:"cpu_s_total"`
	SinkRSSMB float64            `json:"sink_peak_rss_mib"`
}

// Report is what -json writes.
type Report struct {
	Date      string   `json:"date"`
	Host      string   `json:"host"`
	NProc     int      `json:"nproc"`
	CPUModel  string   `json:"cpu_model"`
	LoadStart string   `json:"load_start"`
	LoadEnd   string   `json:"load_end"`
	Command   string   `json:"command"`
	Commit    string   `json:"commit"`
	Runs      []Run    `json:"runs"`
	Scenarios []string `json:"scenarios"`
}

func main() {
	var c config
	var cores, brokers, scen string
	flag.StringVar(&c.bin, "bin", "", "flightline binary (default: go build ./cmd/flightline into a temporary directory)")
	flag.BoolVar(&c.static, "static", false, "build the CLI with CGO_ENABLED=0 (when -bin is not given)")
	flag.StringVar(&cores, "cores", "", "core counts, comma-separated (default 1,2,4,… up to nproc, and nproc)")
	flag.IntVar(&c.rounds, "rounds", 3, "interleaved rounds; figures are their medians")
	flag.IntVar(&c.rows, "rows", 2_000_000, "generator → Delta: rows of the stream")
	flag.IntVar(&c.batchRows, "batch-rows", 10_000, "generator → Delta: rows per batch")
	flag.IntVar(&c.records, "records", 1_000_000, "Kafka → Delta: records of the topic")
	flag.IntVar(&c.partitions, "partitions", 8, "Kafka → Delta: partitions of the topic")
	flag.StringVar(&brokers, "brokers", os.Getenv("FLIGHTLINE_KAFKA_BROKERS"), "Kafka brokers (default $FLIGHTLINE_KAFKA_BROKERS); empty: Kafka → Delta is skipped")
	flag.StringVar(&scen, "scenarios", "generator,kafka", "scenarios to run: generator, kafka")
	flag.StringVar(&c.jsonOut, "json", "", "also write the runs as JSON to this file (for bench/scaling/report.py)")
	flag.StringVar(&c.sinkOpts, "sink-opts", "", "extra keys of the delta: sink spec, e.g. \"pipeline_bytes=0\" (compare settings)")
	var sinkFlags, runFlags string
	flag.StringVar(&sinkFlags, "sink-flags", "", "extra flags of serve-sink, space-separated, e.g. \"--pipeline-bytes off\"")
	flag.StringVar(&runFlags, "run-flags", "", "extra flags of run, space-separated, e.g. \"--window 16\"")
	flag.IntVar(&c.nice, "nice", 0, "run the three processes under nice -n N; a negative N (as root) lets them run ahead of other load on a shared machine")
	flag.BoolVar(&c.keep, "keep", false, "keep the working directories (tables, logs)")
	flag.BoolVar(&c.verbose, "v", false, "print every run")
	flag.Parse()

	c.sinkFlags, c.runFlags = strings.Fields(sinkFlags), strings.Fields(runFlags)
	niceness = c.nice
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		liveMu.Lock()
		for p := range live {
			_ = p.cmd.Process.Kill()
		}
		liveMu.Unlock()
		os.Exit(2)
	}()
	online := onlineCPUs()
	if cores == "" {
		for n := 1; n < len(online); n *= 2 {
			c.cores = append(c.cores, n)
		}
		c.cores = append(c.cores, len(online))
	} else {
		for _, f := range strings.Split(cores, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 || n > len(online) {
				fatalf("-cores: %q: want 1..%d", f, len(online))
			}
			c.cores = append(c.cores, n)
		}
	}
	if brokers != "" {
		c.brokers = strings.Split(brokers, ",")
	}
	for _, s := range strings.Split(scen, ",") {
		switch s = strings.TrimSpace(s); s {
		case "generator":
			c.scenarios = append(c.scenarios, s)
		case "kafka":
			if len(c.brokers) == 0 {
				fmt.Fprintln(os.Stderr, "scaling: no Kafka brokers (-brokers or FLIGHTLINE_KAFKA_BROKERS): Kafka → Delta skipped")
				continue
			}
			c.scenarios = append(c.scenarios, s)
		default:
			fatalf("-scenarios: unknown %q", s)
		}
	}
	work, err := os.MkdirTemp("", "flightline-scaling")
	if err != nil {
		fatalf("%v", err)
	}
	if !c.keep {
		defer os.RemoveAll(work)
	}
	if c.bin == "" {
		c.bin = filepath.Join(work, "flightline")
		cmd := exec.Command("go", "build", "-o", c.bin, "./cmd/flightline")
		cmd.Dir = moduleRoot()
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if c.static {
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		if err := cmd.Run(); err != nil {
			fatalf("building the CLI: %v", err)
		}
	}

	rep := Report{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), NProc: len(online), CPUModel: cpuModel(),
		LoadStart: loadavg(), Command: strings.Join(os.Args, " "), Commit: gitCommit(), Scenarios: c.scenarios}
	rep.Host, _ = os.Hostname()
	fmt.Printf("# scaling: %d online cores (%s), load %s, cores %v, %d rounds\n", len(online), rep.CPUModel, rep.LoadStart, c.cores, c.rounds)

	var topic, schema string
	if slices.Contains(c.scenarios, "kafka") {
		topic = produce(c)
		schema = filepath.Join(work, "order.avsc")
		if err := os.WriteFile(schema, []byte(orderSchema), 0o644); err != nil {
			fatalf("%v", err)
		}
	}
	for r := range c.rounds {
		for _, sc := range c.scenarios {
			order := slices.Clone(c.cores)
			k := r % len(order)
			order = append(order[k:], order[:k]...) // rotate
			for _, n := range order {
				dir, err := os.MkdirTemp(work, fmt.Sprintf("%s-%d-", sc, n))
				if err != nil {
					fatalf("%v", err)
				}
				run, err := runOnce(c, sc, online[:n], dir, topic, schema)
				if err != nil {
					fatalf("%s on %d cores, round %d: %v (logs in %s)", sc, n, r, err, dir)
				}
				run.Round = r
				rep.Runs = append(rep.Runs, run)
				if c.verbose {
					fmt.Printf("#   %s cores=%d round=%d: %.0f rows/s, %.2f s, CPU %.2f s %v\n", sc, n, r, run.RowsPerS, run.Wall, run.CPUTotal, run.CPU)
				}
				if !c.keep {
					os.RemoveAll(dir)
				}
			}
		}
	}
	rep.LoadEnd = loadavg()
	printTable(os.Stdout, c, rep)
	if c.jsonOut != "" {
		data, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(c.jsonOut, data, 0o644); err != nil {
			fatalf("%v", err)
		}
	}
}

// runOnce runs scenario sc once on cpus.
func runOnce(c config, sc string, cpus []int, dir, topic, schema string) (Run, error) {
	set := cpuList(cpus)
	srcAddr, sinkAddr := freeAddr(), freeAddr()
	pipeline := fmt.Sprintf("scaling-%s-%d-%d", sc, len(cpus), time.Now().UnixNano())
	var source string
	rows := c.rows
	switch sc {
	case "generator":
		source = fmt.Sprintf("generator:?rows=%d&batch_rows=%d", c.rows, c.batchRows)
	case "kafka":
		rows = c.records
		source = fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s&reset=earliest&format=json&schema=%s",
			strings.Join(c.brokers, ","), topic, pipeline, schema)
	}
	table := filepath.Join(dir, "table")
	sink := "delta:" + table
	if c.sinkOpts != "" {
		sink += "?" + c.sinkOpts
	}
	snk, err := start(dir, "sink", set, c.bin, append([]string{"serve-sink", "--sink", sink, "--listen", sinkAddr}, c.sinkFlags...)...)
	if err != nil {
		return Run{}, err
	}
	src, err := start(dir, "source", set, c.bin, "serve-source", "--source", source, "--listen", srcAddr)
	if err != nil {
		snk.kill()
		return Run{}, err
	}
	procs := []*proc{snk, src}
	defer func() {
		for _, p := range procs {
			p.kill()
		}
	}()
	for _, a := range []string{sinkAddr, srcAddr} {
		if err := waitListening(a, procs); err != nil {
			return Run{}, err
		}
	}
	args := []string{"run", "--source", "grpc://" + srcAddr, "--sink", "grpc://" + sinkAddr, "--pipeline", pipeline}
	if sc == "kafka" {
		args = append(args, "--stream", topic)
	}
	args = append(args, c.runFlags...)
	t0 := time.Now()
	coord, err := start(dir, "run", set, c.bin, args...)
	if err != nil {
		return Run{}, err
	}
	procs = append(procs, coord)
	var wall float64
	switch sc {
	case "generator":
		err := coord.wait(time.Duration(c.rows/10_000+300) * time.Second)
		wall = time.Since(t0).Seconds()
		if err != nil {
			return Run{}, fmt.Errorf("run: %v", err)
		}
		if got := tableRows(table, map[string]int64{}); got != int64(c.rows) {
			return Run{}, fmt.Errorf("the table holds %d rows, want %d", got, c.rows)
		}
	case "kafka":
		seen := map[string]int64{}
		var got int64
		deadline := t0.Add(time.Duration(c.records/5_000+300) * time.Second)
		for got < int64(c.records) {
			for _, p := range procs {
				if p.exited() {
					return Run{}, fmt.Errorf("%s exited with %d of %d rows committed", p.name, got, c.records)
				}
			}
			if time.Now().After(deadline) {
				return Run{}, fmt.Errorf("%d of %d rows committed in time", got, c.records)
			}
			time.Sleep(20 * time.Millisecond)
			got += tableRows(table, seen)
		}
		wall = time.Since(t0).Seconds()
		if got != int64(c.records) {
			return Run{}, fmt.Errorf("the table holds %d rows, want %d", got, c.records)
		}
	}
	out := Run{Scenario: sc, Cores: len(cpus), Rows: rows, Wall: wall, RowsPerS: float64(rows) / wall, CPU: map[string]float64{}}
	out.SinkRSSMB = snk.hwm()
	for _, p := range []*proc{coord, src, snk} { // the coordinator first
		if err := p.stop(); err != nil {
			return Run{}, err
		}
		out.CPU[p.name] = p.cpu()
		out.CPUTotal += p.cpu()
	}
	procs = nil
	return out, nil
}

// numRecords finds the row counts in a Delta commit's add actions.
var numRecords = regexp.MustCompile(`numRecords\\?":(\d+)`)

// tableRows returns the rows that commits of the table's log not in seen
// add, and records them in seen.
func tableRows(table string, seen map[string]int64) int64 {
	ents, _ := os.ReadDir(filepath.Join(table, "_delta_log"))
	var rows int64
	for _, e := range ents {
		if _, ok := seen[e.Name()]; ok || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(table, "_delta_log", e.Name()))
		if err != nil {
			continue // being renamed into place: read it next time
		}
		var k int64
		for _, m := range numRecords.FindAllSubmatch(data, -1) {
			v, _ := strconv.ParseInt(string(m[1]), 10, 64)
			k += v
		}
		if strings.Contains(string(data), `"dataChange":false`) {
			k = 0 // a compaction moves rows, it adds none
		}
		seen[e.Name()] = k
		rows += k
	}
	return rows
}

const orderSchema = `{"type":"record","name":"order","fields":[{"name":"order_id","type":"long"},` +
	`{"name":"customer","type":"string"},{"name":"item","type":"string"},{"name":"quantity","type":"int"},` +
	`{"name":"price","type":"double"},{"name":"created_at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`

var items = []string{"keyboard", "mouse", "monitor", "laptop", "dock", "cable", "headset", "webcam"}

// produce writes the topic of JSON orders once (a topic already holding
// them is reused) and returns its name.
func produce(c config) string {
	ctx := context.Background()
	topic := fmt.Sprintf("bench-scaling-%d-p%d", c.records, c.partitions)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.ProducerLinger(10*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		fatalf("kafka: %v", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if ends, err := adm.ListEndOffsets(ctx, topic); err == nil && ends.Error() == nil {
		total := int64(0)
		ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
		if total == int64(c.records) {
			return topic
		}
		if total > 0 {
			fatalf("kafka: topic %s holds %d records, not %d: delete it", topic, total, c.records)
		}
	}
	if _, err := adm.CreateTopic(ctx, int32(c.partitions), 1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		fatalf("kafka: create %s: %v", topic, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var perr error
	for i := range c.records {
		v := fmt.Appendf(nil, `{"order_id":%d,"customer":"customer-%d","item":"%s","quantity":%d,"price":%d.%02d,"created_at":%d}`,
			i, i%9973, items[i%len(items)], 1+i%5, 5+i%500, i%100, 1767225600000+int64(i))
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "order-%d", i), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				perr = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if perr != nil {
		fatalf("kafka: produce: %v", perr)
	}
	return topic
}

// niceness is -nice; live holds the processes running, killed on SIGINT
// or SIGTERM.
var (
	niceness int
	liveMu   sync.Mutex
	live     = map[*proc]bool{}
)

// proc is one CLI process, pinned with taskset.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

func start(dir, name, cpus, bin string, args ...string) (*proc, error) {
	f, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	argv := append([]string{"taskset", "-c", cpus, bin}, args...)
	if niceness != 0 {
		argv = append([]string{"nice", "-n", strconv.Itoa(niceness)}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: f, done: make(chan struct{})}
	liveMu.Lock()
	live[p] = true
	liveMu.Unlock()
	go func() {
		p.err = cmd.Wait()
		liveMu.Lock()
		delete(live, p)
		liveMu.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		return fmt.Errorf("%s did not finish in %s", p.name, d)
	}
}

// stop interrupts p and waits for it.
func (p *proc) stop() error {
	if !p.exited() {
		_ = p.cmd.Process.Signal(os.Interrupt)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop on SIGINT", p.name)
	}
	p.log.Close()
	return nil
}

func (p *proc) kill() {
	if !p.exited() {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	p.log.Close()
}

// cpu is the user + system time of the exited process. taskset execs the
// CLI, so it is the CLI's.
func (p *proc) cpu() float64 {
	ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// hwm is the process's peak RSS in MiB (VmHWM), 0 when unknown.
func (p *proc) hwm() float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}

func waitListening(addr string, procs []*proc) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range procs {
			if p.exited() {
				return fmt.Errorf("%s exited: %v", p.name, p.err)
			}
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s", addr)
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fatalf("%v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// onlineCPUs lists the CPUs this process may run on, in order: "the first
// N cores" are the first N of them.
func onlineCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		out := make([]int, runtime.NumCPU())
		for i := range out {
			out[i] = i
		}
		return out
	}
	var out []int
	for i := range 1 << 12 {
		if set.IsSet(i) {
			out = append(out, i)
		}
	}
	return out
}

func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func printTable(f *os.File, c config, rep Report) {
	tw := tabwriter.NewWriter(f, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tcores\trows/s (median)\tratio to 1 core\tCPU-s (median)\tsource/sink/run CPU-s\tsink peak RSS MiB\trounds (rows/s)\t")
	for _, sc := range c.scenarios {
		base := 0.0
		for _, n := range c.cores {
			var rps, cpu, src, snk, crd, rss []float64
			for _, r := range rep.Runs {
				if r.Scenario == sc && r.Cores == n {
					rps, cpu = append(rps, r.RowsPerS), append(cpu, r.CPUTotal)
					src, snk, crd = append(src, r.CPU["source"]), append(snk, r.CPU["sink"]), append(crd, r.CPU["run"])
					rss = append(rss, r.SinkRSSMB)
				}
			}
			m := median(rps)
			if n == 1 {
				base = m
			}
			ratio := "-"
			if base > 0 {
				ratio = fmt.Sprintf("%.2f×", m/base)
			}
			rounds := make([]string, len(rps))
			for i, v := range rps {
				rounds[i] = fmt.Sprintf("%.0f", v)
			}
			fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%.2f\t%.2f/%.2f/%.2f\t%.0f\t%s\t\n", sc, n, m, ratio, median(cpu),
				median(src), median(snk), median(crd), median(rss), strings.Join(rounds, " "))
		}
	}
	tw.Flush()
	fmt.Fprintf(f, "# load average before: %s; after: %s\n", rep.LoadStart, rep.LoadEnd)
}

func loadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return runtime.GOARCH
}

func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

// moduleRoot is the directory of go.mod above the working directory.
func moduleRoot() string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "scaling: "+format+"\n", a...)
	os.Exit(1)
}
