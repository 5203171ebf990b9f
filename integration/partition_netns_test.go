package integration

import (
	"context"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/flightline/flightline/checkpoint"
)

// Network partitions between the processes of the split pipeline (issue
// 16). serve-source, serve-sink and run each get a network namespace of
// their own ("host"), joined by a bridge (netLab, as in the three-host
// chain test): the coordinator reaches the source and the sink over it.
// The Kafka broker and PostgreSQL stay in the test's namespace on
// 127.0.0.1; each host reaches them through an uplink of its own (a veth
// pair to the test's namespace) and two forwarders: one listening inside
// the host on 127.0.0.1 at the service's own port (so the broker's
// advertised 127.0.0.1:PORT and the DSN work unchanged there) and dialling,
// from inside the host, the test's end of the uplink; one listening there
// and dialling the service. Taking a bridge port down cuts the coordinator
// from the source or the sink; taking an uplink down cuts the sink from its
// database or the source from the broker — real links, real TCP. One
// difference from a real partition: a connection opened to the broker or
// the database during an uplink's cut is accepted by the host's forwarder
// (on loopback) and closed when its dial across the link gives up (5 s),
// where a real partition would leave the SYN unanswered; connections open
// across the cut behave as they would on a cut cable.

// inNetns runs fn on an OS thread that has joined the network namespace ns
// (a name under /var/run/netns). Sockets created by fn stay in ns for
// their whole life, whichever thread uses them later; the thread itself is
// never given back to the Go scheduler (it exits with its goroutine).
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		f, err := os.Open(filepath.Join("/var/run/netns", ns))
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// forwarder copies the connections accepted on its listener to
// connections made by dial, both ways, until closed.
type forwarder struct {
	l     net.Listener
	dial  func() (net.Conn, error)
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	done  bool
}

// forward starts a forwarder on l; the test's cleanup closes it and every
// connection it holds.
func forward(t *testing.T, l net.Listener, dial func() (net.Conn, error)) {
	f := &forwarder{l: l, dial: dial, conns: map[net.Conn]struct{}{}}
	go f.serve()
	t.Cleanup(f.close)
}

func (f *forwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *forwarder) serve() {
	for {
		in, err := f.l.Accept()
		if err != nil {
			return
		}
		go func() {
			out, err := f.dial()
			if err != nil {
				in.Close()
				return
			}
			if !f.track(in, out) {
				in.Close()
				out.Close()
				return
			}
			var once sync.Once
			end := func() {
				once.Do(func() {
					in.Close()
					out.Close()
					f.mu.Lock()
					delete(f.conns, in)
					delete(f.conns, out)
					f.mu.Unlock()
				})
			}
			go func() { _, _ = io.Copy(out, in); end() }()
			go func() { _, _ = io.Copy(in, out); end() }()
		}()
	}
}

func (f *forwarder) close() {
	f.l.Close()
	f.mu.Lock()
	f.done = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
}

