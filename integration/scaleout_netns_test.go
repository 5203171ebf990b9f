package integration

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	sinkpg "github.com/flightline/flightline/flightsink/postgres"
)

// Scale-out (issue 16): several instances of one pipeline, each a
// `flightline run` with the Kafka source and the Delta sink in process, on
// hosts of their own (network namespaces, reaching the broker through
// their uplinks), share one consumer group on a live topic of several
// partitions and write one table, each as a named sink instance
// (instance=<host>). The test kills instances (-9), adds new ones and
// removes running ones (SIGTERM: the member leaves the group) while data
// flows; every change is a rebalance. delta-rs then finds every committed
// record once and no aborted one, and the pipeline's checkpoint (merged
// over the instances) is the topic's end.
//
// TestIntegrationScaleOutPostgres runs the same pipeline into one
// PostgreSQL table (postgres://…&instance=<host>), checked with a plain
// pgx read, and adds a partition: an instance's host cut off from the
// broker and the database long enough for the group to give its
// partitions to the others, then healed; its in-flight write must be
// refused or a replay (ErrConflict from a partition another instance moved,
// see internal/sqlcheckpoint.Instances), never a duplicate.

// scaleRun is the scale-out pipeline under test.
type scaleRun struct {
	t       *testing.T
	sink    string // "delta" or "postgres"
	lab     *netLab
	bin     string
	brokers string
	pg      killDest          // postgres: the table (spec with table=) and its reader
	pgDSN   string            // postgres
	pgSink  *sinkpg.Sink      // postgres: reads the merged checkpoint
	up      map[string]string // host → its uplink's device
	cutAt   map[string]time.Time
	adm     *kadm.Client
	topic   string
	parts   int
	pl      flightsink.Pipeline
	table   string
	schema  string
	prod    *liveProducer
	procs   map[string]*proc // running instances by host
	logs    map[string]*syncBuffer
	hosts   int
}

func newScaleRun(t *testing.T, ctx context.Context, seed uint64, parts int, sink string) *scaleRun {
	brokers := Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker")
	var dsn string
	if sink == "postgres" {
		dsn = Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	} else {
		Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	}
	lab := newNetLab(t)
	adm, topic := kafkaTopic(t, ctx, brokers, "scale", int32(parts))
	schema := filepath.Join(t.TempDir(), "order.avsc")
	require.NoError(t, os.WriteFile(schema, []byte(killSchema), 0o644))
	r := &scaleRun{t: t, sink: sink, lab: lab, bin: flightlineBin(t), brokers: brokers, adm: adm, topic: topic, parts: parts,
		pl: flightsink.Pipeline{ID: topic + "-pipe"}, table: filepath.Join(t.TempDir(), "orders"), schema: schema,
		procs: map[string]*proc{}, logs: map[string]*syncBuffer{}, up: map[string]string{}, cutAt: map[string]time.Time{}}
	if sink == "postgres" {
		r.pgDSN, r.pg = dsn, postgresDestAt(t, dsn, topic)
		s, err := sinkpg.New(context.Background(), sinkpg.Config{DSN: dsn})
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		r.pgSink = s
	}
	r.prod = startLiveProducer(t, brokers, topic, seed, false)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(r.dump())
		}
	})
	return r
}

// addHost creates a new host with an uplink to the broker.
func (r *scaleRun) addHost() string {
	r.hosts++
	h := fmt.Sprintf("h%d", r.hosts)
	r.lab.host(h)
	services := strings.Split(r.brokers, ",")
	if r.sink == "postgres" {
		services = append(services, pgHostPort(r.t, r.pgDSN))
	}
	r.up[h] = r.lab.uplink(h, services...)
	return h
}

// start runs the pipeline's instance on host h (instance name h).
func (r *scaleRun) start(h string) {
	if r.logs[h] == nil {
		r.logs[h] = &syncBuffer{}
	}
	fmt.Fprintf(r.logs[h], "=== %s start at %s\n", h, time.Now().Format(time.StampMilli))
	src := fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s-g&batch_rows=200&batch_wait=100ms&session_timeout=%s&format=json&schema=%s",
		r.brokers, r.topic, r.topic, killSession, r.schema)
	sink := "delta:" + r.table + "?checkpoint_interval=10&instance=" + h
	if r.sink == "postgres" {
		sink = r.pg.spec + "&instance=" + h
	}
	r.procs[h] = r.lab.start(h, r.bin, r.logs[h], "run", "--source", src, "--sink", sink, "--stream", r.topic,
		"--pipeline", r.pl.ID, "--log-level", "info")
}

