package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Service faults while data flows (issue 16): the split pipeline of the
// kill tests (serve-source on a live topic, serve-sink, run) writes to a
// PostgreSQL cluster of its own, which the test restarts while rows flow:
// a fast shutdown (pg_ctl stop -m fast) and a kill -9 of the postmaster,
// each followed by a start. After every fault the test measures the
// recovery (the server's start to the first commit of a record produced
// after the fault); at the end the independent reader checks every record
// (exactly once, nothing lost, no aborted record). make test injects each
// fault once; FLIGHTLINE_CHAOS=1 five times each.

// pgCluster is a throwaway PostgreSQL cluster the test may stop and kill.
type pgCluster struct {
	t         *testing.T
	bin, data string
	port      int
	dsn       string
}

// startPGCluster initdbs and starts a cluster in a temporary directory,
// with the binaries of the Debian package services.sh installs.
func startPGCluster(t *testing.T) *pgCluster {
	Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL") // the package is installed
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 || os.Getuid() != 0 {
		if os.Getenv("FLIGHTLINE_REQUIRE_SERVICES") == "1" {
			t.Fatalf("PostgreSQL fault test needs root and /usr/lib/postgresql/*/bin (found %v, uid %d)", bins, os.Getuid())
		}
		t.Skip("PostgreSQL fault test needs root and the server binaries under /usr/lib/postgresql")
	}
	dir, err := os.MkdirTemp("", "flightline-pgfault-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	addr := freePort(t)
	port, err := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	require.NoError(t, err)
	c := &pgCluster{t: t, bin: filepath.Dir(bins[len(bins)-1]), data: filepath.Join(dir, "data"), port: port,
		dsn: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)}
	require.NoError(t, exec.Command("chown", "postgres:", dir).Run())
	out, err := c.pg("initdb", "-D", c.data, "-A", "trust", "-U", "postgres", "--no-sync").CombinedOutput()
	require.NoError(t, err, "initdb: %s", out)
	c.start()
	t.Cleanup(func() { c.pg("pg_ctl", "-D", c.data, "stop", "-m", "immediate").Run() })
	return c
}

func (c *pgCluster) pg(tool string, args ...string) *exec.Cmd {
	q := []string{filepath.Join(c.bin, tool)}
	for _, a := range args {
		q = append(q, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	return exec.Command("su", "postgres", "-s", "/bin/sh", "-c", strings.Join(q, " "))
}

// start starts the cluster, retrying while a killed postmaster's backends
// still hold its shared memory.
func (c *pgCluster) start() {
	c.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100",
		c.port, filepath.Dir(c.data))
	var out []byte
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, err = c.pg("pg_ctl", "-D", c.data, "-l", c.data+".log", "-w", "-t", "60", "-o", opts, "start").CombinedOutput()
		if err == nil {
			return
		}
	}
	log, _ := os.ReadFile(c.data + ".log")
	c.t.Fatalf("pg_ctl start: %v: %s\n%s", err, out, log)
}

// stopFast is pg_ctl stop -m fast.
func (c *pgCluster) stopFast() {
	out, err := c.pg("pg_ctl", "-D", c.data, "stop", "-m", "fast", "-w").CombinedOutput()
	require.NoError(c.t, err, "pg_ctl stop: %s", out)
}

// kill9 kill -9s the postmaster; its backends exit once they notice.
func (c *pgCluster) kill9() {
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	require.NoError(c.t, err)
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(c.t, err)
	require.NoError(c.t, syscall.Kill(pid, syscall.SIGKILL))
}

// faultRow is one line of the service-fault summary.
type faultRow struct {
	sink, fault     string
	faults, checked int
	dups, losses    int
	stall, recovery time.Duration
}

// logFaultTable logs rows as a table, and appends them to the combined
// chaos report (see appendChaosReport).
func logFaultTable(t *testing.T, rows []faultRow) {
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %-16s %6s %8s %5s %6s %14s %14s\n", "sink", "fault", "faults", "checked", "dups", "losses",
		"longest stall", "max recovery")
	for _, r := range rows {
		fmt.Fprintf(&b, "%-10s %-16s %6d %8d %5d %6d %14v %14v\n", r.sink, r.fault, r.faults, r.checked, r.dups, r.losses,
			r.stall.Round(100*time.Millisecond), r.recovery.Round(100*time.Millisecond))
	}
	t.Logf("service faults:\n%s", b.String())
	appendChaosReport(t, rows)
}

// TestIntegrationPostgresRestart restarts the sink's PostgreSQL server
// while the split pipeline writes to it: see the top of this file.
func TestIntegrationPostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test: skipped in -short mode")
	}
	pg := startPGCluster(t)
	each := 1
	if chaosMode() {
		each = 5
	}
	seed := killSeed(t)
	t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays the producer)", seed, seed)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	s := killSink{name: "pgfault", format: "json", dest: func(t *testing.T, ctx context.Context, name string) killDest {
		return postgresDestAt(t, pg.dsn, name)
	}}
	r := newKillRun(t, ctx, s, seed, killSession.String(), false)
	rows := map[string]*faultRow{}
	var order []string
	for i := range 2 * each {
		fault := []string{"fast shutdown", "kill -9"}[i%2]
		r.waitMoving(ctx, 2*time.Minute)
		w := r.watchProgress(ctx)
		killed := time.Now()
		if i%2 == 0 {
			pg.stopFast()
		} else {
			pg.kill9()
		}
		end := endPositions(t, ctx, r.adm, r.topic)
		time.Sleep(2 * time.Second) // down while rows keep arriving
		pg.start()
		up := time.Now()
		at, ok := w.next(up, end, 2*time.Minute)
		require.True(t, ok, "no commit within 2 minutes of PostgreSQL's restart after %s\n%s", fault, r.dump())
		w.stop(nil)
		rec := at.Sub(up)
		t.Logf("%s: PostgreSQL down %v; committed again %v after it was back", fault,
			up.Sub(killed).Round(100*time.Millisecond), rec.Round(100*time.Millisecond))
		row := rows[fault]
		if row == nil {
			row = &faultRow{sink: "postgres", fault: fault}
			rows[fault] = row
			order = append(order, fault)
		}
		row.faults++
		row.recovery = max(row.recovery, rec)
		row.stall = max(row.stall, at.Sub(killed))
		r.requireAlive()
	}
	res := r.finish(ctx, 4*time.Minute)
	var table []faultRow
	for _, f := range order {
		row := *rows[f]
		row.checked, row.dups, row.losses = res.checked, res.dups, res.losses
		table = append(table, row)
	}
	logFaultTable(t, table)
	for _, row := range table {
		require.LessOrEqual(t, row.recovery, killRecoveryBound, "%s: PostgreSQL was back, the pipeline was not", row.fault)
	}
}
