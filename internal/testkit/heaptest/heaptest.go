// Package heaptest checks that a pipeline stage's memory does not grow with
// the length of the stream it processes.
//
// A stage that streams must hold a bounded amount of live data however long
// it runs: its buffers are bounded, and everything else is garbage once a
// batch is done. Growth tests run a stage over a stream several times longer
// than its buffers, call Sample at several points, and Check that the live
// heap after a forced collection stayed within a fixed bound of its first
// sample, which is taken once the stage has warmed up (buffers allocated,
// pools filled).
//
// Set FLIGHTLINE_HEAP_PROFILE_DIR to also write a heap profile at every
// sample (go tool pprof -sample_index=inuse_space FILE shows what holds the
// memory).
package heaptest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"testing"
)

// Live forces two garbage collections (the second finishes sweeping what
// the first freed, including finalizer-released memory) and returns the
// bytes of heap objects that survived: the live heap.
func Live() uint64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	return s[0].Value.Uint64()
}

// Growth records live-heap samples of one run. It is used by one
// goroutine.
type Growth struct {
	tb      testing.TB
	bound   uint64
	labels  []string
	samples []uint64
}

// New returns a Growth that allows the live heap to exceed its first
// sample by at most bound bytes.
func New(tb testing.TB, bound uint64) *Growth {
	return &Growth{tb: tb, bound: bound}
}

// Sample measures the live heap (see Live) and records it under label; the
// first sample is the baseline. The caller must hold no more than the
// stage would at that point (release batches first).
func (g *Growth) Sample(label string) uint64 {
	g.tb.Helper()
	v := Live()
	g.labels = append(g.labels, label)
	g.samples = append(g.samples, v)
	if dir := os.Getenv("FLIGHTLINE_HEAP_PROFILE_DIR"); dir != "" {
		name := strings.NewReplacer("/", "_", " ", "_", "%", "pct").Replace(g.tb.Name() + "-" + label)
		f, err := os.Create(filepath.Join(dir, name+".pprof"))
		if err == nil {
			err = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
		if err != nil {
			g.tb.Logf("heaptest: writing heap profile: %v", err)
		}
	}
	return v
}

// Check fails the test if any sample exceeds the first by more than the
// bound, and logs every sample either way.
func (g *Growth) Check() {
	g.tb.Helper()
	if len(g.samples) < 2 {
		g.tb.Fatalf("heaptest: %d samples; a growth check needs a baseline and at least one later sample", len(g.samples))
	}
	base := g.samples[0]
	var b strings.Builder
	worst := base
	for i, v := range g.samples {
		fmt.Fprintf(&b, " %s=%.1fMiB", g.labels[i], mib(v))
		worst = max(worst, v)
	}
	g.tb.Logf("live heap after GC:%s (bound: baseline + %.1f MiB)", b.String(), mib(g.bound))
	if worst > base+g.bound {
		g.tb.Errorf("live heap grew with the stream: %.1f MiB above the baseline of %.1f MiB (bound %.1f MiB);%s",
			mib(worst-base), mib(base), mib(g.bound), b.String())
	}
}

func mib(v uint64) float64 { return float64(v) / (1 << 20) }
