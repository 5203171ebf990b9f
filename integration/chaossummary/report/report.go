// Package report is the combined chaos report of the fault and kill tests
// (issue 16): each test appends Rows as JSON lines to the file named by
// FLIGHTLINE_CHAOS_REPORT, and Summarize prints one table of them.
package report

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"
)

// Row is one (sink, fault kind) line of one test run.
type Row struct {
	Test       string `json:"test"`
	Sink       string `json:"sink"`
	Fault      string `json:"fault"`   // the fault or kill kind
	Faults     int    `json:"faults"`  // faults injected
	Checked    int    `json:"checked"` // records checked by the independent reader (0: not reached)
	Dups       int    `json:"dups"`    // records read twice, or read though aborted
	Losses     int    `json:"losses"`
	StallMs    int64  `json:"stall_ms"`    // the longest time without a commit around such a fault
	RecoveryMs int64  `json:"recovery_ms"` // the longest time from the fault's end to the next commit; -1: not measured
	Failed     bool   `json:"failed"`      // the test had failed when it wrote the row
}

// Summarize reads JSON lines of Rows from r and writes to w one table,
// a line per (sink, fault): runs, faults, records checked, duplicates and
// losses summed; the longest stall and recovery. A line a failed test
// wrote is marked FAIL. It returns the number of rows read.
func Summarize(r io.Reader, w io.Writer) (int, error) {
	type key struct{ sink, fault string }
	type agg struct {
		runs, faults, checked, dups, losses int
		stall, recovery                     int64
		failed                              bool
	}
	sums := map[key]*agg{}
	var keys []key
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	n := 0
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var row Row
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return n, fmt.Errorf("line %d: %w", line, err)
		}
		n++
		k := key{row.Sink, row.Fault}
		a := sums[k]
		if a == nil {
			a = &agg{recovery: -1}
			sums[k] = a
			keys = append(keys, k)
		}
		a.runs++
		a.faults += row.Faults
		a.checked += row.Checked
		a.dups += row.Dups
		a.losses += row.Losses
		a.stall = max(a.stall, row.StallMs)
		a.recovery = max(a.recovery, row.RecoveryMs)
		a.failed = a.failed || row.Failed
	}
	if err := sc.Err(); err != nil {
		return n, err
	}
	slices.SortStableFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.sink, b.sink), cmp.Compare(a.fault, b.fault))
	})
	ms := func(v int64) string {
		if v < 0 {
			return "-"
		}
		return (time.Duration(v) * time.Millisecond).Round(100 * time.Millisecond).String()
	}
	fmt.Fprintf(w, "%-16s %-28s %4s %6s %8s %5s %6s %14s %14s %s\n", "sink", "fault", "runs", "faults", "checked",
		"dups", "losses", "longest stall", "max recovery", "result")
	for _, k := range keys {
		a := sums[k]
		res := "ok"
		if a.failed || a.dups > 0 || a.losses > 0 {
			res = "FAIL"
		}
		fmt.Fprintf(w, "%-16s %-28s %4d %6d %8d %5d %6d %14s %14s %s\n", k.sink, k.fault, a.runs, a.faults, a.checked,
			a.dups, a.losses, ms(a.stall), ms(a.recovery), res)
	}
	return n, nil
}