// listenIn listens on addr inside the network namespace ns.
func listenIn(ns, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNetns(ns, func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// dialIn dials addr from inside the network namespace ns, giving up after
// timeout (a SYN into a cut link is dropped, not refused).
func dialIn(ns, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := inNetns(ns, func() (err error) {
		c, err = net.DialTimeout("tcp", addr, timeout)
		return err
	})
	return c, err
}

// uplink links host to the test's namespace with a veth pair of its own
// (host side eth1) and makes each of services (host:port on 127.0.0.1 of
// the test's namespace) reachable inside host at the same address, through
// that link. It returns the name of the test's end of the link, which
// cutUplink takes down.
func (l *netLab) uplink(host string, services ...string) string {
	t := l.t
	t.Helper()
	if l.upnet == "" {
		l.upnet = fmt.Sprintf("10.%d.%d", 200+mrand.N(50), mrand.N(250))
	}
	l.ups++
	root, peer := fmt.Sprintf("%s.%d", l.upnet, 4*l.ups+1), fmt.Sprintf("%s.%d", l.upnet, 4*l.ups+2)
	dev := "u" + l.id + host
	ns := l.ns(host)
	run := func(args ...string) {
		o, err := exec.Command("ip", args...).CombinedOutput()
		require.NoErrorf(t, err, "ip %s: %s", strings.Join(args, " "), o)
	}
	run("link", "add", dev, "type", "veth", "peer", "name", "w"+l.id+host)
	run("link", "set", "w"+l.id+host, "netns", ns)
	l.ip(ns, "link", "set", "w"+l.id+host, "name", "eth1")
	l.ip(ns, "addr", "add", peer+"/30", "dev", "eth1")
	l.ip(ns, "link", "set", "eth1", "up")
	run("addr", "add", root+"/30", "dev", dev)
	run("link", "set", dev, "up")
	for _, svc := range services {
		// The test's end: listens on the uplink, dials the service.
		rl, err := net.Listen("tcp", root+":0")
		require.NoError(t, err)
		forward(t, rl, func() (net.Conn, error) { return net.DialTimeout("tcp", svc, 5*time.Second) })
		// The host's end: listens at the service's address, dials the
		// test's end through the uplink.
		hl, err := listenIn(ns, svc)
		require.NoError(t, err, "listening on %s in %s", svc, ns)
		via := rl.Addr().String()
		forward(t, hl, func() (net.Conn, error) { return dialIn(ns, via, 5*time.Second) })
	}
	return dev
}

// cutUplink takes the test's end of an uplink down; healUplink brings it
// back.
func (l *netLab) cutUplink(dev string) { l.rootIP("link", "set", dev, "down") }
func (l *netLab) healUplink(dev string) {
	l.rootIP("link", "set", dev, "up")
}

func (l *netLab) rootIP(args ...string) {
	l.t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	require.NoErrorf(l.t, err, "ip %s: %s", strings.Join(args, " "), out)
}

// probe makes addr, served inside host, reachable from the test's
// namespace at the returned loopback address (dialled from inside host, so
// no cut of host's links stops the test from asking).
func (l *netLab) probe(host, addr string) string {
	l.t.Helper()
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(l.t, err)
	ns := l.ns(host)
	forward(l.t, pl, func() (net.Conn, error) { return dialIn(ns, addr, 5*time.Second) })
	return pl.Addr().String()
}

// hostPort is a port of host's address no process of the lab listens on
// yet: the lab's addresses are the test's alone.
func hostPort(addr string, n int) string { return fmt.Sprintf("%s:%d", addr, 7400+n) }

// partitionLab places a kill run's three processes on three hosts of a
// fresh lab: source, sink and run, each with an uplink to the Kafka broker
// and PostgreSQL of the test's namespace.
type partitionLab struct {
	lab   *netLab
	place *killPlace
	up    map[string]string // role → its uplink's device in the test's namespace
}

func newPartitionLab(t *testing.T) *partitionLab {
	brokers := Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker")
	var services []string
	services = append(services, strings.Split(brokers, ",")...)
	if dsn := os.Getenv("FLIGHTLINE_PG_DSN"); dsn != "" {
		services = append(services, pgHostPort(t, dsn))
	}
	lab := newNetLab(t)
	p := &partitionLab{lab: lab, up: map[string]string{}, place: &killPlace{netns: map[string]string{}}}
	addrs := map[string]string{}
	for _, role := range killRoles {
		addrs[role] = lab.host(role)
		p.place.netns[role] = lab.ns(role)
		p.up[role] = lab.uplink(role, services...)
	}
	p.place.srcListen = hostPort(addrs["source"], 1)
	p.place.sinkListen = hostPort(addrs["sink"], 2)
	p.place.sinkProbe = lab.probe("sink", p.place.sinkListen)
	return p
}

// pgHostPort is the host:port of a PostgreSQL DSN.
func pgHostPort(t *testing.T, dsn string) string {
	i := strings.Index(dsn, "@")
	require.True(t, i >= 0, "no host in %q", dsn)
	hp, _, _ := strings.Cut(dsn[i+1:], "/")
	return hp
}

// partitionFault is one kind of partition: which link, cut how.
type partitionFault struct {
	name      string
	cut, heal func()
	sinks     map[string]bool // only for these sinks; nil: every sink
}

func (p *partitionLab) faults() []partitionFault {
	l := p.lab
	return []partitionFault{
		{name: "run-sink", cut: func() { l.cut("sink") }, heal: func() { l.heal("sink") }},
		{name: "run-source", cut: func() { l.cut("source") }, heal: func() { l.heal("source") }},
		{name: "sink-db", cut: func() { l.cutUplink(p.up["sink"]) }, heal: func() { l.healUplink(p.up["sink"]) },
			sinks: map[string]bool{"postgres": true}},
		{name: "src-kafka", cut: func() { l.cutUplink(p.up["source"]) }, heal: func() { l.healUplink(p.up["source"]) }},
	}
}

// partitionRecoveryBound: a pipeline must be writing again this soon after
// a link heals (issue 16).
const partitionRecoveryBound = 10 * time.Second

// The lengths of a cut: a blip; one past TCP's fourth retransmission
// (sent 12.6 s into the cut, the next at 25.4 s); and longer than every
// timeout on the path — the source's session (6 s here), a gRPC connection
// attempt (5 s), the coordinator's stop (10 s), the sink's database calls —
// with TCP's next retransmission 11 s after the heal (at 51 s).
const (
	partitionShort  = 3 * time.Second
	partitionMiddle = 14 * time.Second
	partitionLong   = 40 * time.Second
)

// TestIntegrationPartitions cuts, while the split pipeline of the kill
// tests runs with each process on a host of its own, the link between the
// coordinator and the sink, between the coordinator and the source,
// between the sink and its database (PostgreSQL; the Delta sink writes to
// a local disk) and between the source and the broker, for a blip and for
// longer than the timeouts; heals it; and measures the stall and the time
// from the heal to the first commit of a record produced after the cut,
// which must be within partitionRecoveryBound. At the end the independent
// reader checks record by record: every committed record once, no aborted
// one, the final checkpoint the topic's end.
//
// make test runs the PostgreSQL sink with a blip of every link and one long
// cut between the coordinator and the source; FLIGHTLINE_CHAOS=1 runs the
// Delta and PostgreSQL sinks with every length on every link.
// FLIGHTLINE_PARTITION_LENGTHS (e.g. 3s,40s), _LINKS (e.g.
// run-sink,sink-db) and _SINKS (e.g. delta) choose for a manual run.
func TestIntegrationPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("partition test: skipped in -short mode")
	}
	lengths := []time.Duration{partitionShort}
	sinks := map[string]bool{"postgres": true}
	longOnce := "run-source" // make test: one long cut, of this link
	if chaosMode() {
		lengths, sinks, longOnce = []time.Duration{partitionShort, partitionMiddle, partitionLong}, map[string]bool{"postgres": true, "delta": true}, ""
	}
	if v := os.Getenv("FLIGHTLINE_PARTITION_LENGTHS"); v != "" {
		lengths, longOnce = nil, ""
		for _, f := range strings.Split(v, ",") {
			d, err := time.ParseDuration(f)
			require.NoError(t, err, "FLIGHTLINE_PARTITION_LENGTHS")
			lengths = append(lengths, d)
		}
	}
	if v := os.Getenv("FLIGHTLINE_PARTITION_SINKS"); v != "" { // e.g. delta,postgres
		sinks = map[string]bool{}
		for _, n := range strings.Split(v, ",") {
			sinks[n] = true
		}
	}
	only := os.Getenv("FLIGHTLINE_PARTITION_LINKS") // e.g. run-sink,run-source; empty: every link
	seed := killSeed(t)
	for _, s := range killSinks(false) {
		if !sinks[s.name] {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays the producer)", seed, seed)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
			defer cancel()
			pl := newPartitionLab(t)
			r := newKillRunAt(t, ctx, s, seed, killSession.String(), false, killAt{place: pl.place})
			rows := map[string]*faultRow{}
			var order []string
			type cut struct {
				f partitionFault
				d time.Duration
			}
			var plan []cut
			for _, f := range pl.faults() {
				if f.sinks != nil && !f.sinks[s.name] || only != "" && !slices.Contains(strings.Split(only, ","), f.name) {
					continue
				}
				for _, d := range lengths {
					plan = append(plan, cut{f, d})
				}
				if f.name == longOnce {
					plan = append(plan, cut{f, partitionLong})
				}
			}
			for _, c := range plan {
				name := fmt.Sprintf("cut %s %v", c.f.name, c.d)
				stall, rec := partitionOnce(t, ctx, r, c.f, c.d)
				row := rows[name]
				if row == nil {
					row = &faultRow{sink: s.name, fault: name}
					rows[name] = row
					order = append(order, name)
				}
				row.faults++
				row.stall = max(row.stall, stall)
				row.recovery = max(row.recovery, rec)
			}
			res := r.finish(ctx, 4*time.Minute)
			var table []faultRow
			for _, name := range order {
				row := *rows[name]
				row.checked, row.dups, row.losses = res.checked, res.dups, res.losses
				table = append(table, row)
			}
			logFaultTable(t, table)
			for _, row := range table {
				if row.recovery > partitionRecoveryBound {
					t.Errorf("%s: the pipeline took %v after the heal to commit again (bound %v)", row.fault,
						row.recovery.Round(100*time.Millisecond), partitionRecoveryBound)
				}
			}
		})
	}
}

