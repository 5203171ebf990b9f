// Command testtime reads `go test -json` output and says where the time
// went: the slowest tests, each package's wall time, and the totals (tests
// run, skipped, failed). make test pipes its go test runs through it and
// prints its summary at the end, beside the chaos table.
//
//	go test -json ./... | testtime -follow -save run.json
//	    echoes what go test prints without -v (package result lines, build
//	    errors, the output of failing tests) and appends the JSON events to
//	    run.json. It exits 0 unless it cannot read or write: the pipeline's
//	    status is go test's (make test runs under pipefail).
//	testtime [-top 25] [-phases phases.txt] [-require-run PATTERN] run.json...
//	    prints the phase table (lines "NAME START END RC" that make test
//	    wrote, start and end in Unix seconds), the slowest tests, each
//	    package's wall time and the totals. With -require-run, a skipped
//	    test whose package matches PATTERN (a regular expression) is listed
//	    and the exit status is 1: under FLIGHTLINE_REQUIRE_SERVICES=1 no
//	    integration test may turn into a skip.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string // build-output and build-fail events
}

func main() {
	follow := flag.Bool("follow", false, "echo go test's plain output from stdin and save the events")
	save := flag.String("save", "", "with -follow: append the JSON events to this file")
	top := flag.Int("top", 25, "how many of the slowest tests to list")
	phases := flag.String("phases", "", "a file of phase lines: NAME START END RC")
	requireRun := flag.String("require-run", "", "packages (regexp) whose skipped tests fail the summary")
	flag.Parse()
	var err error
	if *follow {
		err = runFollow(os.Stdin, os.Stdout, *save)
	} else {
		var ok bool
		ok, err = runSummary(os.Stdout, flag.Args(), *phases, *top, *requireRun)
		if err == nil && !ok {
			os.Exit(1)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtime:", err)
		os.Exit(2)
	}
}

// runFollow copies the events from r to the save file and prints what go
// test prints without -v: package-level output (ok/FAIL lines, panics
// outside a test), build output, and a test's own output only when it
// fails (buffered until then). Lines that are not JSON pass through.
func runFollow(r io.Reader, w io.Writer, save string) error {
	var saved io.Writer = io.Discard
	if save != "" {
		f, err := os.OpenFile(save, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		bw := bufio.NewWriter(f)
		defer bw.Flush()
		saved = bw
	}
	out := bufio.NewWriter(w)
	defer out.Flush()
	held := map[string]*strings.Builder{} // package + "\x00" + test → its output so far
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			out.Write(line)
			out.WriteByte('\n')
			out.Flush()
			continue
		}
		saved.Write(line)
		saved.Write([]byte{'\n'})
		key := e.Package + "\x00" + e.Test
		switch {
		case e.Action == "build-output":
			out.WriteString(e.Output)
		case e.Test == "":
			// go test -json prints PASS before each ok line; go test
			// without -v does not.
			if e.Action == "output" && e.Output != "PASS\n" {
				out.WriteString(e.Output)
			}
		case e.Action == "output":
			b := held[key]
			if b == nil {
				b = &strings.Builder{}
				held[key] = b
			}
			b.WriteString(e.Output)
		case e.Action == "fail":
			if b := held[key]; b != nil {
				out.WriteString(b.String())
			}
			delete(held, key)
		case e.Action == "pass" || e.Action == "skip":
			delete(held, key)
		}
		out.Flush()
	}
	return sc.Err()
}

// testResult is one test's end.
type testResult struct {
	pkg, name string
	action    string // pass, fail or skip
	elapsed   float64
}

// pkgResult is one package's run.
type pkgResult struct {
	name, file   string // a package run in several files (phases) is several runs
	action       string
	elapsed      float64 // as go test reports it
	first, last  time.Time
	run, skipped int
}

