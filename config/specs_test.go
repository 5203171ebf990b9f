package config

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	kafkasink "github.com/flightline/flightline/flightsink/kafka"
	pgsink "github.com/flightline/flightline/flightsink/postgres"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/spec"
	"github.com/flightline/flightline/internal/testkit/pgtest"
	"github.com/flightline/flightline/internal/testkit/s3test"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// parseAs parses the options of an endpoint spec as kind s declares them.
func parseAs[T any](t *testing.T, s *spec.Spec[T], raw string) T {
	t.Helper()
	_, q, err := parseSpec(raw)
	require.NoError(t, err)
	cfg, err := s.Parse(q)
	require.NoError(t, err, raw)
	return cfg
}

func ptr[T any](v T) *T { return &v }

// Each kind's spec, parsed from a URL, yields the config its options are
// built from: every key lands in its own field.
func TestSpecsYieldTheirConfig(t *testing.T) {
	require.Equal(t, generatorConfig{Rows: 5, BatchRows: 7, Stream: "s", Interval: 3 * time.Millisecond},
		parseAs(t, generatorSpec, "generator:?rows=5&batch_rows=7&stream=s&interval=3ms"))
	require.Equal(t, generatorConfig{Rows: 0, BatchRows: 10000, Stream: "orders"}, parseAs(t, generatorSpec, "generator:"))

	require.Equal(t, kafkaSourceConfig{
		kafkaConn: kafkaConn{Brokers: []string{"h1:1", "h2:2"}, ClientID: ptr("cid"), SASL: "scram-sha-512", User: "u",
			PasswordEnv: "PW", TLS: true, TLSCA: "/ca.pem"},
		Topics: []string{"a", "b"}, TopicRegex: ptr("o-.*"), Group: ptr("g"), Reset: ptr("latest"),
		Isolation: "read_uncommitted", Format: "avro", Schema: "/s.avsc", Registry: "http://reg:8081",
		BatchRows: ptr(500), BatchBytes: ptr(spec.Size(1 << 20)), BatchWait: ptr(100 * time.Millisecond),
		Membership: false, SessionTimeout: ptr(6 * time.Second), InstanceID: ptr("i1"), DeadLetters: "/dl.jsonl",
	}, parseAs(t, kafkaSourceSpec, "kafka:?brokers=h1:1,h2:2&client_id=cid&sasl=SCRAM-SHA-512&user=u&password_env=PW&tls=true&tls_ca=/ca.pem"+
		"&topics=a,b&topic_regex=o-.*&group=g&reset=latest&isolation=read_uncommitted&format=avro&schema=/s.avsc&registry=http://reg:8081"+
		"&batch_rows=500&batch_bytes=1048576&batch_wait=100ms&membership=false&session_timeout=6s&instance_id=i1&dead_letters=/dl.jsonl"))
	require.Equal(t, kafkaSourceConfig{kafkaConn: kafkaConn{Brokers: []string{"h:1"}}, Topics: []string{"t"},
		Isolation: "read_committed", Format: "raw", Membership: true, DeadLetters: "fail"},
		parseAs(t, kafkaSourceSpec, "kafka:?brokers=h:1&topics=t"), "defaults")

	require.Equal(t, kafkaSinkConfig{
		kafkaConn: kafkaConn{Brokers: []string{"h:1"}, ClientID: ptr("c"), SASL: "plain", User: "u", PasswordEnv: "PW", TLSCA: "/ca.pem"},
		Topic:     ptr("t"), CheckpointTopic: "cps", ValueFormat: ptr("raw"), PartitionColumn: ptr("p"), CreateTopics: ptr[int32](3),
		TransactionalIDPrefix: "x-", BatchTimeout: ptr(5 * time.Second), TransactionTimeout: ptr(20 * time.Second),
	}, parseAs(t, kafkaSinkSpec, "kafka:?brokers=h:1&client_id=c&sasl=plain&user=u&password_env=PW&tls_ca=/ca.pem&topic=t&checkpoint_topic=cps"+
		"&value_format=raw&partition_column=p&create_topics=3&transactional_id_prefix=x-&batch_timeout=5s&transaction_timeout=20s"))
	require.Equal(t, kafkaSinkConfig{kafkaConn: kafkaConn{Brokers: []string{"h:1"}},
		CheckpointTopic: kafkasink.DefaultCheckpointTopic, TransactionalIDPrefix: kafkasink.DefaultTransactionalIDPrefix},
		parseAs(t, kafkaSinkSpec, "kafka:?brokers=h:1"), "defaults are the library's")

	require.Equal(t, pgSinkConfig{Table: ptr("sales.orders"), CheckpointTable: "cps", MaxConns: ptr(2), Instance: ptr("h1"),
		Conn: map[string]string{"sslmode": "disable", "application_name": "fl"}},
		parseAs(t, pgSinkSpec, "postgres://u@h:5432/db?sslmode=disable&table=sales.orders&checkpoint_table=cps&max_conns=2&application_name=fl&instance=h1"))
	require.Equal(t, pgSinkConfig{CheckpointTable: pgsink.DefaultCheckpointTable, Conn: map[string]string{}},
		parseAs(t, pgSinkSpec, "postgresql://u@h/db"), "defaults are the library's")
	require.Equal(t, pgSourceConfig{Table: "t", Watermark: "updated_at", Key: "id", Poll: ptr(250 * time.Millisecond), BatchRows: ptr(500),
		Conn: map[string]string{"sslmode": "require"}},
		parseAs(t, pgSourceSpec, "postgres://u@h/db?table=t&watermark=updated_at&key=id&poll=250ms&batch_rows=500&sslmode=require"))

	require.Equal(t, deltaSinkConfig{Instance: "a", CheckpointInterval: 3, SchemaEvolution: true,
		TargetFileSize: 1 << 20, Compact: "off", CompactMinFiles: 7, Vacuum: "off", Mode: "merge", Key: []string{"id", "region"},
		Storage: map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:7070", "AWS_ALLOW_HTTP": "true"}},
		parseAs(t, deltaSinkSpec, "delta:s3://lake/orders?instance=a&checkpoint_interval=3&schema_evolution=true&target_file_size=1MiB&compact=off&compact_min_files=7&vacuum=off&mode=merge&key=id,region&AWS_ENDPOINT_URL=http://127.0.0.1:7070&AWS_ALLOW_HTTP=true"))
	require.Equal(t, deltaSinkConfig{Instance: sinkdelta.DefaultInstance, CheckpointInterval: sinkdelta.DefaultCheckpointInterval,
		TargetFileSize: sinkdelta.DefaultTargetFileSize, Compact: "auto", CompactMinFiles: sinkdelta.DefaultCompactMinFiles, Vacuum: "auto",
		Mode: sinkdelta.ModeAppend, Storage: map[string]string{}},
		parseAs(t, deltaSinkSpec, "delta:/data/orders"), "defaults are the library's")
	require.Equal(t, deltaSourceConfig{Once: true, Stream: ptr("s"), BatchRows: ptr(10), Poll: ptr(time.Second),
		Storage: map[string]string{"AWS_REGION": "eu-west-1"}},
		parseAs(t, deltaSourceSpec, "delta:/data/orders?once=true&stream=s&batch_rows=10&poll=1s&AWS_REGION=eu-west-1"))

	require.Equal(t, s3SinkConfig{objLayout: objLayout{Format: "parquet"}, Commit: "at-least-once", PartSize: 5 << 20, MultipartThreshold: 64 << 20, Storage: map[string]string{"AWS_REGION": "eu-west-1"}},
		parseAs(t, s3SinkSpec, "s3:b/p?commit=at-least-once&part_size=5MiB&multipart_threshold=67108864&AWS_REGION=eu-west-1"))
	require.Equal(t, s3SinkConfig{objLayout: objLayout{Format: "jsonl", PartitionByDay: "ts"}, Commit: "exactly-once", PartSize: objstore.DefaultPartSize, MultipartThreshold: objstore.MultipartThreshold, Storage: map[string]string{}},
		parseAs(t, s3SinkSpec, "s3:b/p?format=jsonl&partition_by_day=ts"))
	require.Equal(t, s3SinkConfig{objLayout: objLayout{Format: "parquet"}, Commit: "exactly-once", PartSize: objstore.DefaultPartSize, MultipartThreshold: objstore.MultipartThreshold, Storage: map[string]string{}},
		parseAs(t, s3SinkSpec, "s3:b/p"), "defaults are the library's; exactly-once")

	require.Equal(t, bqSinkConfig{Table: ptr("orders"), Key: []string{"id", "day"}, CheckpointTable: "_flightline_checkpoints",
		EmulatorHTTP: ptr("http://127.0.0.1:9050"), EmulatorGRPC: ptr("127.0.0.1:9060")},
		parseAs(t, bqSinkSpec, "bigquery:p/d?table=orders&key=id,day&emulator_endpoint=http://127.0.0.1:9050&emulator_grpc=127.0.0.1:9060"))
	require.Equal(t, bqSourceConfig{Table: "ds.orders", Cursor: "seq", Tiebreak: "id", Poll: ptr(250 * time.Millisecond), BatchRows: ptr(500),
		EmulatorHTTP: ptr("http://127.0.0.1:9050"), EmulatorGRPC: ptr("127.0.0.1:9060")},
		parseAs(t, bqSourceSpec, "bigquery:p/d?table=ds.orders&cursor=seq&tiebreak=id&poll=250ms&batch_rows=500&emulator_endpoint=http://127.0.0.1:9050&emulator_grpc=127.0.0.1:9060"))
}

// A bigquery: source without table=, cursor= or tiebreak= is refused when
// it is opened, as are a malformed location, half an emulator address and
// a bad batch size.
func TestBigQuerySourceRefusals(t *testing.T) {
	for raw, want := range map[string]string{
		"bigquery:p/d?table=t&cursor=c":                                      "tiebreak=",
		"bigquery:p/d?cursor=c&tiebreak=k":                                   "table=",
		"bigquery:p?table=t&cursor=c&tiebreak=k":                             "PROJECT/DATASET",
		"bigquery://p/d?table=t&cursor=c&tiebreak=k":                         "PROJECT/DATASET",
		"bigquery:p/d?table=t&cursor=c&tiebreak=k&emulator_grpc=127.0.0.1:1": "go together",
		"bigquery:p/d?table=t&cursor=c&tiebreak=k&batch_rows=0":              "batch rows 0",
		"bigquery:p/d?table=t&cursor=c&tiebreak=k&no_such_option=1":          "no_such_option",
	} {
		_, _, err := openSource(testEnv, raw, flightsrc.ClientConfig{})
		require.ErrorContains(t, err, want, raw)
	}
}

// A bigquery: sink without key= is refused when it is opened, as are a
// malformed location and half an emulator address.
func TestBigQuerySinkRefusals(t *testing.T) {
	for raw, want := range map[string]string{
		"bigquery:p/d?table=t":      "key",
		"bigquery:p/d?table=t&key=": "key",
		"bigquery:p?key=id":         "PROJECT/DATASET",
		"bigquery://p/d?key=id":     "PROJECT/DATASET",
		"bigquery:p/d?key=id&emulator_endpoint=http://127.0.0.1:1": "go together",
	} {
		_, _, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.ErrorContains(t, err, want, raw)
	}
}

// The forms the README, docs/ and the integration tests use keep working.
func TestDocumentedForms(t *testing.T) {
	dir := t.TempDir()
	for _, raw := range []string{
		"dir:" + dir, "memory:", "null:",
		"delta:" + filepath.Join(dir, "t") + "?checkpoint_interval=10",
		"delta:" + filepath.Join(dir, "u") + "?checkpoint_interval=10&instance=a&schema_evolution=true",
		"delta:" + filepath.Join(dir, "v") + "?mode=merge&key=id",
		"kafka:?brokers=k1:9092&topic=orders-mirror&value_format=raw",
		"postgres://loader@db:5432/shop?sslmode=require&table=sales.orders",
		"s3:my-bucket/events?AWS_REGION=eu-west-1",
		"delta:s3://lake/orders?AWS_ENDPOINT_URL=http://127.0.0.1:1&AWS_ALLOW_HTTP=true&AWS_REGION=us-east-1",
		"s3:lake/events?AWS_ENDPOINT_URL=http://127.0.0.1:1&AWS_ALLOW_HTTP=true&AWS_REGION=us-east-1",
		"s3:lake/events?commit=at-least-once&AWS_ENDPOINT_URL=http://127.0.0.1:1&AWS_ALLOW_HTTP=true&AWS_REGION=us-east-1",
		"s3:lake/events?format=csv&partition_by=region&AWS_REGION=us-east-1",
		"kafka:?brokers=127.0.0.1:1&topic=out&transaction_timeout=10s",
		"postgres://u@127.0.0.1:1/db?sslmode=disable&table=orders",
	} {
		_, closeFn, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.NoError(t, err, raw)
		closeFn()
	}
	for _, raw := range []string{
		"generator:?rows=1000000&batch_rows=10000",
		"kafka:?brokers=127.0.0.1:9092&topics=orders&group=orders-pipe&reset=earliest&format=raw",
		"postgres://loader@db:5432/shop?sslmode=verify-full&table=t&watermark=w&key=k",
		"kafka:?brokers=127.0.0.1:1&topics=orders&group=g&reset=earliest",
		"postgres://u@127.0.0.1:1/db?sslmode=disable&table=t&watermark=w&key=k",
	} {
		_, closeFn, err := openSource(testEnv, raw, endpoint.ClientConfig{})
		require.NoError(t, err, raw)
		closeFn()
	}
	_, _, err := openSource(testEnv, "grpc://127.0.0.1:1?colour=blue", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "grpc: unknown option(s) colour")
	_, _, err = openSink(testEnv, "adbc:?uri=x", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "adbc: no driver")
	_, _, err = openSource(testEnv, "adbc:flightsql?uri=grpc://127.0.0.1:1&table=t", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "needs table=, cursor= and tiebreak=")
}

// The bad-value errors keep the cause wrapped, so errors.Is sees through
// them, and never echo a secret.
func TestBadValueErrorsWrap(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for raw, want := range map[string]error{
		"kafka:?brokers=h:1&topics=a&format=json&schema=" + missing:       fs.ErrNotExist,
		"kafka:?brokers=h:1&topics=a&tls_ca=" + missing:                   fs.ErrNotExist,
		"kafka:?brokers=h:1&topics=a&dead_letters=" + missing + "/x.json": fs.ErrNotExist,
		"kafka:?brokers=h:1&topics=a&reset=middle":                        flightline.ErrInvalidInput,
		"kafka:?brokers=h:1&topics=a&batch_bytes=lots":                    spec.ErrSize,
		"generator:?rows=many":                                            flightline.ErrInvalidInput,
	} {
		_, _, err := openSource(testEnv, raw, endpoint.ClientConfig{})
		require.Truef(t, errors.Is(err, want), "%s: %v, want it to wrap %v", raw, err, want)
	}
	_, _, err := openSink(testEnv, "kafka:?brokers=h:1&tls_ca="+missing, endpoint.ClientConfig{})
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, _, err = openSink(testEnv, "s3://b/p?AWS_SECRET_ACCESS_KEY=hunter2", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "want s3:BUCKET/PREFIX")
	require.NotContains(t, err.Error(), "hunter2")
	_, _, err = openSink(testEnv, "postgres://u@h/db?sslpassword=hunter2&table=a.b.c", endpoint.ClientConfig{})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2")
}

// The command's logger reaches every kind that takes one: the sinks log
// "pipeline opened" at debug level through it.
func TestLoggerReachesKinds(t *testing.T) {
	var logs syncBuffer
	e := env{ctx: context.Background(), log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	s, closeFn, err := openSink(e, "delta:"+filepath.Join(t.TempDir(), "t"), endpoint.ClientConfig{})
	require.NoError(t, err)
	defer closeFn()
	w, _, err := s.Open(context.Background(), flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	require.NoError(t, w.Close(context.Background()))
	require.Contains(t, logs.String(), "delta sink: pipeline opened")
	require.True(t, strings.Count(logs.String(), "\n") >= 1)
}

// The same against the real services: the Kafka, S3 and PostgreSQL sinks
// log through the command's logger.
func TestLoggerReachesServiceKinds(t *testing.T) {
	s3opts := s3test.Options(t)
	q := url.Values{}
	for k, v := range s3opts {
		q.Set(k, v)
	}
	dsn := pgtest.DSN(t)
	if strings.Contains(dsn, "?") {
		dsn += "&table=" + pgtest.Name("logger")
	} else {
		dsn += "?table=" + pgtest.Name("logger")
	}
	brokers := servicetest.Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker")
	for want, raw := range map[string]string{
		"s3 sink: pipeline opened":       "s3:" + s3test.Bucket + "/logger?commit=at-least-once&" + q.Encode(), // the exactly-once mode (objsink) logs nothing
		"postgres sink: pipeline opened": dsn,
		"kafka sink: pipeline opened":    "kafka:?create_topics=1&topic=" + pgtest.Name("logger") + "&brokers=" + brokers,
	} {
		var logs syncBuffer
		e := env{ctx: context.Background(), log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		s, closeFn, err := openSink(e, raw, endpoint.ClientConfig{})
		require.NoError(t, err, want)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		w, _, err := s.Open(ctx, flightsink.Pipeline{ID: pgtest.Name("p")})
		require.NoError(t, err, want)
		require.NoError(t, w.Close(ctx))
		cancel()
		closeFn()
		require.Contains(t, logs.String(), want)
	}
}

// Where a built endpoint shows its settings, they are the spec's values.
func TestOptionsReachTheEndpoint(t *testing.T) {
	s, closeFn, err := openSink(testEnv, "kafka:?brokers=127.0.0.1:1&transactional_id_prefix=etl-", endpoint.ClientConfig{})
	require.NoError(t, err)
	require.Equal(t, "etl-p", s.(*kafkasink.Sink).TransactionalID(flightsink.Pipeline{ID: "p"}))
	closeFn()
	s, closeFn, err = openSink(testEnv, "kafka:?brokers=127.0.0.1:1", endpoint.ClientConfig{})
	require.NoError(t, err)
	require.Equal(t, kafkasink.DefaultTransactionalIDPrefix+"p", s.(*kafkasink.Sink).TransactionalID(flightsink.Pipeline{ID: "p"}))
	closeFn()

	// The storage options reach the store: a plain-http endpoint is refused
	// unless AWS_ALLOW_HTTP says otherwise.
	_, _, err = openSink(testEnv, "s3:bkt/events/raw?AWS_REGION=eu-west-1&AWS_ENDPOINT_URL=http://127.0.0.1:1", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "AWS_ALLOW_HTTP")
	s, closeFn, err = openSink(testEnv, "s3:bkt/events/raw?AWS_REGION=eu-west-1&AWS_ENDPOINT_URL=http://127.0.0.1:1&AWS_ALLOW_HTTP=true", endpoint.ClientConfig{})
	require.NoError(t, err)
	require.Equal(t, "s3://bkt/events/raw", s.(s3ObjSink).st.URL())
	closeFn()
	s, closeFn, err = openSink(testEnv, "s3:bkt/events/raw?commit=at-least-once&AWS_REGION=eu-west-1&AWS_ENDPOINT_URL=http://127.0.0.1:1&AWS_ALLOW_HTTP=true", endpoint.ClientConfig{})
	require.NoError(t, err)
	require.Equal(t, "s3://bkt/events/raw", s.(s3AtLeastOnceSink).URL())
	closeFn()

	tbl := filepath.Join(t.TempDir(), "tbl")
	s, closeFn, err = openSink(testEnv, "delta:"+tbl, endpoint.ClientConfig{})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(tbl, "orders"), s.(*sinkdelta.Sink).URL("orders"))
	closeFn()
}

// testEnv is the environment kinds are opened with in tests.
var testEnv = env{ctx: context.Background(), log: slog.New(slog.DiscardHandler)}

// Every kind's options appear in the usage, generated from the specs, and
// secrets are marked as such.
func TestUsageFromSpecs(t *testing.T) {
	u := kindUsage()
	for _, k := range []interface{ Usage() string }{generatorSpec, dirSpec, memorySpec, nullSpec, grpcSpec, kafkaSourceSpec,
		kafkaSinkSpec, pgSinkSpec, pgSourceSpec, deltaSinkSpec, deltaSourceSpec, s3SinkSpec} {
		require.Contains(t, u, k.Usage())
	}
	for _, want := range []string{"registry=STRING", "AWS_SECRET_ACCESS_KEY (secret)", "sslpassword (secret)", "postgresql://"} {
		require.Contains(t, u, want)
	}
	require.Contains(t, SourceUsage(), kafkaSourceSpec.Usage())
	require.NotContains(t, SourceUsage(), kafkaSinkSpec.Usage(), "a side's usage lists only its kinds")
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of loggers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