// partitionOnce waits until every partition moves, cuts f for d, heals it,
// and returns the stall (the cut to the first commit of a record produced
// after it) and the recovery (the heal to that commit).
func partitionOnce(t *testing.T, ctx context.Context, r *killRun, f partitionFault, d time.Duration) (stall, recovery time.Duration) {
	t.Helper()
	r.waitMoving(ctx, 2*time.Minute)
	w := r.watchProgress(ctx)
	cut := time.Now()
	f.cut()
	end := endPositions(t, ctx, r.adm, r.topic)
	healed := false
	defer func() {
		if !healed {
			f.heal()
		}
	}()
	time.Sleep(d) // the partition itself, not a synchronisation
	f.heal()
	healed = true
	up := time.Now()
	at, ok := w.next(up, end, 3*time.Minute)
	if !ok {
		w.stop(nil)
		t.Fatalf("cut %s for %v: no commit within 3 minutes of the heal\n%s", f.name, d, r.dump())
	}
	w.stop(nil)
	t.Logf("cut %s for %v: committed again %v after the heal (stall %v)", f.name, d,
		at.Sub(up).Round(100*time.Millisecond), at.Sub(cut).Round(100*time.Millisecond))
	r.requireAlive()
	return at.Sub(cut), at.Sub(up)
}

