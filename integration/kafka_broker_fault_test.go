package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The Kafka broker killed mid-transaction (issue 16). The suites share one
// broker, which must not be killed, so this test starts a single-node KRaft
// broker of its own from the classpath services.sh installed
// (FLIGHTLINE_KAFKA_LIBS), with its own data directory and free ports, and
// kill -9s and restarts it while the split pipeline (serve-source,
// serve-sink, run) reads a live topic on it: for the Kafka sink (source,
// sink and checkpoint all on that broker) and for Kafka → Delta (the
// source's side only). Data flows the whole time: the live producer has a
// transaction open most of the time and so does the sink (a batch of up to
// 200 rows every 100 ms), so a kill lands inside both. The restart comes at
// once ("quick") or after 5 s ("slow").

// ownBroker is a broker of the test's own that it may kill.
type ownBroker struct {
	t          *testing.T
	libs, java string
	dir, addr  string
	cmd        *exec.Cmd
	done       chan struct{}
	log        *os.File
}

// startOwnBroker formats and starts a private KRaft broker.
func startOwnBroker(t *testing.T) *ownBroker {
	libs := Need(t, "FLIGHTLINE_KAFKA_LIBS", "the Kafka broker's classpath")
	java, err := exec.LookPath("java")
	require.NoError(t, err, "java (installed with the Kafka service)")
	dir := t.TempDir()
	b := &ownBroker{t: t, libs: libs, java: java, dir: dir, addr: freePort(t)}
	cport := freePort(t)
	props := fmt.Sprintf(`process.roles=broker,controller
node.id=1
controller.quorum.voters=1@%[2]s
listeners=PLAINTEXT://%[1]s,CONTROLLER://%[2]s
advertised.listeners=PLAINTEXT://%[1]s
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
log.dirs=%[3]s/data
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
`, b.addr, cport, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "server.properties"), []byte(props), 0o644))
	l4j := fmt.Sprintf("status = warn\nappender.file.type = File\nappender.file.name = file\nappender.file.fileName = %s/server.log\n"+
		"appender.file.layout.type = PatternLayout\nappender.file.layout.pattern = [%%d] %%p %%m (%%c)%%n\n"+
		"rootLogger.level = info\nrootLogger.appenderRef.file.ref = file\n", dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "log4j2.properties"), []byte(l4j), 0o644))
	out, err := exec.Command(java, "-cp", libs+"/*", "-Dlog4j2.configurationFile="+dir+"/log4j2.properties",
		"kafka.tools.StorageTool", "format", "-t", "q1Sh-9_ISia_zwGINzRvyQ", "-c", dir+"/server.properties").CombinedOutput()
	require.NoError(t, err, "kafka-storage format: %s", out)
	b.log, err = os.Create(filepath.Join(dir, "stdout.log"))
	require.NoError(t, err)
	t.Cleanup(func() {
		b.kill9()
		b.log.Close()
	})
	b.start()
	return b
}

// start starts the broker on its data directory and waits until it answers
// a metadata request (up to 2 minutes), returning how long that took.
func (b *ownBroker) start() time.Duration {
	b.t.Helper()
	t0 := time.Now()
	b.cmd = exec.Command(b.java, "-Xmx512m", "-Xms128m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-cp", b.libs+"/*",
		"-Dlog4j2.configurationFile="+b.dir+"/log4j2.properties", "kafka.Kafka", b.dir+"/server.properties")
	b.cmd.Stdout, b.cmd.Stderr = b.log, b.log
	require.NoError(b.t, b.cmd.Start())
	done := make(chan struct{})
	b.done = done
	go func() { b.cmd.Wait(); close(done) }()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.addr))
	require.NoError(b.t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := adm.ListBrokers(ctx)
		cancel()
		if err == nil {
			return time.Since(t0)
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(b.dir, "server.log"))
			b.t.Fatalf("the broker exited during start: %s", logTail(string(log), 4000))
		default:
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("the broker did not answer within 2 minutes: %v", err)
		}
	}
}

