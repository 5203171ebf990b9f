package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/pgtest"
	"github.com/flightline/flightline/internal/testkit/s3test"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// record is one produced record and what should become of it.
type record struct {
	value  []byte
	good   bool
	reason string // a substring of the dead letter's reason
	stage  string
}

// avroOrder is order_id, item, price in Avro's binary encoding.
func avroOrder(id int64, item string, price float64) []byte {
	b := binary.AppendVarint(nil, id) // zig-zag, as Avro's long
	b = binary.AppendVarint(b, int64(len(item)))
	b = append(b, item...)
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(price))
}

// mixedRecords returns good records of format with malformed ones and
// over-size ones among them.
func mixedRecords(format string, n int) []record {
	var rs []record
	for i := range n {
		switch {
		case i%17 == 5 && format == "json":
			rs = append(rs, record{value: []byte(`{"order_id": 1, "item": "broken`), reason: "", stage: "decode"})
		case i%17 == 5:
			rs = append(rs, record{value: avroOrder(int64(i), "x", 1)[:1], stage: "decode"}) // truncated Avro
		case i%17 == 9 && format == "json":
			rs = append(rs, record{value: avroOrder(int64(i), "item", 2.5), stage: "decode"}) // Avro bytes in a JSON topic
		case i%17 == 9:
			rs = append(rs, record{value: []byte{0x02, 0x10}, stage: "decode"}) // a string that is not there
		case i%17 == 13:
			big := strings.Repeat("z", 400)
			v := fmt.Appendf(nil, `{"order_id":%d,"item":"%s","price":1.5}`, i, big)
			if format == "avro" {
				v = avroOrder(int64(i), big, 1.5)
			}
			rs = append(rs, record{value: v, stage: "load", reason: "over the size limit"})
		default:
			v := orderJSON(i)
			if format == "avro" {
				v = avroOrder(int64(i), fmt.Sprintf("item-%d", i%7), float64(i)+0.5)
			}
			rs = append(rs, record{value: v, good: true})
		}
	}
	return rs
}

// produceRecords writes rs round-robin and returns "partition/offset" of
// each.
func produceRecords(t *testing.T, topic string, rs []record) []string {
	t.Helper()
	brokers := servicetest.Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka")
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	recs := make([]*kgo.Record, len(rs))
	for i, r := range rs {
		recs[i] = &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: r.value}
	}
	res := cl.ProduceSync(context.Background(), recs...)
	require.NoError(t, res.FirstErr())
	out := make([]string, len(rs))
	for _, r := range res {
		// Results need not come in the records' order: the key says which.
		var i int
		_, err := fmt.Sscanf(string(r.Record.Key), "k%d", &i)
		require.NoError(t, err)
		out[i] = fmt.Sprintf("%d/%d", r.Record.Partition, r.Record.Offset)
	}
	return out
}

// deadRow is a dead letter as an independent reader sees it.
type deadRow struct {
	pipeline, stage, reason, topic string
	partition                      int32
	offset                         int64
	key, value                     []byte
}

func deadRowsOf(t *testing.T, rec arrow.RecordBatch) []deadRow {
	col := func(name string) arrow.Array {
		idx := rec.Schema().FieldIndices(name)
		require.Len(t, idx, 1, name)
		return rec.Column(idx[0])
	}
	var out []deadRow
	for i := 0; i < int(rec.NumRows()); i++ {
		out = append(out, deadRow{
			pipeline: col("pipeline").(*array.String).Value(i), stage: col("stage").(*array.String).Value(i),
			reason: col("reason").(*array.String).Value(i), topic: col("topic").(*array.String).Value(i),
			partition: col("partition").(*array.Int32).Value(i), offset: col("offset").(*array.Int64).Value(i),
			key: bytes.Clone(col("key").(*array.Binary).Value(i)), value: bytes.Clone(col("value").(*array.Binary).Value(i)),
		})
	}
	return out
}

// readParquet reads every row of a Parquet file.
func readParquet(t *testing.T, data []byte) []deadRow {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	require.NoError(t, err)
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, mem)
	require.NoError(t, err)
	tbl, err := fr.ReadTable(context.Background())
	require.NoError(t, err)
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 0)
	defer tr.Release()
	var out []deadRow
	for tr.Next() {
		out = append(out, deadRowsOf(t, tr.RecordBatch())...)
	}
	return out
}

