package integration

import (
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/flightline/flightline/integration/chaossummary/report"
)

// The combined chaos report: when FLIGHTLINE_CHAOS_REPORT names a file,
// every fault and kill test appends its summary rows to it as JSON lines
// (report.Row), and make test / make chaos print one table from it at the
// end (integration/chaossummary).

var chaosReportMu sync.Mutex

// notMeasured as a faultRow's recovery: no fault of the kind had its
// recovery measured (the report says "-").
const notMeasured = -time.Millisecond

// appendChaosReport appends rows to the file named by
// FLIGHTLINE_CHAOS_REPORT, if set; the test's outcome so far is recorded
// with them (a row written from a Cleanup after a failure says FAIL).
func appendChaosReport(t *testing.T, rows []faultRow) {
	path := os.Getenv("FLIGHTLINE_CHAOS_REPORT")
	if path == "" || len(rows) == 0 {
		return
	}
	var b []byte
	for _, r := range rows {
		line, err := json.Marshal(report.Row{Test: t.Name(), Sink: r.sink, Fault: r.fault, Faults: r.faults,
			Checked: r.checked, Dups: r.dups, Losses: r.losses, StallMs: r.stall.Milliseconds(),
			RecoveryMs: r.recovery.Milliseconds(), Failed: t.Failed()})
		if err != nil {
			t.Errorf("chaos report: %v", err)
			return
		}
		b = append(append(b, line...), '\n')
	}
	chaosReportMu.Lock()
	defer chaosReportMu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Errorf("chaos report: %v", err)
		return
	}
	defer f.Close()
	// One write with O_APPEND: lines of concurrent test binaries do not
	// interleave.
	if _, err := f.Write(b); err != nil {
		t.Errorf("chaos report: %v", err)
	}
}
