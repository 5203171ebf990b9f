package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The side-by-side harness. Every benchmark in this package that compares
// Flightline with a peer or a ceiling runs through interleave: round by
// round, each side once per round (the order rotated each round, so no side
// always runs first), instead of `-count N`, which runs all of one side's
// rounds before the other's and lets the machine's drift land in the ratio.
// After the last round it prints the median of each side and the ratios of
// the medians (and the median of the per-round ratios) as `#` lines, and one
// `interleaved-json` line that bench/report.py reads.
//
// Besides wall throughput it reports, for sides that run in this process
// alone, throughput per CPU second of this process ("MB/s per cpu-s"):
// on a loaded shared machine that moves far less than wall time does.
//
// Each side's round is an ordinary sub-benchmark (b.Run), so the usual
// `BenchmarkX/side#NN-2  N  ns/op  MB/s` lines are printed too (the #NN
// suffix is the round; bench/median.py drops it).

// side is one contender: a name and a benchmark body whose op does the same
// work as every other side's op in its group.
type side struct {
	name string
	run  func(b *testing.B)
}

// pair asks for the ratio of side a's throughput to side b's.
type pair struct{ a, b string }

// comparison describes a group of sides.
type comparison struct {
	// unit of the throughput compared ("MB/s", "rows/s"); perOp is how many
	// of that unit's numerator one op moves (MB per op for "MB/s"), the same
	// for every side. A side may instead record its own figure with
	// measured (a peer in another process that times itself).
	unit  string
	perOp float64
	// ratios to print; none means every side against the last one.
	ratios []pair
	// wallOnly: no throughput per CPU second of this process, because a
	// service (broker, object store, database) does part of every side's
	// work.
	wallOnly bool
	// external names the sides whose work runs in other processes (a
	// Python peer): this process's CPU time says nothing about them.
	external []string
}

// benchRounds is the number of interleaved rounds: FLIGHTLINE_BENCH_ROUNDS,
// default 3. Use it instead of -count.
func benchRounds() int {
	if n, err := strconv.Atoi(os.Getenv("FLIGHTLINE_BENCH_ROUNDS")); err == nil && n > 0 {
		return n
	}
	return 3
}

type ownFigure struct {
	v     float64
	extra map[string]float64
}

var ownFigures sync.Map // *testing.B → ownFigure

// measured records the side's own throughput figure for this run (in the
// comparison's unit), replacing perOp × N / elapsed: for a peer that runs
// in another process and times its own work. extra holds further figures
// by unit ("rows/cpu-s"); their medians and ratios are reported as well.
func measured(b *testing.B, v float64, extra map[string]float64) {
	ownFigures.Store(b, ownFigure{v, extra})
}

// interleaveResult is what interleave prints as JSON, one line per group.
type interleaveResult struct {
	Bench  string               `json:"bench"`
	Unit   string               `json:"unit"`
	Rounds int                  `json:"rounds"`
	Sides  []string             `json:"sides"`
	Values map[string][]float64 `json:"values"` // per side, one per round it ran
	Median map[string]float64   `json:"median"`
	Ratios []ratioResult        `json:"ratios"`
	// Extra: the figures sides passed to measured besides the main one,
	// by unit, then side; ExtraRatios their ratios by unit.
	Extra       map[string]map[string][]float64 `json:"extra,omitempty"`
	ExtraRatios map[string][]ratioResult        `json:"extra_ratios,omitempty"`
}

type ratioResult struct {
	A, B           string
	OfMedians      float64 `json:"of_medians"`
	PerRoundMedian float64 `json:"per_round_median"`
}

// peerMissing reports a comparison's peer that cannot run here: a failure
// under FLIGHTLINE_REQUIRE_SERVICES=1 (the services are supposed to be
// up, so a table without the peer would pass for a complete one), a line
// saying it is left out otherwise.
func peerMissing(tb testing.TB, why string) {
	tb.Helper()
	if os.Getenv("FLIGHTLINE_REQUIRE_SERVICES") == "1" {
		tb.Fatal(why + " (FLIGHTLINE_REQUIRE_SERVICES=1)")
	}
	tb.Log(why + "; left out of the comparison")
}