// checkOutcome checks, by independent readers, that every good record is
// in the table exactly once and every bad one is among the dead letters
// (at least once) with its stage, reason and offset.
func checkOutcome(t *testing.T, table, topic, pipeline string, rs []record, pos []string, dead []deadRow) {
	t.Helper()
	var wantGood []string
	wantDead := map[string]record{}
	for i, r := range rs {
		if r.good {
			wantGood = append(wantGood, pos[i])
		} else {
			wantDead[pos[i]] = r
		}
	}
	rows, err := pgtest.Conn(t).Query(context.Background(), `SELECT "partition", "offset" FROM `+table)
	require.NoError(t, err)
	var gotGood []string
	for rows.Next() {
		var p int32
		var o int64
		require.NoError(t, rows.Scan(&p, &o))
		gotGood = append(gotGood, fmt.Sprintf("%d/%d", p, o))
	}
	require.NoError(t, rows.Err())
	sort.Strings(wantGood)
	sort.Strings(gotGood)
	require.Equal(t, wantGood, gotGood, "every good record exactly once")

	seen := map[string]bool{}
	for _, d := range dead {
		k := fmt.Sprintf("%d/%d", d.partition, d.offset)
		r, ok := wantDead[k]
		require.Truef(t, ok, "dead letter %s (%s) was not a bad record", k, d.reason)
		require.Equal(t, topic, d.topic)
		require.Equal(t, pipeline, d.pipeline)
		require.Equal(t, r.stage, d.stage, k)
		require.NotEmpty(t, d.reason)
		require.Contains(t, d.reason, r.reason)
		require.Equal(t, r.value, d.value, "the original value bytes")
		require.True(t, bytes.HasPrefix(d.key, []byte("k")))
		seen[k] = true
	}
	for k := range wantDead {
		require.Truef(t, seen[k], "bad record %s has no dead letter", k)
	}
}

func deadLetterConfig(t *testing.T, topic, format, table, dlEntry string) string {
	dir := t.TempDir()
	schema := filepath.Join(dir, "order.avsc")
	require.NoError(t, os.WriteFile(schema, []byte(orderSchema), 0o644))
	return writeConfig(t, `
sources:
  orders:
    kafka: {brokers: ['${FLIGHTLINE_KAFKA_BROKERS}'], topics: [`+topic+`], format: `+format+`, schema: `+schema+`,
            max_value_bytes: 300, batch_rows: 50, batch_wait: 100ms, membership: false}
sinks:
  warehouse:
    postgres: {dsn: '${FLIGHTLINE_PG_DSN}', table: `+table+`}
deadletter_sinks:
  rejects:
`+dlEntry+`
pipelines:
  orders:
    id: `+table+`
    source: sources.orders
    sink: sinks.warehouse
    deadletter_sink: deadletter_sinks.rejects
    plain_views: true
`)
}

// Good JSON records land in PostgreSQL exactly once; malformed JSON, Avro
// bytes and over-size records go to S3 as dead letters.
func TestDeadLettersToS3(t *testing.T) {
	servicetest.Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	opts := s3test.Options(t)
	topic := createTopic(t, "dl-s3", 2)
	rs := mixedRecords("json", 300)
	pos := produceRecords(t, topic, rs)
	table := pgtest.Name("dl_orders")
	prefix := "deadletters/" + table
	var entry strings.Builder
	fmt.Fprintf(&entry, "    s3:\n      prefix: %s/%s\n", s3test.Bucket, prefix)
	for k, v := range opts {
		fmt.Fprintf(&entry, "      %s: '%s'\n", k, v)
	}
	path := deadLetterConfig(t, topic, "json", table, entry.String())
	logs := captureLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--once"}), logs.String())
	require.Contains(t, logs.String(), "dead letters written")
	bad := 0
	for _, r := range rs {
		if !r.good {
			bad++
		}
	}
	require.Regexp(t, fmt.Sprintf(`msg="pipeline sync complete" pipeline=orders rows=%d .* dead_letters=%d `, len(rs)-bad, bad), logs.String())

	// An independent reader: list the objects and read their Parquet.
	st, err := objstore.NewS3(ctx, s3test.Bucket, "", opts)
	require.NoError(t, err)
	var dead []deadRow
	p := s3.NewListObjectsV2Paginator(st.Client(), &s3.ListObjectsV2Input{Bucket: aws.String(s3test.Bucket), Prefix: aws.String(prefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		require.NoError(t, err)
		for _, o := range page.Contents {
			if !strings.HasSuffix(*o.Key, ".parquet") || strings.Contains(*o.Key, "/_") {
				continue // what dataset readers skip: the sink's _flightline/ records and staging
			}
			got, err := st.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s3test.Bucket), Key: o.Key})
			require.NoError(t, err)
			var b bytes.Buffer
			_, err = b.ReadFrom(got.Body)
			got.Body.Close()
			require.NoError(t, err)
			dead = append(dead, readParquet(t, b.Bytes())...)
		}
	}
	require.NotEmpty(t, dead)
	checkOutcome(t, table, topic, "orders", rs, pos, dead)
}

