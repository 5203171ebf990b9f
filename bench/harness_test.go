package bench

import (
	"strings"
	"testing"
)

func TestMedianOf(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		in := append([]float64(nil), c.in...)
		if got := medianOf(c.in); got != c.want {
			t.Errorf("medianOf(%v) = %v, want %v", c.in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Errorf("medianOf reordered its input: %v", c.in)
			}
		}
	}
}

func TestRoundOrderRotates(t *testing.T) {
	first := map[int]int{}
	for r := range 6 {
		o := roundOrder(3, r)
		seen := map[int]bool{}
		for _, k := range o {
			seen[k] = true
		}
		if len(o) != 3 || len(seen) != 3 {
			t.Fatalf("round %d: order %v is not a permutation of 3 sides", r, o)
		}
		first[o[0]]++
	}
	for k := range 3 {
		if first[k] != 2 {
			t.Errorf("side %d ran first in %d of 6 rounds, want 2", k, first[k])
		}
	}
}

func TestRatios(t *testing.T) {
	var out strings.Builder
	med := map[string]float64{"ours": 300, "peer": 100}
	perRound := []map[string]float64{
		{"ours": 200, "peer": 100}, // 2
		{"ours": 300, "peer": 50},  // 6
		{"ours": 400},              // peer skipped: no per-round ratio
		{"ours": 300, "peer": 100}, // 3
	}
	got := ratios(&out, []pair{{"ours", "peer"}, {"ours", "missing"}}, med, perRound)
	if len(got) != 1 {
		t.Fatalf("got %d ratios, want 1 (a missing side has none): %+v", len(got), got)
	}
	if got[0].OfMedians != 3 || got[0].PerRoundMedian != 3 {
		t.Errorf("ratio = %+v, want 3 of medians and 3 median of per-round ratios", got[0])
	}
	if !strings.Contains(out.String(), "ratio ours / peer: 3.00 (of medians), 3.00 (median of 3 per-round ratios)") {
		t.Errorf("printed %q", out.String())
	}
}
