package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
)

// The soak test (issue 16): Kafka → Delta, Kafka → PostgreSQL and Kafka →
// Kafka, each one `flightline run` process with in-process source and sink
// (the sync form) and --metrics-addr, run side by side. First each
// pipeline drains a prefilled topic, which measures its peak rate on this
// machine (with the other two draining too); then a producer writes to each
// topic at half that rate (at most FLIGHTLINE_SOAK_MAX_RATE, see
// soakMaxRate) for the soak's duration, and every few seconds
// the test samples each process: resident memory (and its anonymous part)
// and open descriptors from /proc; Go heap allocated
// (go_memstats_heap_alloc_bytes) and live after the last GC
// (go_gc_heap_live_bytes), the Go runtime's memory from the OS
// (go_memstats_sys_bytes), goroutines, Arrow allocator bytes outstanding
// (flightline_arrow_allocated_bytes), rows committed and the commit
// latency histogram from its metrics endpoint; and the lag (records produced minus
// rows committed). It writes the samples as CSV and, when
// FLIGHTLINE_PLOT_PYTHON is set (services.sh up plot), a PNG chart beside
// it, and fails if RSS, the Go runtime's memory, the live heap, Arrow
// bytes, goroutines or descriptors grow over the second half of the run
// (slope of a least-squares line) or the lag grows (the checks explain
// why the allocated heap is logged, not bounded). The processes run with
// --pprof: a fifth and nine tenths into the steady phase the test saves
// each one's heap profile after a GC and its goroutine dump beside the CSV.
// FLIGHTLINE_SOAK_PIPELINES runs a subset (e.g. delta).
//
// FLIGHTLINE_SOAKTIME sets the steady phase (default 2m: the short soak of
// make test; make soak runs 30m). FLIGHTLINE_SOAK_DIR is where the CSV and
// the chart go (default a new directory under the system's temp dir; the
// test logs it).

// soakPipeline is one pipeline of the soak.
type soakPipeline struct {
	name    string
	topic   string
	format  string // raw or json
	sink    string // the sink spec
	metrics string // host:port of its metrics endpoint
	proc    *proc
	log     *syncBuffer

	produced atomic.Int64
	peak     float64 // rows/s while draining the prefill
	rate     float64 // the steady rate produced
}

// soakSample is one sample of one pipeline.
type soakSample struct {
	t          float64 // seconds since the steady phase began
	rss, heap  float64 // bytes (heap: go_memstats_heap_alloc_bytes, garbage included)
	anon       float64 // bytes of rss that map no file (RssAnon)
	live       float64 // bytes the last GC marked live (go_gc_heap_live_bytes)
	gosys      float64 // bytes the Go runtime obtained from the OS (go_memstats_sys_bytes)
	arrow      float64 // bytes outstanding in the Arrow allocator
	goroutines float64
	fds        float64
	rowsPerSec float64
	p50, p99   float64 // commit latency, seconds; NaN without commits
	lag        float64 // records produced minus rows committed
}

