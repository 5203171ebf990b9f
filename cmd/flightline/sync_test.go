package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/internal/testkit/pgtest"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

const orderSchema = `{"type":"record","name":"order","fields":[
 {"name":"order_id","type":"long"},{"name":"item","type":"string"},{"name":"price","type":"double"}]}`

// produce writes values to topic, round-robin over its partitions, keyed
// k<i>, and returns when all are acknowledged.
func produce(t *testing.T, topic string, values [][]byte) {
	t.Helper()
	brokers := servicetest.Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka")
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: v}
	}
	require.NoError(t, cl.ProduceSync(context.Background(), recs...).FirstErr())
}

func orderJSON(i int) []byte {
	return fmt.Appendf(nil, `{"order_id":%d,"item":"item-%d","price":%d.5}`, i, i%7, i)
}

func countRows(t *testing.T, table string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pgtest.Conn(t).QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// sync --once reads a Kafka topic up to the end offsets it found at the
// start, into PostgreSQL, stops there, and says so in one summary line; a
// second run finds the end covered and moves nothing.
func TestSyncOnceKafkaToPostgres(t *testing.T) {
	dsn := servicetest.Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	brokers := servicetest.Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka")
	topic := createTopic(t, "sync", 3)
	const n = 2500
	values := make([][]byte, n)
	for i := range values {
		values[i] = orderJSON(i)
	}
	produce(t, topic, values)
	dir := t.TempDir()
	schema := filepath.Join(dir, "order.avsc")
	require.NoError(t, os.WriteFile(schema, []byte(orderSchema), 0o644))
	table := pgtest.Name("sync_orders")
	path := writeConfig(t, `
sources:
  orders:
    kafka: {brokers: [`+brokers+`], topics: [`+topic+`], format: json, schema: `+schema+`, batch_rows: 400, batch_wait: 100ms}
sinks:
  warehouse:
    postgres: {dsn: '`+dsn+`', table: `+table+`}
pipelines:
  orders:
    source: sources.orders
    sink: sinks.warehouse
    plain_views: true
    id: `+table+`
`)
	logs := captureLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--pipeline", "orders", "--once"}), logs.String())
	require.Equal(t, int64(n), countRows(t, table))
	var distinct int64
	require.NoError(t, pgtest.Conn(t).QueryRow(ctx, "SELECT count(DISTINCT value->>'order_id') FROM "+table).Scan(&distinct))
	require.Equal(t, int64(n), distinct, "each record once")

	summary := regexp.MustCompile(`msg="pipeline sync complete" pipeline=orders rows=(\d+) batches=(\d+) bytes=(\d+) wall=\S+ restarts=\d+ dead_letters=\d+ checkpoint=`)
	m := summary.FindAllStringSubmatch(logs.String(), -1)
	require.Len(t, m, 1, logs.String())
	require.Equal(t, fmt.Sprint(n), m[0][1])
	require.Contains(t, logs.String(), fmt.Sprintf(`%s/0`, topic))

	// Everything is covered: the second run ends at once, moving nothing.
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--once"}), logs.String())
	m = summary.FindAllStringSubmatch(logs.String(), -1)
	require.Len(t, m, 2, logs.String())
	require.Equal(t, "0", m[1][1])
	require.Equal(t, int64(n), countRows(t, table))

	// Records produced after the start are not waited for, but the next
	// run takes them.
	produce(t, topic, [][]byte{orderJSON(n), orderJSON(n + 1)})
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--once"}), logs.String())
	require.Equal(t, int64(n+2), countRows(t, table))
}

// sync --once reads a PostgreSQL table up to the greatest (watermark, key)
// it found at the start.
func TestSyncOncePostgresToPostgres(t *testing.T) {
	dsn := servicetest.Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	src, dst := pgtest.Name("sync_src"), pgtest.Name("sync_dst")
	c := pgtest.Conn(t)
	pgtest.Exec(t, c, "CREATE TABLE "+src+" (id bigint PRIMARY KEY, updated_at bigint NOT NULL, note text)")
	pgtest.Exec(t, c, "INSERT INTO "+src+" SELECT g, g / 10, 'n' || g FROM generate_series(1, 1234) g")
	path := writeConfig(t, `
sources:
  table:
    postgres: {dsn: '`+dsn+`', table: `+src+`, watermark: updated_at, key: id, batch_rows: 100, poll: 100ms}
sinks:
  copy:
    postgres: {dsn: '`+dsn+`', table: `+dst+`}
pipelines:
  copy:
    source: table
    sink: copy
    id: `+dst+`
`)
	logs := captureLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--once"}), logs.String())
	require.Equal(t, int64(1234), countRows(t, dst))
	require.Contains(t, logs.String(), `msg="pipeline sync complete" pipeline=copy rows=1234 `)
	require.Contains(t, logs.String(), `checkpoint="{\"watermark\":\"123\",\"key\":\"1234\"}"`)
}

// Without --once, sync runs until interrupted and stops cleanly.
func TestSyncRunsUntilInterrupted(t *testing.T) {
	dir := t.TempDir()
	path := writeConfig(t, `
sources:
  gen: 'generator:?rows=0&batch_rows=100&interval=10ms'
sinks:
  out: 'dir:`+dir+`'
pipelines:
  p:
    source: gen
    sink: out
`)
	logs := captureLogs(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- syncCommand(ctx, []string{"--config", path}) }()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "committed") || dirHasFiles(dir) }, time.Minute, 50*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, logs.String())
	case <-time.After(time.Minute):
		t.Fatal("sync did not stop")
	}
	// Stopped by a signal, not complete.
	require.Contains(t, logs.String(), `msg="pipeline sync stopped" pipeline=p rows=`)
	require.NotContains(t, logs.String(), `pipeline sync complete`)

	// --once needs a source that ends: an unbounded generator is refused,
	// saying what to do.
	err := syncCommand(context.Background(), []string{"--config", path, "--once"})
	require.ErrorContains(t, err, "unbounded (rows=0) and has no end: give it rows=N")
	require.ErrorContains(t, syncCommand(context.Background(), []string{"--config", path, "--pipeline", "q"}), `"q"`)
}