// kill9 kill -9s the broker (if running) and waits for it to exit.
func (b *ownBroker) kill9() {
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Kill()
	<-b.done
	b.cmd = nil
}

func logTail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestIntegrationKafkaBrokerKill kill -9s the pipeline's own broker mid-
// transaction while data flows, restarts it (at once, or after 5 s), and
// measures the stall (the kill to the next commit of a record produced
// after it) and the recovery (the broker answering again to that commit);
// then checks record by record: kcat read_committed for the Kafka sink,
// delta-rs for Delta, pgx for PostgreSQL. In make test the Kafka sink gets
// one quick and one slow restart and Delta one quick restart (the source's
// side is the same in both; each broker start costs 12–20 s on a loaded
// machine); under FLIGHTLINE_CHAOS=1 each of the three sinks gets three of
// each.
func TestIntegrationKafkaBrokerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test: skipped in -short mode")
	}
	Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker") // the installed broker
	each := 1
	if chaosMode() {
		each = 3
	}
	seed := killSeed(t)
	sinks := []killSink{
		{name: "kafka", format: "raw", dest: nil},
		{name: "delta", format: "json", dest: func(t *testing.T, _ context.Context, _ string) killDest {
			Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
			uri := filepath.Join(t.TempDir(), "orders")
			return killDest{spec: "delta:" + uri + "?checkpoint_interval=10", read: pythonKeys(t, "delta", uri, nil)}
		}},
		// Kafka → PostgreSQL: the same source-side fault under a database
		// transaction (make chaos only: the source's side is the Delta
		// run's, and each broker start costs make test 12–20 s).
		{name: "postgres", format: "json", chaos: true, dest: postgresKillDest},
	}
	for _, s := range sinks {
		if s.chaos && !chaosMode() {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays the producer)", seed, seed)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			b := startOwnBroker(t)
			if s.name == "kafka" {
				s.dest = func(t *testing.T, ctx context.Context, name string) killDest {
					return kafkaDestAt(t, ctx, b.addr, name)
				}
			}
			r := newKillRunAt(t, ctx, s, seed, killSession.String(), false, killAt{brokers: b.addr, tolerant: true})
			rows := map[string]*faultRow{}
			var order []string
			kinds := []string{"broker kill -9 quick", "broker kill -9 slow"}
			if s.name == "delta" && !chaosMode() {
				kinds = kinds[:1]
			}
			for i := range len(kinds) * each {
				fault := kinds[i%len(kinds)]
				slow := strings.HasSuffix(fault, "slow")
				t0 := time.Now()
				r.waitMoving(ctx, 2*time.Minute)
				t.Logf("moving in every partition after %v", time.Since(t0).Round(100*time.Millisecond))
				w := r.watchProgress(ctx)
				end := endPositions(t, ctx, r.adm, r.topic) // nothing past it was read before the kill
				time.Sleep(time.Duration(100+i*137%400) * time.Millisecond)
				killed := time.Now()
				b.kill9()
				if slow {
					time.Sleep(5 * time.Second) // down while the producer waits
				}
				startTook := b.start()
				up := time.Now()
				prodAt := r.prod.waitTxn(up, 2*time.Minute)
				at, ok := w.next(up, end, 2*time.Minute)
				require.True(t, ok, "no commit within 2 minutes of the broker's restart after %s\n%s", fault, r.dump())
				w.stop(nil)
				rec := at.Sub(up)
				t.Logf("%s: broker down %v (start %v); the producer's next transaction ended %v and the pipeline committed again %v after it answered",
					fault, up.Sub(killed).Round(100*time.Millisecond), startTook.Round(100*time.Millisecond),
					prodAt.Sub(up).Round(100*time.Millisecond), rec.Round(100*time.Millisecond))
				row := rows[fault]
				if row == nil {
					row = &faultRow{sink: s.name, fault: fault}
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
				require.LessOrEqual(t, row.recovery, serviceRecoveryBound, "%s: the broker was back, the pipeline was not", row.fault)
			}
		})
	}
}