// promSample is one series of a Prometheus text exposition.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape reads the metrics endpoint at addr.
func scrape(ctx context.Context, addr string) ([]promSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []promSample
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		s := promSample{name: line[:sp], labels: map[string]string{}, value: v}
		if i := strings.IndexByte(s.name, '{'); i >= 0 {
			for _, kv := range strings.Split(strings.TrimSuffix(s.name[i+1:], "}"), ",") {
				k, v, ok := strings.Cut(kv, "=")
				if ok {
					s.labels[k] = strings.Trim(v, `"`)
				}
			}
			s.name = s.name[:i]
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// sum adds the series named name whose labels include want.
func sum(ss []promSample, name string, want map[string]string) float64 {
	var t float64
	for _, s := range ss {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range want {
			if s.labels[k] != v {
				ok = false
			}
		}
		if ok {
			t += s.value
		}
	}
	return t
}

// commitRole is the role label under which the process records commits.
func commitRole(ss []promSample) string {
	for _, s := range ss {
		if s.name == "flightline_commit_latency_seconds_count" {
			return s.labels["role"]
		}
	}
	return ""
}

// buckets is the commit latency histogram (le → cumulative count).
func buckets(ss []promSample) map[float64]float64 {
	b := map[float64]float64{}
	for _, s := range ss {
		if s.name != "flightline_commit_latency_seconds_bucket" {
			continue
		}
		le, err := strconv.ParseFloat(s.labels["le"], 64)
		if err != nil {
			le = math.Inf(1)
		}
		b[le] += s.value
	}
	return b
}

// quantile is the q quantile of the commits between two histogram
// snapshots, as the upper bound of its bucket (NaN without commits).
func quantile(prev, cur map[float64]float64, q float64) float64 {
	les := slices.Sorted(func(yield func(float64) bool) {
		for le := range cur {
			if !yield(le) {
				return
			}
		}
	})
	total := cur[math.Inf(1)] - prev[math.Inf(1)]
	if total <= 0 {
		return math.NaN()
	}
	for _, le := range les {
		if cur[le]-prev[le] >= q*total {
			if math.IsInf(le, 1) {
				return les[max(0, len(les)-2)]
			}
			return le
		}
	}
	return math.NaN()
}

// procStats reads the resident memory (bytes), its anonymous part (the
// rest maps files: mostly the binary's own pages, which the kernel pages
// in and out as the machine needs) and the open descriptors of pid.
func procStats(pid int) (rss, anon, fds float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb * 1024
		case "RssAnon:":
			anon = kb * 1024
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, 0, err
	}
	return rss, anon, float64(len(ents)), nil
}

// slope is the least-squares slope of ys over xs.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

func median(ys []float64) float64 {
	s := slices.Clone(ys)
	slices.Sort(s)
	return s[len(s)/2]
}

// soakProduce writes n records to topic (keys s<from>…), round-robin over
// its partitions, and counts them in p.produced once acknowledged.
func soakProduce(ctx context.Context, cl *kgo.Client, p *soakPipeline, from, n int64) error {
	var wg sync.WaitGroup
	var first error
	var mu sync.Mutex
	for i := from; i < from+n; i++ {
		k := fmt.Sprintf("s%d", i)
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: p.topic, Key: []byte(k), Value: []byte(killValue("k" + k[1:]))}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
				return
			}
			p.produced.Add(1)
		})
	}
	wg.Wait()
	return first
}

var (
	soakBuild   sync.Once
	soakBinPath string
	soakErr     error
)