// kill kill -9s the instance on h; remove stops it with SIGTERM (it leaves
// the group) and waits for it to exit.
func (r *scaleRun) kill(h string) {
	r.procs[h].kill()
	fmt.Fprintf(r.logs[h], "=== %s killed at %s\n", h, time.Now().Format(time.StampMilli))
	delete(r.procs, h)
}

func (r *scaleRun) remove(h string) {
	p := r.procs[h]
	require.NoError(r.t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.doneOnce():
		require.NoError(r.t, err, "instance %s did not stop cleanly\n%s", h, r.dump())
	case <-time.After(time.Minute):
		r.t.Fatalf("instance %s did not stop within a minute of SIGTERM\n%s", h, r.dump())
	}
	fmt.Fprintf(r.logs[h], "=== %s removed at %s\n", h, time.Now().Format(time.StampMilli))
	delete(r.procs, h)
}

// partition cuts h off from the broker and the database (its uplink
// down); unpartition heals it.
func (r *scaleRun) partition(h string) {
	r.lab.cutUplink(r.up[h])
	r.cutAt[h] = time.Now()
	fmt.Fprintf(r.logs[h], "=== %s cut off at %s\n", h, time.Now().Format(time.StampMilli))
}

func (r *scaleRun) unpartition(h string) {
	r.lab.healUplink(r.up[h])
	fmt.Fprintf(r.logs[h], "=== %s healed at %s (cut for %v)\n", h, time.Now().Format(time.StampMilli), time.Since(r.cutAt[h]).Round(100*time.Millisecond))
}

// committed is the pipeline's checkpoint, merged over its instances, as
// the Delta log or the PostgreSQL checkpoint table holds it (nil before
// the first commit).
func (r *scaleRun) committed(ctx context.Context) checkpoint.Positions {
	var cp []byte
	var err error
	if r.sink == "postgres" {
		cp, err = r.pgSink.Checkpoint(ctx, r.pl)
	} else {
		var s *sinkdelta.Sink
		if s, err = sinkdelta.New(ctx, sinkdelta.Config{URI: r.table}); err != nil {
			return nil
		}
		cp, err = s.Checkpoint(ctx, r.pl)
	}
	if err != nil || cp == nil {
		return nil
	}
	p, err := checkpoint.Parse(cp)
	if err != nil {
		return nil
	}
	return p
}

