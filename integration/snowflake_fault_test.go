package integration

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/testkit/snowtest"
)

// The Snowflake emulator killed and restarted while data flows (issue 16).
// The shared fakesnow server keeps its databases in memory and other tests
// use it, so the test starts one of its own (the same wrapper,
// integration/services/fakesnow_server.py, with --db-path: DuckDB files
// that survive the process) on a free port, and kill -9s and restarts it
// under the split pipeline. What a restart loses is what Snowflake loses
// when a session dies: open transactions (rolled back) and sessions (the
// driver logs in again).

// ownFakesnow is a fakesnow server of the test's own that it may kill.
type ownFakesnow struct {
	t          *testing.T
	py, dbPath string
	port       int
	log        *syncBuffer
	p          *proc
}

func startOwnFakesnow(t *testing.T) *ownFakesnow {
	py := snowtest.Python(t)
	addr := freePort(t)
	port, err := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	require.NoError(t, err)
	f := &ownFakesnow{t: t, py: py, dbPath: t.TempDir(), port: port, log: &syncBuffer{}}
	f.start()
	return f
}

// start starts the server and waits until it accepts connections.
func (f *ownFakesnow) start() time.Duration {
	f.t.Helper()
	t0 := time.Now()
	script, err := filepath.Abs("services/fakesnow_server.py")
	require.NoError(f.t, err)
	f.p = startLogged(f.t, f.py, f.log, script, "-p", strconv.Itoa(f.port), "--host", "127.0.0.1",
		"--idle", "20", "--db-path", f.dbPath)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(f.port), time.Second)
		if err == nil {
			c.Close()
			return time.Since(t0)
		}
		if done, _ := f.p.exited(); done || time.Now().After(deadline) {
			f.t.Fatalf("fakesnow did not start: %v\n%s", err, f.log.String())
		}
	}
}

// TestIntegrationSnowflakeRestart kill -9s the Snowflake emulator under
// the split pipeline (Kafka → Snowflake) while rows flow and restarts it,
// at once ("quick") or after 5 s ("slow"); measures the stall and the
// recovery (the server accepting connections again to the next commit of
// a record produced after the kill) and checks record by record with
// snowflake-connector-python. In make test one of each; three of each
// under FLIGHTLINE_CHAOS=1.
func TestIntegrationSnowflakeRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test: skipped in -short mode")
	}
	Need(t, "FLIGHTLINE_SNOWFLAKE_HOST", "Snowflake emulator (fakesnow)") // installed
	f := startOwnFakesnow(t)
	// snowflakeKillDest and snowtest reach the emulator through these.
	t.Setenv("FLIGHTLINE_SNOWFLAKE_HOST", "127.0.0.1")
	t.Setenv("FLIGHTLINE_SNOWFLAKE_PORT", strconv.Itoa(f.port))
	each := 1
	if chaosMode() {
		each = 3
	}
	seed := killSeed(t)
	t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays the producer)", seed, seed)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := killSink{name: "sfrestart", format: "json", dest: snowflakeKillDest}
	r := newKillRun(t, ctx, s, seed, killSession.String(), false)
	kinds := []string{"kill -9 quick", "kill -9 slow"}
	rows := map[string]*faultRow{}
	for i := range len(kinds) * each {
		fault := kinds[i%len(kinds)]
		r.waitMoving(ctx, 2*time.Minute)
		w := r.watchProgress(ctx)
		end := endPositions(t, ctx, r.adm, r.topic)
		killed := time.Now()
		f.p.kill()
		if strings.HasSuffix(fault, "slow") {
			time.Sleep(5 * time.Second)
		}
		took := f.start()
		up := time.Now()
		at, ok := w.next(up, end, 2*time.Minute)
		require.True(t, ok, "no commit within 2 minutes of the emulator's restart after %s\n%s\n----- fakesnow -----\n%s",
			fault, r.dump(), logTail(f.log.String(), 4000))
		w.stop(nil)
		rec := at.Sub(up)
		t.Logf("fakesnow %s: down %v (start %v); committed again %v after it was back", fault,
			up.Sub(killed).Round(100*time.Millisecond), took.Round(100*time.Millisecond), rec.Round(100*time.Millisecond))
		row := rows[fault]
		if row == nil {
			row = &faultRow{sink: "snowflake", fault: "emulator " + fault}
			rows[fault] = row
		}
		row.faults++
		row.recovery = max(row.recovery, rec)
		row.stall = max(row.stall, at.Sub(killed))
		r.requireAlive()
	}
	res := r.finish(ctx, 4*time.Minute)
	var table []faultRow
	for _, k := range kinds {
		row := *rows[k]
		row.checked, row.dups, row.losses = res.checked, res.dups, res.losses
		table = append(table, row)
	}
	logFaultTable(t, table)
	for _, row := range table {
		require.LessOrEqual(t, row.recovery, serviceRecoveryBound, "%s: the emulator was back, the pipeline was not", row.fault)
	}
}