// netemMissing says why tc cannot attach a netem qdisc on this machine
// (empty: it can), trying it in a scratch namespace of lab.
func netemMissing(l *netLab) string {
	if _, err := exec.LookPath("tc"); err != nil {
		return "tc (iproute2) is not installed"
	}
	ns := "fl" + l.id + "netem"
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return fmt.Sprintf("ip netns add: %v: %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", ns).Run()
	out, err := exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("tc qdisc add … netem: %v: %s (the kernel lacks the netem qdisc, CONFIG_NET_SCH_NETEM)",
			err, strings.TrimSpace(string(out)))
	}
	return ""
}

// netem puts "delay 100ms 50ms loss 5%" on both directions of host's
// bridge link and of its uplink, and returns the undo.
func (p *partitionLab) netem(host string) func() {
	l := p.lab
	args := []string{"root", "netem", "delay", "100ms", "50ms", "loss", "5%"}
	type dev struct{ ns, name string }
	devs := []dev{{l.sw, l.port(host)}, {l.ns(host), "eth0"}, {l.ns(host), "eth1"}, {"", p.up[host]}}
	for _, d := range devs {
		cmd := append([]string{"qdisc", "add", "dev", d.name}, args...)
		if d.ns != "" {
			cmd = append([]string{"-n", d.ns}, cmd...)
		}
		out, err := exec.Command("tc", cmd...).CombinedOutput()
		require.NoErrorf(l.t, err, "tc %s: %s", strings.Join(cmd, " "), out)
	}
	return func() {
		for _, d := range devs {
			cmd := []string{"qdisc", "del", "dev", d.name, "root"}
			if d.ns != "" {
				cmd = append([]string{"-n", d.ns}, cmd...)
			}
			_ = exec.Command("tc", cmd...).Run()
		}
	}
}

// netemWindow is how long the netem test measures with and without netem.
const netemWindow = 20 * time.Second

// TestIntegrationNetem runs the split pipeline of the partition test with
// every process on a host of its own, measures what it commits in
// netemWindow, then puts 100 ms ± 50 ms of delay and 5 % loss on both
// directions of the source's and the sink's links (bridge and uplink) and
// measures again: the pipeline must keep committing in every partition,
// and, at the end, every record exactly once. It logs both rates. It needs
// the kernel's netem qdisc; where tc cannot attach it, the test skips
// saying so (a kernel feature, not a service: FLIGHTLINE_REQUIRE_SERVICES
// does not turn it into a failure). make chaos runs it (Delta and
// PostgreSQL); make test does not.
func TestIntegrationNetem(t *testing.T) {
	if testing.Short() || !chaosMode() {
		t.Skip("netem test: make chaos (FLIGHTLINE_CHAOS=1) runs it")
	}
	seed := killSeed(t)
	for _, s := range killSinks(false) {
		if s.name != "postgres" && s.name != "delta" {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			pl := newPartitionLab(t)
			if why := netemMissing(pl.lab); why != "" {
				t.Skipf("tc netem is not available here, so delay and loss are not tested: %s", why)
			}
			r := newKillRunAt(t, ctx, s, seed, killSession.String(), false, killAt{place: pl.place})
			r.waitMoving(ctx, 2*time.Minute)
			rate := func() (float64, checkpoint.Positions) {
				from := r.committed(ctx)
				time.Sleep(netemWindow) // the measuring window, not a synchronisation
				to := r.committed(ctx)
				var n int64
				for k, v := range to {
					n += v - from[k]
				}
				return float64(n) / netemWindow.Seconds(), from
			}
			clean, _ := rate()
			undo := []func(){pl.netem("source"), pl.netem("sink")}
			defer func() {
				for _, u := range undo {
					u()
				}
			}()
			slow, before := rate()
			after := r.committed(ctx)
			for k, v := range before {
				require.Greater(t, after[k], v, "no progress in %s under netem", k)
			}
			t.Logf("committed offsets/s: %.0f without netem, %.0f with 100ms±50ms delay and 5%% loss on the source's and the sink's links",
				clean, slow)
			for _, u := range undo {
				u()
			}
			undo = nil
			res := r.finish(ctx, 4*time.Minute)
			logFaultTable(t, []faultRow{{sink: s.name, fault: "netem 100ms 5%", faults: 1, checked: res.checked,
				dups: res.dups, losses: res.losses}})
		})
	}
}