// runSummary prints the phase table, the slowest tests, each package's
// wall time and the totals. It reports false when -require-run found a
// skipped test.
func runSummary(w io.Writer, files []string, phases string, top int, requireRun string) (bool, error) {
	var req *regexp.Regexp
	if requireRun != "" {
		var err error
		if req, err = regexp.Compile(requireRun); err != nil {
			return false, fmt.Errorf("-require-run: %w", err)
		}
	}
	if phases != "" {
		if err := printPhases(w, phases); err != nil {
			return false, err
		}
	}
	var tests []testResult
	pkgs := map[string]*pkgResult{}
	for _, name := range files {
		if err := readEvents(name, &tests, pkgs); err != nil {
			return false, err
		}
	}
	// Subtests count as tests: they are what the kill matrices are made
	// of. The top list shows leaves and parents alike, as go test times
	// them.
	sort.SliceStable(tests, func(i, j int) bool { return tests[i].elapsed > tests[j].elapsed })
	fmt.Fprintf(w, "\nslowest tests:\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, t := range tests {
		if i == top {
			break
		}
		fmt.Fprintf(tw, "  %7.1fs\t%s\t%s\t%s\n", t.elapsed, t.name, shortPkg(t.pkg), t.action)
	}
	tw.Flush()

	list := make([]*pkgResult, 0, len(pkgs))
	for _, p := range pkgs {
		list = append(list, p)
	}
	sort.Slice(list, func(i, j int) bool {
		return wall(list[i]) > wall(list[j]) || wall(list[i]) == wall(list[j]) && list[i].name < list[j].name
	})
	fmt.Fprintf(w, "\npackage wall time (packages with tests):\n")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	runs := map[string]int{} // runs of each package
	for _, p := range list {
		runs[p.name]++
	}
	var run, skipped, failed int
	withTests := map[string]bool{}
	var badSkips []testResult
	for _, p := range list {
		run += p.run
		skipped += p.skipped
		if p.run+p.skipped == 0 {
			continue
		}
		withTests[p.name] = true
		label := shortPkg(p.name)
		if runs[p.name] > 1 {
			label += " (" + strings.TrimSuffix(p.file, ".json") + ")"
		}
		fmt.Fprintf(tw, "  %7.1fs\t%s\t%d run, %d skipped\t%s\n", wall(p), label, p.run, p.skipped, p.action)
	}
	tw.Flush()
	for _, t := range tests {
		if t.action == "fail" {
			failed++
		}
		if t.action == "skip" && req != nil && req.MatchString(t.pkg) {
			badSkips = append(badSkips, t)
		}
	}
	fmt.Fprintf(w, "\ntotals: %d packages (%d with tests), %d tests run (subtests included), %d skipped, %d failed\n",
		len(runs), len(withTests), run, skipped, failed)
	if req != nil {
		fmt.Fprintf(w, "skipped tests in packages matching %q: %d\n", requireRun, len(badSkips))
		for _, t := range badSkips {
			fmt.Fprintf(w, "  SKIP %s (%s)\n", t.name, t.pkg)
		}
	}
	return len(badSkips) == 0, nil
}

// wall is a package's wall time: from its first event to its last, or go
// test's own figure when that is larger.
func wall(p *pkgResult) float64 {
	d := p.last.Sub(p.first).Seconds()
	if p.elapsed > d {
		return p.elapsed
	}
	return d
}

func shortPkg(p string) string {
	return strings.TrimPrefix(p, "github.com/flightline/flightline/")
}

func readEvents(name string, tests *[]testResult, pkgs map[string]*pkgResult) error {
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil // that phase did not run
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Package == "" {
			continue
		}
		p := pkgs[name+"\x00"+e.Package]
		if p == nil {
			p = &pkgResult{name: e.Package, file: filepath.Base(name), first: e.Time}
			pkgs[name+"\x00"+e.Package] = p
		}
		if !e.Time.IsZero() {
			if p.first.IsZero() || e.Time.Before(p.first) {
				p.first = e.Time
			}
			if e.Time.After(p.last) {
				p.last = e.Time
			}
		}
		switch e.Action {
		case "pass", "fail", "skip":
		default:
			continue
		}
		if e.Test == "" {
			p.action, p.elapsed = e.Action, e.Elapsed
			continue
		}
		*tests = append(*tests, testResult{pkg: e.Package, name: e.Test, action: e.Action, elapsed: e.Elapsed})
		if e.Action == "skip" {
			p.skipped++
		} else {
			p.run++
		}
	}
	return sc.Err()
}

// printPhases prints the phase table from lines "NAME START END RC".
func printPhases(w io.Writer, name string) error {
	f, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(w, "\nphases:\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var total, first, last float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 {
			continue
		}
		start, err1 := strconv.ParseFloat(fs[1], 64)
		end, err2 := strconv.ParseFloat(fs[2], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		status := "ok"
		if fs[3] != "0" {
			status = "FAILED (exit " + fs[3] + ")"
		}
		total += end - start
		if first == 0 || start < first {
			first = start
		}
		last = max(last, end)
		fmt.Fprintf(tw, "  %s\t%7.0fs\t%s\n", fs[0], end-start, status)
	}
	// Phases may overlap (vet/build runs beside the services' start).
	fmt.Fprintf(tw, "  sum\t%7.0fs\t\n", total)
	fmt.Fprintf(tw, "  wall\t%7.0fs\tfirst start to last end\n", last-first)
	tw.Flush()
	return sc.Err()
}
