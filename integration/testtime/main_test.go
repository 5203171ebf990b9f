package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A run of two packages: a passing and a skipped test in one, a failing
// subtest in the other, and a build error.
const events = `{"Time":"2026-12-04T10:00:00Z","Action":"start","Package":"example.com/a"}
{"Time":"2026-12-04T10:00:00Z","Action":"run","Package":"example.com/a","Test":"TestOK"}
{"Time":"2026-12-04T10:00:01Z","Action":"output","Package":"example.com/a","Test":"TestOK","Output":"ok output\n"}
{"Time":"2026-12-04T10:00:02Z","Action":"pass","Package":"example.com/a","Test":"TestOK","Elapsed":2}
{"Time":"2026-12-04T10:00:02Z","Action":"output","Package":"example.com/a","Test":"TestSkip","Output":"needs a service\n"}
{"Time":"2026-12-04T10:00:02Z","Action":"skip","Package":"example.com/a","Test":"TestSkip","Elapsed":0}
{"Time":"2026-12-04T10:00:03Z","Action":"output","Package":"example.com/a","Output":"PASS\n"}
{"Time":"2026-12-04T10:00:03Z","Action":"output","Package":"example.com/a","Output":"ok  \texample.com/a\t3.0s\n"}
{"Time":"2026-12-04T10:00:03Z","Action":"pass","Package":"example.com/a","Elapsed":3}
{"Time":"2026-12-04T10:00:00Z","Action":"start","Package":"example.com/integration"}
{"Time":"2026-12-04T10:00:01Z","Action":"output","Package":"example.com/integration","Test":"TestKill","Output":"=== RUN   TestKill\n"}
{"Time":"2026-12-04T10:00:01Z","Action":"output","Package":"example.com/integration","Test":"TestKill/delta","Output":"lost record 7\n"}
{"Time":"2026-12-04T10:00:09Z","Action":"fail","Package":"example.com/integration","Test":"TestKill/delta","Elapsed":8}
{"Time":"2026-12-04T10:00:09Z","Action":"output","Package":"example.com/integration","Test":"TestSkipped","Output":"no broker\n"}
{"Time":"2026-12-04T10:00:09Z","Action":"skip","Package":"example.com/integration","Test":"TestSkipped","Elapsed":0}
{"Time":"2026-12-04T10:00:10Z","Action":"fail","Package":"example.com/integration","Test":"TestKill","Elapsed":9}
{"Time":"2026-12-04T10:00:10Z","Action":"output","Package":"example.com/integration","Output":"FAIL\texample.com/integration\t10.0s\n"}
{"Time":"2026-12-04T10:00:10Z","Action":"fail","Package":"example.com/integration","Elapsed":10}
{"ImportPath":"example.com/broken","Action":"build-output","Output":"broken.go:3:1: syntax error\n"}
not json: passes through
`

func TestFollowPrintsWhatPlainGoTestPrints(t *testing.T) {
	save := filepath.Join(t.TempDir(), "run.json")
	var out strings.Builder
	require.NoError(t, runFollow(strings.NewReader(events), &out, save))
	require.Equal(t, "ok  \texample.com/a\t3.0s\n"+
		"lost record 7\n"+
		"=== RUN   TestKill\n"+
		"FAIL\texample.com/integration\t10.0s\n"+
		"broken.go:3:1: syntax error\n"+
		"not json: passes through\n", out.String())
	b, err := os.ReadFile(save)
	require.NoError(t, err)
	require.Equal(t, strings.Count(events, "\n")-1, strings.Count(string(b), "\n"), "every JSON event is saved, nothing else")
}

func TestSummary(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run.json")
	require.NoError(t, os.WriteFile(run, []byte(events), 0o644))
	phases := filepath.Join(dir, "phases")
	require.NoError(t, os.WriteFile(phases, []byte("services-up 100 130.4 0\ngo-test 130.4 730.4 1\n"), 0o644))

	var out strings.Builder
	ok, err := runSummary(&out, []string{run, filepath.Join(dir, "absent.json")}, phases, 2, "")
	require.NoError(t, err)
	require.True(t, ok)
	s := out.String()
	require.Regexp(t, `services-up +30s +ok`, s)
	require.Regexp(t, `go-test +600s +FAILED \(exit 1\)`, s)
	require.Regexp(t, `sum +630s`, s)
	require.Regexp(t, `wall +630s`, s)
	require.Regexp(t, `(?s)slowest tests:\n +9.0s +TestKill +example.com/integration +fail\n +8.0s +TestKill/delta`, s)
	require.NotContains(t, s, "TestOK", "-top 2")
	require.Regexp(t, `10.0s +example.com/integration +2 run, 1 skipped +fail`, s)
	require.Regexp(t, `3.0s +example.com/a +1 run, 1 skipped +pass`, s)
	require.Contains(t, s, "totals: 2 packages (2 with tests), 3 tests run (subtests included), 2 skipped, 2 failed")

	// A package run in two phases is two runs, each with its own wall time.
	again := filepath.Join(dir, "bigquery.json")
	require.NoError(t, os.WriteFile(again, []byte(strings.ReplaceAll(events, "10:00", "11:00")), 0o644))
	out.Reset()
	_, err = runSummary(&out, []string{run, again}, "", 2, "")
	require.NoError(t, err)
	require.Regexp(t, `10.0s +example.com/integration \(run\) +2 run, 1 skipped +fail`, out.String())
	require.Regexp(t, `10.0s +example.com/integration \(bigquery\) +2 run, 1 skipped +fail`, out.String())
	require.Contains(t, out.String(), "totals: 2 packages (2 with tests), 6 tests run")

	out.Reset()
	ok, err = runSummary(&out, []string{run}, "", 25, "/integration$")
	require.NoError(t, err)
	require.False(t, ok, "a skipped integration test fails the summary")
	require.Contains(t, out.String(), "SKIP TestSkipped (example.com/integration)")
	require.NotContains(t, out.String(), "SKIP TestSkip (")
}
