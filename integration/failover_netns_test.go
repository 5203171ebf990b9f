package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestIntegrationChainFailover runs docs/chaining.md's "B lost for good"
// recipe as written: the generator served on A, a coordinator on B, the
// Delta sink served on C; B's link is cut, the same `run` is started on D
// 0.5 s later, and B's link comes back after the outage. Whatever the
// outage's length, the coordinator started later (D) must keep running
// and finish the stream, B's must stop with the error that says it was
// replaced, and delta-rs must find every row exactly once.
//
// Before the fix (issue 41), B's `run`, whose streams broke during cuts
// of 5 s or more, retried, claimed the pipeline anew and fenced D.
// make test runs the 2 s and 8 s outages (about a minute); FLIGHTLINE_CHAOS=1
// (make chaos) all five.
func TestIntegrationChainFailover(t *testing.T) {
	Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	outages := []time.Duration{2 * time.Second, 8 * time.Second}
	if chaosMode() {
		outages = []time.Duration{2 * time.Second, 5 * time.Second, 8 * time.Second, 20 * time.Second, 45 * time.Second}
	}
	for _, o := range outages {
		t.Run(fmt.Sprintf("outage=%v", o), func(t *testing.T) { testFailover(t, o) })
	}
}

func testFailover(t *testing.T, outage time.Duration) {
	lab := newNetLab(t)
	a, b, c, d := lab.host("a"), lab.host("b"), lab.host("c"), lab.host("d")
	keys := newPKI(t, []string{a, b, c, d})
	bin := flightlineBin(t)
	table := filepath.Join(t.TempDir(), "orders")
	// 5,000 rows a second: the stream must outlast B's return (the cut
	// starts about a second in; B retries at most 5 s after the heal and
	// stopped within 2 s in every run so far).
	const batch, perSecond = 500, 5000
	rows := int64(perSecond) * int64((outage + 15*time.Second).Seconds())
	logs := map[string]*syncBuffer{}
	logOf := func(name string) *syncBuffer {
		if logs[name] == nil {
			logs[name] = &syncBuffer{}
		}
		return logs[name]
	}
	defer func() {
		if t.Failed() {
			for name, l := range logs {
				t.Logf("---- %s ----\n%s", name, l)
			}
		}
	}()

	lab.start("a", bin, logOf("a/source"), append([]string{"serve-source", "--listen", a + ":7401",
		"--source", fmt.Sprintf("generator:?rows=%d&batch_rows=%d&interval=100ms", rows, batch)}, keys.server("source")...)...)
	lab.start("c", bin, logOf("c/sink"), append([]string{"serve-sink", "--listen", c + ":7402", "--sink", "delta:" + table},
		keys.server("sink")...)...)
	coordinatorOn := func(host string) *proc {
		args := []string{"run", "--stream", "orders", "--pipeline", "failover",
			"--source", "grpc+tls://" + a + ":7401", "--sink", "grpc+tls://" + c + ":7402"}
		for _, role := range []string{"source", "sink"} {
			args = append(args, keys.client(role)...)
		}
		return lab.start(host, bin, logOf(host+"/run"), args...)
	}

	br := coordinatorOn("b")
	require.Eventually(t, func() bool { return deltaCommits(table) >= 5 }, 2*time.Minute, 50*time.Millisecond, "B commits")

	lab.cut("b")
	cutAt := time.Now()
	time.Sleep(500 * time.Millisecond)
	dr := coordinatorOn("d")
	time.Sleep(time.Until(cutAt.Add(outage)))
	lab.heal("b")
	healed := time.Now()

	select {
	case err := <-br.doneOnce():
		require.Error(t, err, "B's coordinator must stop: a newer one claimed the pipeline")
	case err := <-dr.doneOnce():
		t.Fatalf("D's coordinator ended (%v) while B's still runs: the replaced coordinator took the pipeline back", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("B's replaced coordinator did not stop")
	}
	t.Logf("B stopped %v after its link came back", time.Since(healed).Round(100*time.Millisecond))
	blog := logOf("b/run").String()
	require.Contains(t, blog, "claimed by a newer coordinator", "B says why it stopped")
	for _, line := range strings.Split(blog, "\n") {
		if strings.Contains(line, "newer coordinator") {
			t.Logf("B: %s", line)
			break
		}
	}
	select {
	case err := <-dr.doneOnce():
		require.NoError(t, err, "D's coordinator runs to the end of the stream")
	case <-time.After(3 * time.Minute):
		t.Fatal("D's coordinator did not finish")
	}

	got := checkWithDeltaRs(t, table, nil, "failover")
	require.Equal(t, rows, got.Rows)
	require.Equal(t, got.Rows, got.Distinct, "every row exactly once")
	require.Equal(t, fmt.Sprintf(`{"positions":{"orders/0":%d}}`, rows), got.LastCheckpoint)
}