// moved waits until every partition is committed past end (the topic's
// end at a change), and returns how long that took from since.
func (r *scaleRun) moved(ctx context.Context, what string, end checkpoint.Positions, since time.Time) time.Duration {
	r.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		c := r.committed(ctx)
		ok := c != nil && len(c) == r.parts
		for k, v := range end {
			ok = ok && c[k] > v
		}
		if ok {
			return time.Since(since)
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: not every partition moved past %s within 3 minutes; committed %s\n%s", what, end.Encode(), c.Encode(), r.dump())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// instanceRows is the PostgreSQL checkpoint of each instance of the
// pipeline, read with plain SQL.
func (r *scaleRun) instanceRows(ctx context.Context) map[string]checkpoint.Positions {
	r.t.Helper()
	conn, err := pgx.Connect(ctx, r.pgDSN)
	require.NoError(r.t, err)
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT instance, checkpoint FROM `+sinkpg.DefaultCheckpointTable+` WHERE pipeline_id = $1 AND target = '' AND checkpoint IS NOT NULL`, r.pl.ID)
	require.NoError(r.t, err)
	out := map[string]checkpoint.Positions{}
	for rows.Next() {
		var inst string
		var cp []byte
		require.NoError(r.t, rows.Scan(&inst, &cp))
		p, err := checkpoint.Parse(cp)
		require.NoError(r.t, err, "instance %s: checkpoint %q", inst, cp)
		out[inst] = p
	}
	require.NoError(r.t, rows.Err())
	return out
}

// mark is where instance h stands before a change, for wrote: the Delta
// log's length, or h's PostgreSQL checkpoint.
func (r *scaleRun) mark(h string) any {
	if r.sink == "postgres" {
		return string(r.instanceRows(context.Background())[h].Encode())
	}
	return int64(len(readDeltaLog(r.t, r.table)))
}

// wrote waits until instance h has made a data commit since mark (a Delta
// commit at that version or later, a change of its PostgreSQL checkpoint),
// and returns how long that took from since.
func (r *scaleRun) wrote(h string, mark any, since time.Time) time.Duration {
	r.t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if r.sink == "postgres" {
			if cp, ok := r.instanceRows(context.Background())[h]; ok && string(cp.Encode()) != mark.(string) {
				return time.Since(since)
			}
			continue
		}
		for _, c := range readDeltaLog(r.t, r.table) {
			if c.version >= mark.(int64) && c.instance == h && c.part >= 0 {
				return time.Since(since)
			}
		}
	}
	r.t.Fatalf("instance %s made no data commit within 3 minutes\n%s", h, r.dump())
	return 0
}

// requireAlive fails if a running instance exited on its own.
func (r *scaleRun) requireAlive() {
	r.t.Helper()
	for h, p := range r.procs {
		if done, err := p.exited(); done {
			r.t.Fatalf("instance %s exited on its own (%v)\n%s", h, err, r.dump())
		}
	}
}

// warningsSince returns the WARN and ERROR lines h logged after its last
// "=== … marker" line, at most ten.
func (r *scaleRun) warningsSince(h, marker string) string {
	log := r.logs[h].String()
	if i := strings.LastIndex(log, " "+marker+" at "); i >= 0 {
		log = log[i:]
	}
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if (strings.Contains(l, "WARN") || strings.Contains(l, "ERROR")) && len(out) < 10 {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func (r *scaleRun) dump() string {
	var b strings.Builder
	for _, h := range slices.Sorted(maps.Keys(r.logs)) {
		s := r.logs[h].String()
		if len(s) > 5000 {
			s = "…" + s[len(s)-5000:]
		}
		fmt.Fprintf(&b, "----- %s log (tail) -----\n%s\n", h, s)
	}
	return b.String()
}

// TestIntegrationScaleOut runs three instances of one Kafka → Delta
// pipeline on three hosts in one consumer group on a topic of 6 partitions,
// then, while data flows, changes the membership: an instance killed -9
// (its partitions move when its session expires), a new instance added, a
// running one removed (SIGTERM), the killed one restarted. After each
// change it waits until every partition has committed records produced
// after the change and reports that time. make test runs those four
// changes; FLIGHTLINE_CHAOS=1 runs 12 random changes among them and
// partitions (an instance cut off from the broker until its partitions
// moved, then healed; the table is on local disk). At the end delta-rs
// checks every record.
func TestIntegrationScaleOut(t *testing.T) {
	runScaleOut(t, "delta", []string{"kill -9", "add", "remove", "restart"}, []string{"kill -9", "add", "remove", "restart", "partition"})
}

// TestIntegrationScaleOutPostgres is TestIntegrationScaleOut into one
// PostgreSQL table, with partitions: make test runs a partition and a kill
// -9; FLIGHTLINE_CHAOS=1 runs 12 random changes among kill -9, add,
// remove, restart and partition.
func TestIntegrationScaleOutPostgres(t *testing.T) {
	runScaleOut(t, "postgres", []string{"partition", "kill -9"}, []string{"kill -9", "add", "remove", "restart", "partition"})
}

// runScaleOut runs the scale-out test into sink with changes, or under
// FLIGHTLINE_CHAOS=1 12 changes drawn from kinds.
func runScaleOut(t *testing.T, sink string, changes, kinds []string) {
	if testing.Short() {
		t.Skip("scale-out test: skipped in -short mode")
	}
	seed := killSeed(t)
	t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays it)", seed, seed)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	r := newScaleRun(t, ctx, seed, 6, sink)
	var live, dead []string
	for range 3 {
		h := r.addHost()
		r.start(h)
		live = append(live, h)
	}
	start := time.Now()
	r.moved(ctx, "start", endPositions(t, ctx, r.adm, r.topic), start)
	rng := rand.New(rand.NewPCG(seed, 3))
	if chaosMode() {
		changes = nil
		for range 12 {
			changes = append(changes, kinds[rng.IntN(len(kinds))])
		}
	}
	refused := 0 // writes refused for a partition moved by another instance
	rows := map[string]*faultRow{}
	var order []string
	for _, c := range changes {
		// Keep between two and four instances running.
		switch {
		case (c == "kill -9" || c == "remove" || c == "partition") && len(live) <= 2:
			c = "add"
		case c == "restart" && len(dead) == 0:
			c = "kill -9"
		case (c == "add" || c == "restart") && len(live) >= 4:
			c = "remove"
		}
		at := time.Now()
		var who string
		var mark any // where the instance that must write again stood
		switch c {
		case "kill -9", "remove":
			i := rng.IntN(len(live))
			who = live[i]
			live = slices.Delete(live, i, i+1)
			if c == "kill -9" {
				r.kill(who)
				dead = append(dead, who)
			} else {
				r.remove(who)
			}
		case "add":
			who = r.addHost()
			mark = r.mark(who)
			r.start(who)
			live = append(live, who)
		case "restart":
			i := rng.IntN(len(dead))
			who = dead[i]
			dead = slices.Delete(dead, i, i+1)
			mark = r.mark(who)
			r.start(who)
			live = append(live, who)
		case "partition":
			// Cut an instance off until its session has expired and the
			// others have committed every partition past the cut (its
			// own included), then heal it: a zombie nobody fenced (its
			// instance was not claimed), with a write in flight if it was
			// writing when cut. It must then rejoin and write again.
			who = live[rng.IntN(len(live))]
			r.partition(who)
			took := r.moved(ctx, "partition "+who, endPositions(t, ctx, r.adm, r.topic), at)
			t.Logf("partition %s: the others committed every partition past the cut after %v", who, took.Round(100*time.Millisecond))
			mark = r.mark(who)
			r.unpartition(who)
			at = time.Now()
		}
		end := endPositions(t, ctx, r.adm, r.topic)
		took := r.moved(ctx, c+" "+who, end, at)
		if mark != nil {
			// The newcomer (or the healed instance) took partitions: its
			// first data commit.
			took = max(took, r.wrote(who, mark, at))
		}
		r.requireAlive()
		if c == "partition" {
			t.Logf("partition %s: what it logged after the heal (warnings):\n%s", who, r.warningsSince(who, "healed"))
		}
		t.Logf("%s %s: every partition committed past the change after %v; running %v", c, who, took.Round(100*time.Millisecond), live)
		if rows[c] == nil {
			rows[c] = &faultRow{sink: r.sink, fault: "scale " + c}
			order = append(order, c)
		}
		rows[c].faults++
		rows[c].stall = max(rows[c].stall, took)
		rows[c].recovery = max(rows[c].recovery, took)
	}
	// The end: every record of the topic, and exactly the topic's end.
	r.prod.Stop(t, r.brokers, r.topic, r.parts)
	want := endPositions(t, ctx, r.adm, r.topic)
	var final checkpoint.Positions
	require.Eventually(t, func() bool {
		final = r.committed(ctx)
		return final != nil && checkpoint.Covers(final, want)
	}, 3*time.Minute, 300*time.Millisecond, "the instances did not reach the topic's end %s\n%s", want.Encode(), r.dump())
	require.True(t, maps.Equal(want, final), "the final checkpoint %s is not the topic's end %s", final.Encode(), want.Encode())
	for _, h := range live {
		r.kill(h)
	}
	owners := map[string]map[string]bool{} // partition → the instances that wrote it
	var keys []string
	var err error
	if r.sink == "postgres" {
		for inst, cp := range r.instanceRows(ctx) {
			for k := range cp {
				if owners[k] == nil {
					owners[k] = map[string]bool{}
				}
				owners[k][inst] = true
			}
		}
		keys, err = r.pg.read(ctx) // plain pgx
	} else {
		for _, c := range readDeltaLog(t, r.table) {
			if c.part >= 0 {
				k := fmt.Sprint(c.part)
				if owners[k] == nil {
					owners[k] = map[string]bool{}
				}
				owners[k][c.instance] = true
			}
		}
		keys, err = pythonKeys(t, "delta", r.table, nil)(ctx)
	}
	require.NoError(t, err)
	for _, b := range r.logs { // the error of the refusal, as the coordinator logs it
		refused += strings.Count(b.String(), "by another instance since instance")
	}
	t.Logf("%d writes refused for a partition another instance had moved (zombies and hand-over races)", refused)
	moved := 0
	for _, o := range owners {
		if len(o) > 1 {
			moved++
		}
	}
	t.Logf("%d of %d partitions were written by more than one instance", moved, r.parts)
	require.Positive(t, moved, "no partition changed instance: no rebalance was tested")
	res := checkExactlyOnce(t, r.prod, keys, nil, nil, r.dump)
	var table []faultRow
	for _, c := range order {
		row := *rows[c]
		row.checked, row.dups, row.losses = res.checked, res.dups, res.losses
		table = append(table, row)
	}
	logFaultTable(t, table)
	for _, row := range table {
		if row.recovery > scaleChangeBound {
			t.Errorf("%s: %v until every partition committed again (bound %v)", row.fault, row.recovery.Round(100*time.Millisecond), scaleChangeBound)
		}
	}
}

// scaleChangeBound bounds the time from a membership change to every
// partition committing again: a dead member's session (killSession), a
// process start under -race on a loaded machine, the group's rounds, a
// revocation waiting for the old owner to re-open its sink, the new
// owner's first commit — twice the kill test's bound. A revocation that
// ran into RevokeTimeout (20 s) would exceed it.
const scaleChangeBound = 2 * killRecoveryBound
