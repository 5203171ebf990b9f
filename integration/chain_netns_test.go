package integration

import (
	"fmt"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// netLab is a set of network namespaces ("hosts") joined by veth pairs to
// a bridge in a switch namespace, with addresses of a private /24 that
// belong to the test alone; nothing is routed out of it.
type netLab struct {
	t      *testing.T
	id     string
	sw     string
	subnet string
	hosts  map[string]string // name → address
	n      int
	upnet  string // the /24 of the uplinks (partition tests)
	ups    int
}

// newNetLab creates the switch, or skips when the machine cannot (not
// root, no ip(8), no netns support) — and fails instead under
// FLIGHTLINE_REQUIRE_SERVICES=1 (make test, which CI runs as root), so the
// test never quietly stops running.
func newNetLab(t *testing.T) *netLab {
	t.Helper()
	skip := t.Skip
	if os.Getenv("FLIGHTLINE_REQUIRE_SERVICES") == "1" {
		skip = t.Fatal
	}
	if os.Geteuid() != 0 {
		skip("the network-namespace tests (three-host chain, partitions, scale-out) need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		skip("the network-namespace tests need ip(8) (iproute2)")
	}
	l := &netLab{t: t, id: fmt.Sprintf("%04x", mrand.N(0x10000)), hosts: map[string]string{}}
	l.subnet = fmt.Sprintf("10.%d.%d", 200+mrand.N(50), mrand.N(250))
	l.sw = "fl" + l.id + "sw"
	if out, err := exec.Command("ip", "netns", "add", l.sw).CombinedOutput(); err != nil {
		skip(fmt.Sprintf("cannot create a network namespace here: %v: %s", err, out))
	}
	t.Cleanup(func() {
		for h := range l.hosts {
			_ = exec.Command("ip", "netns", "del", l.ns(h)).Run()
		}
		_ = exec.Command("ip", "netns", "del", l.sw).Run()
	})
	l.ip(l.sw, "link", "add", "br0", "type", "bridge")
	l.ip(l.sw, "link", "set", "br0", "up")
	return l
}

func (l *netLab) ns(host string) string { return "fl" + l.id + host }

// port is the switch side of host's link.
func (l *netLab) port(host string) string { return "s" + l.id + host }

func (l *netLab) ip(ns string, args ...string) {
	l.t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
	require.NoErrorf(l.t, err, "ip -n %s %s: %s", ns, strings.Join(args, " "), out)
}

// host adds a namespace linked to the switch and returns its address.
func (l *netLab) host(name string) string {
	l.t.Helper()
	l.n++
	addr := fmt.Sprintf("%s.%d", l.subnet, l.n)
	ns, in, out := l.ns(name), "v"+l.id+name, l.port(name)
	run := func(args ...string) {
		o, err := exec.Command("ip", args...).CombinedOutput()
		require.NoErrorf(l.t, err, "ip %s: %s", strings.Join(args, " "), o)
	}
	run("netns", "add", ns)
	l.hosts[name] = addr
	run("link", "add", in, "type", "veth", "peer", "name", out)
	run("link", "set", in, "netns", ns)
	run("link", "set", out, "netns", l.sw)
	l.ip(l.sw, "link", "set", out, "master", "br0")
	l.ip(l.sw, "link", "set", out, "up")
	l.ip(ns, "link", "set", "lo", "up")
	l.ip(ns, "link", "set", in, "name", "eth0")
	l.ip(ns, "addr", "add", addr+"/24", "dev", "eth0")
	l.ip(ns, "link", "set", "eth0", "up")
	return addr
}

// cut takes host's link down at the switch; heal brings it back.
func (l *netLab) cut(host string)  { l.ip(l.sw, "link", "set", l.port(host), "down") }
func (l *netLab) heal(host string) { l.ip(l.sw, "link", "set", l.port(host), "up") }

// start runs the flightline binary on host.
func (l *netLab) start(host, bin string, log *syncBuffer, args ...string) *proc {
	l.t.Helper()
	return startLogged(l.t, "ip", log, append([]string{"netns", "exec", l.ns(host), bin}, args...)...)
}

// pki is a CA, one server certificate for every address of the lab, one
// client certificate, and a bearer token per role, as files.
type pki struct {
	ca, cert, key, clientCert, clientKey string
	tokens                               map[string]string
}

// newPKI makes the lab's certificates and tokens with the recipe of
// docs/chaining.md ("Certificates and tokens"), run as written with SANS
// naming ips, so the documented commands are the ones the tests trust.
func newPKI(t *testing.T, ips []string) pki {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatal("the network-namespace tests make their certificates with openssl(1), as docs/chaining.md does")
	}
	dir := t.TempDir()
	script := certRecipe(t)
	var sans []string
	for _, ip := range ips {
		sans = append(sans, "IP:"+ip)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SANS="+strings.Join(sans, ","))
	out, err := cmd.CombinedOutput()
	require.NoErrorf(t, err, "the certificate recipe of docs/chaining.md failed:\n%s", out)
	p := pki{ca: filepath.Join(dir, "ca.crt"), cert: filepath.Join(dir, "server.crt"), key: filepath.Join(dir, "server.key"),
		clientCert: filepath.Join(dir, "coord.crt"), clientKey: filepath.Join(dir, "coord.key"), tokens: map[string]string{}}
	for _, role := range []string{"source", "sink", "transform"} {
		p.tokens[role] = filepath.Join(dir, role+".token")
	}
	for _, f := range []string{p.ca, p.cert, p.key, p.clientCert, p.clientKey, p.tokens["source"], p.tokens["sink"], p.tokens["transform"]} {
		fi, err := os.Stat(f)
		require.NoErrorf(t, err, "the recipe of docs/chaining.md makes %s", filepath.Base(f))
		require.Positivef(t, fi.Size(), "%s is empty", filepath.Base(f))
	}
	return p
}

// certRecipe returns the shell block that follows the "certificate
// recipe" marker in docs/chaining.md.
func certRecipe(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../docs/chaining.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "<!-- certificate recipe: run by integration/chain_netns_test.go -->\n```sh\n")
	require.True(t, ok, "docs/chaining.md has no certificate recipe block")
	block, _, ok := strings.Cut(rest, "\n```")
	require.True(t, ok, "the certificate recipe block of docs/chaining.md is not closed")
	return block
}

// server is the security flags of a server of role.
func (p pki) server(role string) []string {
	return []string{"--tls-cert", p.cert, "--tls-key", p.key, "--tls-client-ca", p.ca, "--token-file", p.tokens[role]}
}

// client is the security flags of the coordinator for the endpoint role.
func (p pki) client(role string) []string {
	return []string{"--" + role + "-tls-ca", p.ca, "--" + role + "-tls-cert", p.clientCert, "--" + role + "-tls-key", p.clientKey,
		"--" + role + "-token-file", p.tokens[role]}
}

// deltaCommits counts the commits in the Delta log under dir.
func deltaCommits(dir string) int {
	m, _ := filepath.Glob(filepath.Join(dir, "_delta_log", "*.json"))
	return len(m)
}

// TestIntegrationChainThreeHosts runs a chain across three hosts (network
// namespaces): A serves the generator, B runs a transform service and the
// coordinator (with a built-in in-process), C serves the Delta sink; mTLS
// and a bearer token on every hop. While data flows it cuts B off and
// heals it, kills B's processes and restarts them, cuts C off and heals
// it, then cuts B off again and starts a new coordinator and transform on
// host D: when B comes back, its coordinator, now a zombie, is refused by
// the sink (fenced, or its rejoin refused) and stops. D's finishes, and delta-rs finds every kept row once.
func TestIntegrationChainThreeHosts(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	lab := newNetLab(t)
	a, b, c, d := lab.host("a"), lab.host("b"), lab.host("c"), lab.host("d")
	keys := newPKI(t, []string{a, b, c, d})
	bin := flightlineBin(t)
	table := filepath.Join(t.TempDir(), "orders")
	const rows, batch = 50_000, 500
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
		"--source", fmt.Sprintf("generator:?rows=%d&batch_rows=%d&interval=200ms", rows, batch)}, keys.server("source")...)...)
	lab.start("c", bin, logOf("c/sink"), append([]string{"serve-sink", "--listen", c + ":7402", "--sink", "delta:" + table},
		keys.server("sink")...)...)
	transformOn := func(host, addr string) *proc {
		return lab.start(host, bin, logOf(host+"/transform"), append([]string{"serve-transform", "--listen", addr + ":7403",
			"--transform", "builtin:filter?column=quantity&op=ge&value=5"}, keys.server("transform")...)...)
	}
	coordinatorOn := func(host, addr string) *proc {
		args := []string{"run", "--stream", "orders", "--pipeline", "chain",
			"--source", "grpc+tls://" + a + ":7401", "--sink", "grpc+tls://" + c + ":7402",
			"--transform", "grpc+tls://" + addr + ":7403", "--transform", "builtin:select?columns=id,quantity"}
		for _, role := range []string{"source", "sink", "transform"} {
			args = append(args, keys.client(role)...)
		}
		return lab.start(host, bin, logOf(host+"/run"), args...)
	}
	progress := func(what string, more int) {
		t.Helper()
		from := deltaCommits(table)
		require.Eventuallyf(t, func() bool { return deltaCommits(table) >= from+more }, 3*time.Minute, 100*time.Millisecond,
			"%s: no %d more commits after %d", what, more, from)
	}
	outage := func(host string) {
		lab.cut(host)
		time.Sleep(3 * time.Second) // the outage itself, not a synchronisation
		lab.heal(host)
	}

	bt, br := transformOn("b", b), coordinatorOn("b", b)
	progress("start", 5)

	outage("b")
	progress("after B's link came back", 5)

	bt.kill()
	br.kill()
	bt, br = transformOn("b", b), coordinatorOn("b", b)
	progress("after B's processes restarted", 5)

	outage("c")
	progress("after C's link came back", 5)

	// The zombie: B is cut off mid-stream; D takes over; B comes back.
	lab.cut("b")
	transformOn("d", d)
	dr := coordinatorOn("d", d)
	progress("D took over", 5)
	lab.heal("b")
	select {
	case err := <-br.doneOnce():
		require.Error(t, err, "B's coordinator must stop: it was replaced")
	case <-time.After(3 * time.Minute):
		t.Fatal("B's zombie coordinator was not stopped")
	}
	require.Contains(t, logOf("b/run").String(), "claimed by a newer coordinator", "B stopped because D claimed the pipeline")
	for _, line := range strings.Split(logOf("b/run").String(), "\n") {
		if strings.Contains(line, "newer coordinator") {
			t.Logf("zombie: %s", line)
		}
	}
	select {
	case err := <-dr.doneOnce():
		require.NoError(t, err, "D's coordinator runs to the end of the stream")
	case <-time.After(5 * time.Minute):
		t.Fatal("D's coordinator did not finish")
	}
	bt.kill()
	for _, line := range strings.Split(logOf("d/run").String(), "\n") {
		if strings.Contains(line, "run finished") {
			t.Logf("D: %s", line)
		}
	}
	for _, line := range strings.Split(logOf("b/run").String(), "\n") {
		if strings.Contains(line, "interrupted") {
			t.Logf("B: %s", line)
		}
	}

	got := checkWithDeltaRs(t, table, nil, "chain")
	want := int64(0)
	for i := int64(0); i < rows; i++ {
		if 1+i%9 >= 5 { // the generator's quantity; the filter keeps >= 5
			want++
		}
	}
	require.Equal(t, want, got.Rows)
	require.Equal(t, got.Rows, got.Distinct, "every kept row exactly once")
	require.Equal(t, map[string]string{"id": "int64", "quantity": "int32"}, got.Schema)
	require.Equal(t, fmt.Sprintf(`{"positions":{"orders/0":%d}}`, rows), got.LastCheckpoint)
}