func dirHasFiles(dir string) bool {
	n := 0
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n++
		}
		return nil
	})
	return n > 0
}

// sync --once reads a Delta table up to the version it found at the
// start: its snapshot first, later commits on the next run.
func TestSyncOnceDelta(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "orders"), filepath.Join(dir, "copy")
	path := writeConfig(t, `
sources:
  gen: 'generator:?rows=3000&batch_rows=500'
  more: 'generator:?rows=700&batch_rows=300'
  table:
    delta: {uri: '`+src+`', batch_rows: 400}
sinks:
  orders:
    delta: {uri: '`+src+`'}
  copy:
    delta: {uri: '`+dst+`'}
pipelines:
  fill:
    source: gen
    sink: orders
  fill_more:
    source: more
    sink: orders
  copy:
    source: table
    sink: copy
`)
	logs := captureLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--pipeline", "fill"}), logs.String())
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--pipeline", "copy", "--once"}), logs.String())
	require.Contains(t, logs.String(), `msg="pipeline sync complete" pipeline=copy rows=3000 `)
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--pipeline", "copy", "--once"}), logs.String())
	require.Contains(t, logs.String(), `msg="pipeline sync complete" pipeline=copy rows=0 `)

	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--pipeline", "fill_more"}), logs.String())
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--pipeline", "copy", "--once"}), logs.String())
	require.Contains(t, logs.String(), `msg="pipeline sync complete" pipeline=copy rows=700 `, "the new commits, read in tail mode")
}

// sync --once shows its progress: plain "sync progress" lines with the
// rows to go, or a bar.
func TestSyncOnceProgress(t *testing.T) {
	dsn := servicetest.Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	src := pgtest.Name("progress_src")
	c := pgtest.Conn(t)
	pgtest.Exec(t, c, "CREATE TABLE "+src+" (id bigint PRIMARY KEY, updated_at bigint NOT NULL)")
	pgtest.Exec(t, c, "INSERT INTO "+src+" SELECT g, g FROM generate_series(1, 2000) g")
	cfg := func(id string) string {
		return writeConfig(t, `
sources:
  table:
    postgres: {dsn: '`+dsn+`', table: `+src+`, watermark: updated_at, key: id, batch_rows: 100}
sinks:
  copy: 'null:'
pipelines:
  copy:
    id: `+id+`
    source: table
    sink: copy
`)
	}
	logs := captureLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, syncCommand(ctx, []string{"--config", cfg("plain"), "--once", "--progress", "plain", "--progress-every", "1ms"}), logs.String())
	require.Regexp(t, `msg="sync progress" pipeline=copy rows=\d+ rows_per_s=\d+ total=2000 `, logs.String())

	require.NoError(t, syncCommand(ctx, []string{"--config", cfg("bar"), "--once", "--progress", "bar"}), logs.String())
	require.Regexp(t, `sync copy +100% .*\(2000/2000, \d+ rows/s\)`, logs.String())
	require.ErrorContains(t, syncCommand(ctx, []string{"--config", cfg("x"), "--once", "--progress", "fancy"}), "--progress")
}
