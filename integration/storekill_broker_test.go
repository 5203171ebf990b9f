package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// storekillBroker is a RabbitMQ broker of the test's own (Debian's
// rabbitmq-server, as integration/services/svc/rabbitmq.sh runs it), on
// its own ports and mnesia directory, so killing it leaves the shared
// broker alone.
type storekillBroker struct {
	t                *testing.T
	dir              string
	port, epmd, dist string
	cmd              *exec.Cmd
	done             chan struct{}
	log              *syncBuffer
}

func (b *storekillBroker) env() []string {
	return append(os.Environ(), "HOME="+b.dir+"/home", "RABBITMQ_MNESIA_BASE="+b.dir+"/mnesia",
		"RABBITMQ_LOG_BASE="+b.dir+"/log", "RABBITMQ_CONFIG_FILE="+b.dir+"/rabbitmq.conf",
		"RABBITMQ_ENABLED_PLUGINS_FILE="+b.dir+"/enabled_plugins", "RABBITMQ_NODENAME=rabbit@localhost",
		"ERL_EPMD_ADDRESS=127.0.0.1", "ERL_EPMD_PORT="+b.epmd, "RABBITMQ_DIST_PORT="+b.dist)
}

func newStorekillBroker(t *testing.T) *storekillBroker {
	const bin = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	if _, err := os.Stat(bin); err != nil {
		Need(t, "FLIGHTLINE_AMQP_URL", "RabbitMQ (Debian's rabbitmq-server)")
		t.Skipf("%s not installed", bin)
	}
	b := &storekillBroker{t: t, dir: t.TempDir(), port: storekillPort(t), epmd: storekillPort(t), dist: storekillPort(t)}
	for _, d := range []string{"home", "mnesia", "log"} {
		require.NoError(t, os.MkdirAll(filepath.Join(b.dir, d), 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "enabled_plugins"), []byte("[].\n"), 0o644))
	conf := fmt.Sprintf("listeners.tcp.1 = 127.0.0.1:%s\ndistribution.listener.interface = 127.0.0.1\n"+
		"distribution.listener.port_range.min = %s\ndistribution.listener.port_range.max = %s\n", b.port, b.dist, b.dist)
	require.NoError(t, os.WriteFile(filepath.Join(b.dir, "rabbitmq.conf"), []byte(conf), 0o644))
	b.log = &syncBuffer{}
	t.Cleanup(func() {
		b.kill()
		cmd := exec.Command("epmd", "-port", b.epmd, "-kill")
		cmd.Env = b.env()
		_ = cmd.Run()
	})
	b.start()
	return b
}

// start runs the broker and waits until it accepts AMQP connections.
func (b *storekillBroker) start() {
	t := b.t
	cmd := exec.Command("/usr/lib/rabbitmq/bin/rabbitmq-server")
	cmd.Env = b.env()
	cmd.Stdout, cmd.Stderr = b.log, b.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	b.cmd, b.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(b.done) }()
	require.Eventually(t, func() bool {
		c, err := amqp091.Dial(b.url())
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 2*time.Minute, 200*time.Millisecond, "the test's broker did not start:\n%s", b.log.String())
}