// soakBin is the CLI built as it ships, without -race (the kill tests'
// flightlineBin has it). The race detector's runtime keeps memory of its
// own outside the Go heap (shadow memory and history for every heap
// address and goroutine it sees), which grows for minutes: a -race Kafka →
// Delta process at 15k rows/s went from 253 to 430 MiB resident in 6
// minutes with a Go heap of 30–75 MB and 111 MB obtained from the OS,
// while the same build without -race stayed at 104–133 MiB. The soak
// bounds the memory of the product, so it measures that build, and checks
// that it is one.
func soakBin(t *testing.T) string {
	t.Helper()
	soakBuild.Do(func() {
		dir, err := os.MkdirTemp("", "flightline-soak-bin-")
		if err != nil {
			soakErr = err
			return
		}
		soakBinPath = filepath.Join(dir, "flightline")
		out, err := exec.Command("go", "build", "-o", soakBinPath, "../cmd/flightline").CombinedOutput()
		if err != nil {
			soakErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, soakErr)
	requireNoRace(t, soakBinPath)
	return soakBinPath
}

// requireNoRace fails unless bin was built without the race detector.
func requireNoRace(t *testing.T, bin string) {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
	require.NoError(t, err, "go version -m: %s", out)
	require.NotRegexp(t, `(?m)^\s*build\s+-race=true\s*$`, string(out),
		"the soak must measure the CLI as it ships: the race detector's own memory grows outside the Go heap")
}

// fetchTo saves what url answers in file.
func fetchTo(ctx context.Context, url, file string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

// soakMaxRate caps each pipeline's steady rate (rows/s):
// FLIGHTLINE_SOAK_MAX_RATE, default 25000. Half the peak of the plain
// build's burst through the prefill (300k–600k rows/s for Delta on the
// 2-core machine) is more than this test process can produce for three
// pipelines at once, or than the pipelines sustain while it does; the
// -race build's halves were 15k–18k.
func soakMaxRate(t *testing.T) float64 {
	if v := os.Getenv("FLIGHTLINE_SOAK_MAX_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err, "FLIGHTLINE_SOAK_MAX_RATE")
		return r
	}
	return 25000
}

// soakPipelines are the pipelines to run: FLIGHTLINE_SOAK_PIPELINES, a
// comma-separated subset of delta, postgres and kafka (default all three),
// to look at one alone.
func soakPipelines(t *testing.T) []string {
	all := []string{"delta", "postgres", "kafka"}
	v := os.Getenv("FLIGHTLINE_SOAK_PIPELINES")
	if v == "" {
		return all
	}
	names := strings.Split(v, ",")
	for _, n := range names {
		require.Contains(t, all, n, "FLIGHTLINE_SOAK_PIPELINES")
	}
	return names
}

func soakDuration(t *testing.T) time.Duration {
	if v := os.Getenv("FLIGHTLINE_SOAKTIME"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "FLIGHTLINE_SOAKTIME")
		return d
	}
	return 2 * time.Minute
}

// TestIntegrationSoak is the soak: see the top of this file.
func TestIntegrationSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak: skipped in -short mode")
	}
	brokers := Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker")
	Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	bin := soakBin(t)
	steady := soakDuration(t)
	interval := max(2*time.Second, steady/300)
	ctx, cancel := context.WithTimeout(context.Background(), steady+15*time.Minute)
	defer cancel()
	dir := os.Getenv("FLIGHTLINE_SOAK_DIR")
	if dir == "" {
		var err error
		dir, err = os.MkdirTemp("", "flightline-soak-")
		require.NoError(t, err)
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	schema := filepath.Join(t.TempDir(), "order.avsc")
	require.NoError(t, os.WriteFile(schema, []byte(killSchema), 0o644))

	var pls []*soakPipeline
	var table string // the Delta pipeline's table directory
	for _, name := range soakPipelines(t) {
		_, topic := kafkaTopic(t, ctx, brokers, "soak-"+name, 3)
		p := &soakPipeline{name: name, topic: topic, format: "json", log: &syncBuffer{}}
		switch name {
		case "delta":
			table = filepath.Join(t.TempDir(), "orders")
			p.sink = "delta:" + table
		case "postgres":
			p.sink = postgresKillDest(t, ctx, topic).spec
		case "kafka":
			p.format = "raw"
			_, out := kafkaTopic(t, ctx, brokers, topic+"-out", 3)
			p.sink = fmt.Sprintf("kafka:?brokers=%s&topic=%s", brokers, out)
		}
		pls = append(pls, p)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()

	// Peak: drain a prefilled topic, all three at once. The prefill must
	// take the pipelines several seconds, or the first commit already
	// covers it and no rate can be measured: 60k records were enough for
	// the -race build, not for the plain one (~0.3 s).
	const prefill = 300000
	for _, p := range pls {
		require.NoError(t, soakProduce(ctx, cl, p, 0, prefill))
	}
	for _, p := range pls {
		format := "format=raw"
		if p.format == "json" {
			format = "format=json&schema=" + schema
		}
		p.metrics = freePort(t)
		p.proc = startLogged(t, bin, p.log, "run", "--log-level", "warn", "--metrics-addr", p.metrics, "--pprof",
			"--source", fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s-g&%s", brokers, p.topic, p.topic, format),
			"--sink", p.sink, "--stream", p.topic, "--pipeline", p.topic+"-pipe")
	}
	committed := func(p *soakPipeline) (float64, []promSample, error) {
		ss, err := scrape(ctx, p.metrics)
		if err != nil {
			return 0, nil, err
		}
		role := commitRole(ss)
		if role == "" {
			return 0, ss, nil
		}
		return sum(ss, "flightline_rows_total", map[string]string{"role": role}), ss, nil
	}
	var wg sync.WaitGroup
	for _, p := range pls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first time.Time
			var firstRows float64
			for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if done, _ := p.proc.exited(); done {
					return
				}
				rows, _, err := committed(p)
				if err != nil || rows == 0 {
					continue
				}
				if first.IsZero() {
					first, firstRows = time.Now(), rows
					continue
				}
				if rows >= prefill {
					if rows > firstRows {
						p.peak = (rows - firstRows) / time.Since(first).Seconds()
					} else {
						p.peak = math.NaN() // drained before two samples differed
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, p := range pls {
		if done, err := p.proc.exited(); done {
			t.Fatalf("%s exited (%v)\n%s", p.name, err, p.log.String())
		}
		require.False(t, math.IsNaN(p.peak), "%s drained the %d-record prefill before a rate could be measured: raise the prefill", p.name, prefill)
		require.NotZero(t, p.peak, "%s did not drain %d records within 5 minutes\n%s", p.name, prefill, p.log.String())
		p.rate = min(p.peak/2, soakMaxRate(t))
		t.Logf("%s: peak %.0f rows/s while draining; producing %.0f rows/s for %v", p.name, p.peak, p.rate, steady)
	}

	// Steady: produce at half the peak, sample.
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	perr := make(chan error, len(pls))
	for _, p := range pls {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			const tick = 100 * time.Millisecond
			start, next := time.Now(), int64(prefill)
			for {
				select {
				case <-stop:
					return
				case <-time.After(tick):
				}
				due := prefill + int64(p.rate*time.Since(start).Seconds())
				if due > next {
					if err := soakProduce(ctx, cl, p, next, due-next); err != nil {
						perr <- fmt.Errorf("%s: producing: %w", p.name, err)
						return
					}
					next = due
				}
			}
		}()
	}
	samples := map[string][]soakSample{}
	prevRows := map[string]float64{}
	prevHist := map[string]map[float64]float64{}
	dataFiles := func() int {
		files, err := filepath.Glob(filepath.Join(table, "*.parquet"))
		require.NoError(t, err)
		return len(files)
	}
	start, files0 := time.Now(), 0
	if table != "" {
		files0 = dataFiles()
	}
	// deltaFiles samples the Delta table as a reader sees it: its live
	// data files (the snapshot's, which compaction bounds), its data files
	// on disk (live plus those compacted away and not yet vacuumed) and
	// its log files (commits and checkpoints). Empty for the others.
	deltaFiles := func(p *soakPipeline) string {
		if p.name != "delta" || table == "" {
			return ",,"
		}
		live := ""
		if st, err := objstore.Open(ctx, table, nil); err == nil {
			if snap, err := deltalog.NewTable(st, nil).LeanSnapshot(ctx); err == nil {
				live = strconv.Itoa(len(snap.Files))
			}
		}
		logs, _ := filepath.Glob(filepath.Join(table, "_delta_log", "*"))
		return fmt.Sprintf("%s,%d,%d", live, dataFiles(), len(logs))
	}
	csvPath := filepath.Join(dir, "soak.csv")
	csv, err := os.Create(csvPath)
	require.NoError(t, err)
	fmt.Fprintln(csv, "t_s,pipeline,rss_bytes,rss_anon_bytes,go_heap_bytes,go_heap_live_bytes,go_sys_bytes,arrow_bytes,goroutines,open_fds,rows_per_s,commit_p50_s,commit_p99_s,lag_records,delta_live_files,delta_disk_files,delta_log_files")
	// Heap profiles after a GC (pprof's heap?gc=1) and goroutine dumps of
	// each process, early (a fifth into the steady phase) and late (at
	// nine tenths), beside the CSV: `go tool pprof -base
	// heap-delta-early.pb.gz heap-delta-late.pb.gz` shows what the live
	// heap gained.
	profiled := map[string]bool{}
	profile := func(when string) {
		for _, p := range pls {
			for _, prof := range []struct{ path, file string }{
				{"heap?gc=1", "heap-" + p.name + "-" + when + ".pb.gz"},
				{"goroutine?debug=1", "goroutine-" + p.name + "-" + when + ".txt"},
			} {
				if err := fetchTo(ctx, "http://"+p.metrics+"/debug/pprof/"+prof.path, filepath.Join(dir, prof.file)); err != nil {
					t.Errorf("%s: profile %s: %v", p.name, prof.path, err)
				}
			}
		}
		t.Logf("profiles (%s): %s", when, dir)
		profiled[when] = true
	}
	for tick := time.NewTicker(interval); time.Since(start) < steady; <-tick.C {
		if el := time.Since(start); el >= steady/5 && !profiled["early"] {
			profile("early")
		} else if el >= steady*9/10 && !profiled["late"] {
			profile("late")
		}
		for _, p := range pls {
			if done, err := p.proc.exited(); done {
				t.Fatalf("%s exited (%v)\n%s", p.name, err, p.log.String())
			}
			rows, ss, err := committed(p)
			if err != nil {
				t.Logf("%s: scrape: %v", p.name, err)
				continue
			}
			rss, anon, fds, err := procStats(p.proc.cmd.Process.Pid)
			require.NoError(t, err)
			if !slices.ContainsFunc(ss, func(s promSample) bool { return s.name == "flightline_arrow_allocated_bytes" }) {
				t.Fatalf("%s: the metrics endpoint has no flightline_arrow_allocated_bytes", p.name)
			}
			h := buckets(ss)
			s := soakSample{t: time.Since(start).Seconds(), rss: rss, anon: anon, fds: fds,
				heap:       sum(ss, "go_memstats_heap_alloc_bytes", nil),
				live:       sum(ss, "go_gc_heap_live_bytes", nil),
				gosys:      sum(ss, "go_memstats_sys_bytes", nil),
				arrow:      sum(ss, "flightline_arrow_allocated_bytes", nil),
				goroutines: sum(ss, "go_goroutines", nil),
				lag:        float64(p.produced.Load()) - rows,
				p50:        quantile(prevHist[p.name], h, 0.5), p99: quantile(prevHist[p.name], h, 0.99)}
			if prev := samples[p.name]; len(prev) > 0 {
				s.rowsPerSec = (rows - prevRows[p.name]) / (s.t - prev[len(prev)-1].t)
			}
			prevRows[p.name], prevHist[p.name] = rows, h
			samples[p.name] = append(samples[p.name], s)
			fmt.Fprintf(csv, "%.1f,%s,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.1f,%g,%g,%.0f,%s\n", s.t, p.name, s.rss, s.anon, s.heap, s.live, s.gosys, s.arrow, s.goroutines,
				s.fds, s.rowsPerSec, s.p50, s.p99, s.lag, deltaFiles(p))
		}
	}
	close(stop)
	pwg.Wait()
	close(perr)
	for err := range perr {
		require.NoError(t, err)
	}
	require.NoError(t, csv.Close())
	t.Logf("samples: %s", csvPath)
	if table != "" {
		// The Delta sink's snapshot holds every active file (≈227 bytes
		// of live heap each, docs/sinks/delta.md), and compaction bounds
		// how many there are; the files on disk include those compacted
		// away until vacuum removes them.
		n := dataFiles()
		t.Logf("delta: %d data files on disk at the end, %d at the steady phase's start: %.1f files/s written; live files, disk files, log files: %s",
			n, files0, float64(n-files0)/time.Since(start).Seconds(), deltaFiles(&soakPipeline{name: "delta"}))
	}
	if py := os.Getenv("FLIGHTLINE_PLOT_PYTHON"); py != "" {
		png := filepath.Join(dir, "soak.png")
		out, err := exec.CommandContext(ctx, py, "python/soak_chart.py", csvPath, png).CombinedOutput()
		require.NoError(t, err, "soak_chart.py: %s", out)
		t.Logf("chart: %s", png)
	} else {
		t.Log("no chart: FLIGHTLINE_PLOT_PYTHON is not set (integration/services/services.sh up plot)")
	}

	// The checks, over the second half.
	for _, p := range pls {
		var xs []float64
		series := map[string][]float64{}
		var p99s []float64
		for _, s := range samples[p.name] {
			if s.t < steady.Seconds()/2 {
				continue
			}
			xs = append(xs, s.t)
			series["rss"] = append(series["rss"], s.rss)
			series["anon"] = append(series["anon"], s.anon)
			series["heap"] = append(series["heap"], s.heap)
			series["gosys"] = append(series["gosys"], s.gosys)
			series["live"] = append(series["live"], s.live)
			series["arrow"] = append(series["arrow"], s.arrow)
			series["goroutines"] = append(series["goroutines"], s.goroutines)
			series["fds"] = append(series["fds"], s.fds)
			series["lag"] = append(series["lag"], s.lag)
			if !math.IsNaN(s.p99) {
				p99s = append(p99s, s.p99)
			}
		}
		require.GreaterOrEqual(t, len(xs), 10, "%s: too few samples in the second half", p.name)
		half := xs[len(xs)-1] - xs[0]
		// The growth each series may show over the second half: its
		// least-squares line must not rise by more than this. The Go heap
		// is bounded by what the last GC found live (live), not by
		// go_memstats_heap_alloc_bytes (heap), which counts garbage not
		// yet collected and rises and falls with the collector's pacing;
		// nor is RSS's anonymous part (anon) bounded apart from RSS: it
		// moves with the scavenger, within what the runtime obtained from
		// the OS (gosys, go_memstats_sys_bytes), which is. heap and anon
		// are logged. The floors cover a GC cycle's swing (RSS, live) and
		// a restart's worth of
		// goroutines and descriptors; lag may not grow by two seconds of
		// input (batches of up to 10000 rows or 500 ms and the commit
		// cadence swing it by about one; the fitted line averages that).
		tol := map[string]float64{
			"rss":        max(0.15*median(series["rss"]), 48<<20),
			"gosys":      max(0.15*median(series["gosys"]), 48<<20),
			"live":       max(0.25*median(series["live"]), 48<<20),
			"arrow":      max(0.25*median(series["arrow"]), 48<<20),
			"goroutines": max(0.1*median(series["goroutines"]), 20),
			"fds":        max(0.1*median(series["fds"]), 10),
			"lag":        2 * p.rate,
		}
		var rs float64
		for _, s := range samples[p.name][len(samples[p.name])/2:] {
			rs += s.rowsPerSec
		}
		rs /= float64(len(samples[p.name]) - len(samples[p.name])/2)
		p99 := math.NaN()
		if len(p99s) > 0 {
			p99 = median(p99s)
		}
		t.Logf("%s: second half: %.0f rows/s (producing %.0f), median commit p99 %.3fs", p.name, rs, p.rate, p99)
		for _, k := range []string{"rss", "anon", "gosys", "heap", "live", "arrow", "goroutines", "fds", "lag"} {
			growth := slope(xs, series[k]) * half
			bound, checked := tol[k]
			if !checked {
				t.Logf("%s: %-10s median %.0f, growth over the second half %.0f (not bounded)", p.name, k,
					median(series[k]), growth)
				continue
			}
			t.Logf("%s: %-10s median %.0f, growth over the second half %.0f (bound %.0f)", p.name, k,
				median(series[k]), growth, bound)
			if growth > bound {
				t.Errorf("%s: %s grows by %.0f over the second half of the soak (bound %.0f); see %s",
					p.name, k, growth, tol[k], csvPath)
			}
		}
	}
}

// The soak's binary check tells a -race build (flightlineBin) from soakBin.
func TestSoakBinaryIsNotRace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI twice")
	}
	t.Parallel() // own topic, tables, directories and ports; see services.go
	requireNoRace(t, soakBin(t))
	out, err := exec.Command("go", "version", "-m", flightlineBin(t)).CombinedOutput()
	require.NoError(t, err)
	require.Regexp(t, `(?m)^\s*build\s+-race=true\s*$`, string(out), "the kill tests' binary is the -race one")
}