// interleave runs benchRounds() rounds of every side and reports medians and
// ratios. A side that skips while another runs fails the benchmark: a
// ratio against a peer that dropped out (its service, pyarrow or a Kafka
// client missing) would be reported as if it had been compared; when every
// side skips, the benchmark skips.
func interleave(b *testing.B, c comparison, sides ...side) {
	rounds := benchRounds()
	vals := map[string][]float64{}
	extra := map[string]map[string][]float64{}
	extraRound := make([]map[string]map[string]float64, rounds)
	perRound := make([]map[string]float64, rounds)
	for r := range extraRound {
		extraRound[r] = map[string]map[string]float64{}
	}
	var skipped []string // sides that skipped (their log says why)
	for r := range rounds {
		perRound[r] = map[string]float64{}
		for _, k := range roundOrder(len(sides), r) {
			s := sides[k]
			var last *testing.B
			var cpu float64
			ok := b.Run(s.name, func(b *testing.B) {
				last = b
				c0 := cpuSeconds()
				s.run(b)
				cpu = cpuSeconds() - c0 // of the last (the reported) call
			})
			if last != nil && last.Skipped() {
				if !slices.Contains(skipped, s.name) {
					skipped = append(skipped, s.name)
				}
			}
			if !ok || last == nil || last.Skipped() || last.N == 0 {
				continue
			}
			addExtra := func(u string, y float64) {
				if extra[u] == nil {
					extra[u] = map[string][]float64{}
					for i := range extraRound {
						extraRound[i][u] = map[string]float64{}
					}
				}
				extra[u][s.name] = append(extra[u][s.name], y)
				extraRound[r][u][s.name] = y
			}
			v, own := ownFigures.LoadAndDelete(last)
			var x float64
			if own {
				f := v.(ownFigure)
				x = f.v
				for u, y := range f.extra {
					addExtra(u, y)
				}
			} else if el := last.Elapsed().Seconds(); el > 0 {
				x = c.perOp * float64(last.N) / el
				if !slices.Contains(c.external, s.name) && !c.wallOnly && cpu > 0 {
					// Throughput per CPU second of this process (set-up
					// of the side included): on a loaded machine it
					// moves far less than wall throughput.
					addExtra(c.unit+" per cpu-s", c.perOp*float64(last.N)/cpu)
				}
			}
			if x > 0 {
				vals[s.name] = append(vals[s.name], x)
				perRound[r][s.name] = x
			}
		}
	}
	if len(skipped) > 0 {
		if len(vals) == 0 {
			b.Skipf("every side skipped: %v", skipped)
		}
		b.Fatalf("sides skipped while others ran, so their ratios would be missing: %v", skipped)
	}
	res := interleaveResult{Bench: b.Name(), Unit: c.unit, Rounds: rounds, Values: vals, Median: map[string]float64{}}
	for _, s := range sides {
		res.Sides = append(res.Sides, s.name)
		if len(vals[s.name]) > 0 {
			res.Median[s.name] = medianOf(vals[s.name])
		}
	}
	pairs := c.ratios
	if len(pairs) == 0 {
		for _, s := range sides[:len(sides)-1] {
			pairs = append(pairs, pair{s.name, sides[len(sides)-1].name})
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "# interleaved %s: %d rounds, median %s per side\n", b.Name(), rounds, c.unit)
	for _, s := range sides {
		if m, ok := res.Median[s.name]; ok {
			fmt.Fprintf(&out, "#   %-28s %12.4g  (rounds: %s)\n", s.name, m, fmtVals(vals[s.name]))
		} else {
			fmt.Fprintf(&out, "#   %-28s %12s\n", s.name, "skipped")
		}
	}
	res.Ratios = ratios(&out, pairs, res.Median, perRound)
	if len(extra) > 0 {
		res.Extra, res.ExtraRatios = extra, map[string][]ratioResult{}
		units := slices.Sorted(maps.Keys(extra))
		for _, u := range units {
			med := map[string]float64{}
			fmt.Fprintf(&out, "#   median %s:", u)
			for _, s := range sides {
				if v := extra[u][s.name]; len(v) > 0 {
					med[s.name] = medianOf(v)
					fmt.Fprintf(&out, " %s %.4g;", s.name, med[s.name])
				}
			}
			fmt.Fprintln(&out)
			pr := make([]map[string]float64, rounds)
			for i := range extraRound {
				pr[i] = extraRound[i][u]
			}
			res.ExtraRatios[u] = ratios(&out, pairs, med, pr)
		}
	}
	js, _ := json.Marshal(res)
	fmt.Fprintf(&out, "interleaved-json %s\n", js)
	fmt.Print(out.String())
}

// roundOrder is the order of n sides in round r: rotated by r, so each
// side runs first in every n-th round.
func roundOrder(n, r int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = (i + r) % n
	}
	return o
}

// ratios prints and returns each pair's ratio of medians and median of
// per-round ratios.
func ratios(out io.Writer, pairs []pair, med map[string]float64, perRound []map[string]float64) []ratioResult {
	var res []ratioResult
	for _, p := range pairs {
		ma, oka := med[p.a]
		mb, okb := med[p.b]
		if !oka || !okb || mb == 0 {
			continue
		}
		var rr []float64
		for _, m := range perRound {
			if x, y := m[p.a], m[p.b]; x > 0 && y > 0 {
				rr = append(rr, x/y)
			}
		}
		rt := ratioResult{A: p.a, B: p.b, OfMedians: ma / mb, PerRoundMedian: medianOf(rr)}
		res = append(res, rt)
		fmt.Fprintf(out, "#   ratio %s / %s: %.2f (of medians), %.2f (median of %d per-round ratios)\n",
			p.a, p.b, rt.OfMedians, rt.PerRoundMedian, len(rr))
	}
	return res
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fmtVals(v []float64) string {
	p := make([]string, len(v))
	for i, x := range v {
		p[i] = strconv.FormatFloat(x, 'g', 4, 64)
	}
	return strings.Join(p, " ")
}
