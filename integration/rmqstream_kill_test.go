package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The RabbitMQ stream sink's kill tests (issue 37): serve-source,
// serve-sink (rabbitmq-stream:) and run as three processes, a random one
// kill -9ed and restarted, then the rstream Python client (not the Go
// client the sink uses) reads the stream from its first message and must
// find every record exactly once. Two sources: the generator, which has no
// committed position of its own, and Kafka on the split kill test's live
// topic with committed and aborted transactions. A sink killed in the
// middle of a batch leaves its first rows in the stream; the restarted
// pipeline must complete that batch without repeating them.

// rmqstreamBroker returns host, port, user and password of the broker of
// FLIGHTLINE_RABBITMQ_STREAM_URL, and the rstream reader's python, with
// the password exported for serve-sink (password_env's default).
func rmqstreamBroker(t *testing.T) (host, port, user, pass, py string) {
	raw := Need(t, "FLIGHTLINE_RABBITMQ_STREAM_URL", "RabbitMQ streams")
	py = Need(t, "FLIGHTLINE_PYTHON", "python with rstream")
	u, err := url.Parse(raw)
	require.NoError(t, err)
	pass, _ = u.User.Password()
	t.Setenv("RABBITMQ_STREAM_PASSWORD", pass)
	return u.Hostname(), u.Port(), u.User.Username(), pass, py
}

// rmqstreamRead runs integration/python/rabbitstream_read.py: column of
// every row of stream, as rstream reads them.
func rmqstreamRead(ctx context.Context, py, host, port, user, pass, stream, column string) ([]string, error) {
	out, err := exec.CommandContext(ctx, py, "python/rabbitstream_read.py", host, port, user, pass, stream, column).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return nil, fmt.Errorf("rabbitstream_read.py: %w\n%s", err, ee.Stderr)
	}
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// TestIntegrationRabbitStreamKill9Generator: the generator source, whose
// stream is deterministic but which keeps no position; the checkpoint the
// sink reads back from the stream is the resume point.
func TestIntegrationRabbitStreamKill9Generator(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	host, port, user, pass, py := rmqstreamBroker(t)
	seed := killSeed(t)
	t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays it)", seed, seed)
	kills := killCount(4, 100)
	// Batches of 8000 rows take three publish frames (the sink's frames
	// hold 512 KiB), so a sink killed between them leaves a cut batch in
	// the stream: a batch of one frame reaches the broker whole or not at
	// all even when the process dies, since the kernel still sends what
	// was written to the socket.
	rows := int64(kills) * 16000
	bin := flightlineBin(t)
	stream := fmt.Sprintf("fl_kill_gen_%d", rand.Int64())
	srcAddr, sinkAddr := freePort(t), freePort(t)
	argv := map[string][]string{
		"source": {"serve-source", "--listen", srcAddr, "--source", fmt.Sprintf("generator:?rows=%d&batch_rows=8000&interval=100ms", rows)},
		"sink":   {"serve-sink", "--listen", sinkAddr, "--sink", fmt.Sprintf("rabbitmq-stream://%s@%s:%s", user, host, port)},
		"run": {"run", "--source", "grpc://" + srcAddr, "--sink", "grpc://" + sinkAddr,
			"--stream", "orders", "--pipeline", "gen", "--target", stream},
	}
	began := time.Now()
	sinkLog := &syncBuffer{} // every sink process's log, for the cut batches it completed
	startRole := func(name string) *proc {
		if name == "sink" {
			return startLogged(t, bin, sinkLog, argv[name]...)
		}
		return start(t, bin, argv[name]...)
	}
	procs := map[string]*proc{}
	for _, name := range killRoles {
		procs[name] = startRole(name)
	}
	rng := rand.New(rand.NewPCG(seed, 37))
	killed := 0
	for killed < kills {
		time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
		if done, err := procs["run"].exited(); done {
			require.NoErrorf(t, err, "coordinator failed:\n%s", procs["run"].log.String())
			break
		}
		victim := killRoles[rng.IntN(len(killRoles))]
		procs[victim].kill()
		killed++
		procs[victim] = startRole(victim)
	}
	t.Logf("killed a process %d times", killed)
	require.GreaterOrEqual(t, killed, kills*3/4, "the pipeline ended too soon for its kills; give it more rows")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	select {
	case err := <-procs["run"].doneOnce():
		require.NoError(t, err, procs["run"].log.String())
	case <-ctx.Done():
		t.Fatalf("pipeline did not finish:\n%s", procs["run"].log.String())
	}
	ids, err := rmqstreamRead(ctx, py, host, port, user, pass, stream, "id")
	require.NoError(t, err)
	seen := make(map[int64]int, rows)
	for _, s := range ids {
		id, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err, s)
		seen[id]++
	}
	var dup, missing []int64
	for id := range rows {
		switch seen[id] {
		case 1:
		case 0:
			missing = append(missing, id)
		default:
			dup = append(dup, id)
		}
		delete(seen, id)
	}
	require.Emptyf(t, dup, "ids in the stream more than once (sink log:\n%s)", sinkLog.String())
	require.Empty(t, missing, "ids missing from the stream")
	require.Empty(t, seen, "ids the generator never made")
	require.Len(t, ids, int(rows))
	cut := strings.Count(sinkLog.String(), "completing a batch a crash cut short")
	t.Logf("rstream: %d records checked, each exactly once, after %d kills (%d batches cut by a kill completed); %s from the start of the pipeline",
		rows, killed, cut, time.Since(began).Round(time.Second))
}

// TestIntegrationRabbitStreamKill9Kafka: the split kill test's harness (a
// Kafka source without instance_id on a live topic with aborted
// transactions, JSON values) with the RabbitMQ stream sink, read back
// with rstream. Only under FLIGHTLINE_CHAOS=1: its short run takes about
// a minute (the harness's live topic), past what make test's budget leaves
// this sink; the generator test is this sink's kill test in make test.
func TestIntegrationRabbitStreamKill9Kafka(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	if !chaosMode() {
		t.Skip("runs in make chaos (FLIGHTLINE_CHAOS=1): about a minute even with 4 kills")
	}
	s := killSink{name: "rabbitmq-stream", format: "json", dest: func(t *testing.T, _ context.Context, _ string) killDest {
		host, port, user, pass, py := rmqstreamBroker(t)
		stream := fmt.Sprintf("fl_kill_kafka_%d", rand.Int64())
		return killDest{spec: fmt.Sprintf("rabbitmq-stream://%s@%s:%s", user, host, port), target: stream,
			read: func(ctx context.Context) ([]string, error) {
				return rmqstreamRead(ctx, py, host, port, user, pass, stream, "key")
			}}
	}}
	seed := killSeed(t)
	t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays it)", seed, seed)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	kills := killCount(4, 100)
	r := newKillRun(t, ctx, s, seed, killSession.String(), false)
	rep := r.chaos(ctx, rand.New(rand.NewPCG(seed, 1)), kills)
	t.Cleanup(func() { appendChaosReport(t, rep.rows(s.name, r.res)) })
	res := r.finish(ctx, 4*time.Minute)
	t.Logf("rabbitmq-stream sink, Kafka source: %d records checked after %d kills", res.checked, kills)
	if rep.worst > killRecoveryBound {
		t.Errorf("the pipeline took %v to commit again after a restart (%s), over the bound of %v",
			rep.worst.Round(100*time.Millisecond), rep.worstAt, killRecoveryBound)
	}
}
