// Command chaossummary prints the combined chaos report: one table of the
// rows the fault and kill tests appended to the file named on the command
// line (FLIGHTLINE_CHAOS_REPORT). make test and make chaos run it at the
// end. A missing file prints a note, not an error: no fault test ran.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/flightline/flightline/integration/chaossummary/report"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: chaossummary REPORT.jsonl")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Println("chaos summary: no fault or kill test wrote a row")
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaossummary:", err)
		os.Exit(1)
	}
	defer f.Close()
	fmt.Println("chaos summary (" + os.Args[1] + "):")
	if _, err := report.Summarize(f, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "chaossummary:", err)
		os.Exit(1)
	}
}