// kill kill -9s the broker's process group (the script and the Erlang VM).
func (b *storekillBroker) kill() {
	if b.cmd == nil {
		return
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	<-b.done
	b.cmd = nil
}

func (b *storekillBroker) url() string { return "amqp://guest:guest@127.0.0.1:" + b.port + "/" }

// TestIntegrationAMQPBrokerKill (make chaos): a broker of the test's own
// kill -9ed under a running generator → amqp pipeline and started again
// (same mnesia, durable queue, persistent messages); the sink answers
// UNAVAILABLE while it is down, the coordinator retries, and a consumer
// that drops repeats by message_id finds every row exactly once.
func TestIntegrationAMQPBrokerKill(t *testing.T) {
	if testing.Short() || !chaosMode() {
		t.Skip("fault test: runs under FLIGHTLINE_CHAOS=1 (make chaos)")
	}
	b := newStorekillBroker(t)
	conn, err := amqp091.Dial(b.url())
	require.NoError(t, err)
	ch, err := conn.Channel()
	require.NoError(t, err)
	const queue = "storekill_broker"
	_, err = ch.QueueDeclare(queue, true, false, false, false, nil)
	require.NoError(t, err)
	conn.Close()
	t.Setenv("AMQP_PASSWORD", "guest")

	const rows = 20000
	bin := flightlineBin(t)
	srcAddr, sinkAddr := freePort(t), freePort(t)
	src := start(t, bin, "serve-source", "--listen", srcAddr, "--source", fmt.Sprintf("generator:?rows=%d&batch_rows=200&interval=20ms", rows))
	sink := start(t, bin, "serve-sink", "--listen", sinkAddr, "--sink", "amqp://guest@127.0.0.1:"+b.port+"/")
	logs := &syncBuffer{}
	run := startLogged(t, bin, logs, "run", "--source", "grpc://"+srcAddr, "--sink", "grpc://"+sinkAddr,
		"--stream", "orders", "--pipeline", "broker-kill", "--target", queue)
	queued := func() int {
		c, err := amqp091.Dial(b.url())
		if err != nil {
			return 0
		}
		defer c.Close()
		ch, err := c.Channel()
		if err != nil {
			return 0
		}
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		if err != nil {
			return 0
		}
		return q.Messages
	}
	require.Eventually(t, func() bool { return queued() > 1000 }, time.Minute, 100*time.Millisecond, "no messages\n%s", logs.String())
	before := strings.Count(logs.String(), "pipeline interrupted")
	b.kill()
	killed := time.Now()
	time.Sleep(2 * time.Second)
	b.start()
	back := time.Now()
	t.Logf("broker down for %v (its start included)", back.Sub(killed).Round(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	select {
	case err := <-run.doneOnce():
		require.NoError(t, err, "run:\n%s\nsink:\n%s", logs.String(), sink.log.String())
	case <-ctx.Done():
		t.Fatalf("pipeline did not finish:\n%s", logs.String())
	}
	require.Greater(t, strings.Count(logs.String(), "pipeline interrupted"), before, "the pipeline did not notice the broker was down\n%s", logs.String())
	t.Logf("finished %v after the broker was back", time.Since(back).Round(100*time.Millisecond))
	src.kill()
	sink.kill()

	c, err := amqp091.Dial(b.url())
	require.NoError(t, err)
	defer c.Close()
	ch, err = c.Channel()
	require.NoError(t, err)
	byMsgID := map[string]int64{}
	raw := 0
	for {
		m, ok, err := ch.Get(queue, true)
		require.NoError(t, err)
		if !ok {
			break
		}
		raw++
		var row struct{ ID int64 }
		require.NoError(t, json.Unmarshal(m.Body, &row))
		if prev, seen := byMsgID[m.MessageId]; seen {
			require.Equal(t, prev, row.ID, "message_id %s carried two rows", m.MessageId)
		}
		byMsgID[m.MessageId] = row.ID
	}
	ids := map[int64]int{}
	for _, id := range byMsgID {
		ids[id]++
	}
	missing, doubled := 0, 0
	for id := range int64(rows) {
		switch ids[id] {
		case 0:
			missing++
		case 1:
		default:
			doubled++
		}
	}
	require.Zero(t, missing, "rows lost")
	require.Zero(t, doubled, "rows under more than one message_id")
	require.Len(t, ids, rows)
	t.Logf("amqp, broker kill -9 and restart: %d messages for %d rows, %d raw duplicates, every row exactly once after dedup by message_id", raw, rows, raw-len(byMsgID))
	appendChaosReport(t, []faultRow{{sink: "amqp", fault: "broker kill", faults: 1, checked: rows, recovery: notMeasured}})
}