// The same with an Avro topic (truncated payloads, over-size records),
// dead letters into a Delta table read back from its log and files.
func TestDeadLettersToDelta(t *testing.T) {
	servicetest.Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	topic := createTopic(t, "dl-delta", 2)
	rs := mixedRecords("avro", 300)
	pos := produceRecords(t, topic, rs)
	table := pgtest.Name("dl_orders")
	deltaDir := filepath.Join(t.TempDir(), "rejects")
	path := deadLetterConfig(t, topic, "avro", table, "    delta: {uri: '"+deltaDir+"'}\n")
	logs := captureLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--once"}), logs.String())

	deadOf := func() []deadRow { return readDeltaTable(t, deltaDir) }
	dead := deadOf()
	checkOutcome(t, table, topic, "orders", rs, pos, dead)
	bad := 0
	for _, r := range rs {
		if !r.good {
			bad++
		}
	}
	require.Len(t, dead, bad, "exactly once in an exactly-once dead-letter sink")

	// As if the data sink had lost everything after the dead letters were
	// written: the records are read again and their dead letters handed
	// over again; the Delta sink's replay check absorbs the repeats.
	handed := strings.Count(logs.String(), "dead letters written")
	c := pgtest.Conn(t)
	pgtest.Exec(t, c, "UPDATE __flightline_checkpoints SET checkpoint = NULL WHERE pipeline_id = $1", table)
	pgtest.Exec(t, c, "TRUNCATE "+table)
	deleteGroup(t, table) // the source's advisory offsets, which it would start from
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--once"}), logs.String())
	require.Greater(t, strings.Count(logs.String(), "dead letters written"), handed, logs.String())
	dead = deadOf()
	checkOutcome(t, table, topic, "orders", rs, pos, dead)
	require.Len(t, dead, bad, "the repeats were absorbed")
}

func deleteGroup(t *testing.T, group string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(servicetest.Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka"), ",")...))
	require.NoError(t, err)
	defer cl.Close()
	res, err := kadm.NewClient(cl).DeleteGroups(context.Background(), group)
	require.NoError(t, err)
	require.NoError(t, res.Error())
}

// readDeltaTable reads the rows of a local Delta table from its log and
// Parquet files, without Flightline's Delta code.
func readDeltaTable(t *testing.T, deltaDir string) []deadRow {
	logFiles, err := filepath.Glob(filepath.Join(deltaDir, "_delta_log", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, logFiles)
	active := map[string]bool{}
	sort.Strings(logFiles)
	for _, lf := range logFiles {
		b, err := os.ReadFile(lf)
		require.NoError(t, err)
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			var a struct {
				Add    *struct{ Path string } `json:"add"`
				Remove *struct{ Path string } `json:"remove"`
			}
			require.NoError(t, json.Unmarshal(line, &a))
			if a.Add != nil {
				active[a.Add.Path] = true
			}
			if a.Remove != nil {
				delete(active, a.Remove.Path)
			}
		}
	}
	var dead []deadRow
	for f := range active {
		b, err := os.ReadFile(filepath.Join(deltaDir, f))
		require.NoError(t, err)
		dead = append(dead, readParquet(t, b)...)
	}
	return dead
}

// deadletter: discard counts and logs; the default stops with an error
// naming the position and the reason.
func TestDeadLetterDiscardAndFail(t *testing.T) {
	servicetest.Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	topic := createTopic(t, "dl-discard", 1)
	rs := mixedRecords("json", 40)
	produceRecords(t, topic, rs)
	table := pgtest.Name("dl_discard")
	schema := filepath.Join(t.TempDir(), "order.avsc")
	require.NoError(t, os.WriteFile(schema, []byte(orderSchema), 0o644))
	cfg := func(mode string) string {
		return writeConfig(t, `
sources:
  orders:
    kafka: {brokers: ['${FLIGHTLINE_KAFKA_BROKERS}'], topics: [`+topic+`], format: json, schema: `+schema+`, batch_wait: 100ms, max_value_bytes: 300}
sinks:
  warehouse:
    postgres: {dsn: '${FLIGHTLINE_PG_DSN}', table: `+table+`}
pipelines:
  orders:
    id: `+table+`
    source: sources.orders
    sink: sinks.warehouse
    plain_views: true
`+mode)
	}
	logs := captureLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := syncCommand(ctx, []string{"--config", cfg(""), "--once"})
	require.Error(t, err)
	require.Regexp(t, `kafka `+topic+`/0: .*record at partition 0, offset 5: .*JSON syntax error`, err.Error())
	var exists bool
	require.NoError(t, pgtest.Conn(t).QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists))
	if exists {
		require.Equal(t, int64(0), countRows(t, table), "nothing after the bad record is committed")
	}

	require.NoError(t, syncCommand(ctx, []string{"--config", cfg("    deadletter: discard\n"), "--once"}), logs.String())
	good := 0
	for _, r := range rs {
		if r.good {
			good++
		}
	}
	require.Equal(t, int64(good), countRows(t, table))
	require.Contains(t, logs.String(), `msg="dead letters discarded"`)
}
