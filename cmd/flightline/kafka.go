package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/kafkadecode"
)

// kindEnv is what in-process kinds may use from the command that opens
// them: its logger and metrics registry. Commands set it before opening.
var kindEnv struct {
	log *slog.Logger
	reg prometheus.Registerer
}

const kafkaUsage = "kafka:?brokers=H:P,H:P&topics=T,T|topic_regex=RE&group=G&reset=earliest|latest&format=raw|json|avro&schema=AVRO_SCHEMA_FILE" +
	"&isolation=read_committed|read_uncommitted&client_id=ID&batch_rows=N&batch_bytes=N&batch_wait=DUR&membership=true|false" +
	"&fetch_max_bytes=N&partition_max_bytes=N&max_buffered_bytes=N&max_parked_bytes=N&decode_bytes=N" +
	"&session_timeout=DUR&instance_id=ID&sasl=plain|scram-sha-256|scram-sha-512&user=U&password_env=VAR&tls=true&tls_ca=FILE" +
	"&dead_letters=fail|FILE.jsonl  Kafka topics, one stream per topic (group defaults to the pipeline id)"

func init() {
	sourceKinds["kafka"] = sourceKind{usage: kafkaUsage, open: openKafka}
}

func openKafka(_ *url.URL, q query) (flightsrc.Source, func(), error) {
	var opts []kafka.Option
	bad := func(k, v string, err error) error { return fmt.Errorf("kafka: %s=%q: %v", k, v, err) }
	if v, ok := q.take("brokers"); ok {
		opts = append(opts, kafka.Brokers(splitList(v)...))
	}
	if v, ok := q.take("topics"); ok {
		opts = append(opts, kafka.Topics(splitList(v)...))
	}
	if v, ok := q.take("topic_regex"); ok {
		opts = append(opts, kafka.TopicRegex(v))
	}
	if v, ok := q.take("group"); ok {
		opts = append(opts, kafka.GroupID(v))
	}
	if v, ok := q.take("reset"); ok {
		r, err := kafka.ParseReset(v)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, kafka.AutoOffsetReset(r))
	}
	if v, ok := q.take("isolation"); ok {
		switch v {
		case "read_committed":
		case "read_uncommitted":
			opts = append(opts, kafka.ReadUncommitted())
		default:
			return nil, nil, bad("isolation", v, fmt.Errorf("want read_committed or read_uncommitted"))
		}
	}
	for _, k := range []string{"batch_rows", "batch_bytes"} {
		if v, ok := q.take(k); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, nil, bad(k, v, err)
			}
			if k == "batch_rows" {
				opts = append(opts, kafka.BatchRows(n))
			} else {
				opts = append(opts, kafka.BatchBytes(n))
			}
		}
	}
	total, perPart := int64(8<<20), int64(1<<20) // the source's defaults
	fetchSet := false
	for _, k := range []string{"fetch_max_bytes", "partition_max_bytes", "max_buffered_bytes", "max_parked_bytes", "decode_bytes"} {
		v, ok := q.take(k)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return nil, nil, bad(k, v, err)
		}
		switch k {
		case "fetch_max_bytes":
			total, fetchSet = n, true
		case "partition_max_bytes":
			perPart, fetchSet = n, true
		case "max_buffered_bytes":
			opts = append(opts, kafka.MaxBufferedBytes(n))
		case "decode_bytes":
			opts = append(opts, kafka.DecodeBytes(int(n)))
		default:
			opts = append(opts, kafka.MaxParkedBytes(int(n)))
		}
	}
	if fetchSet {
		opts = append(opts, kafka.FetchMaxBytes(int32(total), int32(perPart)))
	}
	for _, k := range []string{"batch_wait", "session_timeout"} {
		if v, ok := q.take(k); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, nil, bad(k, v, err)
			}
			if k == "batch_wait" {
				opts = append(opts, kafka.BatchWait(d))
			} else {
				opts = append(opts, kafka.SessionTimeout(d))
			}
		}
	}
	if v, ok := q.take("membership"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, nil, bad("membership", v, err)
		}
		if !b {
			opts = append(opts, kafka.WithoutGroupMembership())
		}
	}
	if v, ok := q.take("instance_id"); ok {
		opts = append(opts, kafka.InstanceID(v))
	}
	conn, err := kafkaConnOpts(q)
	if err != nil {
		return nil, nil, err
	}
	if conn.clientID != "" {
		opts = append(opts, kafka.ClientID(conn.clientID))
	}
	switch conn.sasl {
	case "plain":
		opts = append(opts, kafka.SASLPlain(conn.user, conn.pass))
	case "scram-sha-256", "scram-sha-512":
		opts = append(opts, kafka.SASLScram(strings.ToUpper(conn.sasl), conn.user, conn.pass))
	}
	if conn.tls != nil {
		opts = append(opts, kafka.TLS(conn.tls))
	}
	format, _ := q.take("format")
	schemaFile, hasSchema := q.take("schema")
	registry, hasRegistry := q.take("registry")
	switch format {
	case "", "raw":
		if hasSchema || hasRegistry {
			return nil, nil, fmt.Errorf("kafka: schema= and registry= need format=json or format=avro")
		}
	case "json", "avro":
		if !hasSchema {
			return nil, nil, fmt.Errorf("kafka: format=%s needs schema=FILE (an Avro record schema, also describing JSON values)", format)
		}
		b, err := os.ReadFile(schemaFile)
		if err != nil {
			return nil, nil, bad("schema", schemaFile, err)
		}
		avroSchema := string(b)
		var reg *kafkadecode.Registry
		if hasRegistry {
			if reg, err = kafkadecode.NewRegistry(registry); err != nil {
				return nil, nil, bad("registry", registry, err)
			}
		}
		if format == "json" {
			sc, err := kafkadecode.SchemaFromAvro(avroSchema)
			if err != nil {
				return nil, nil, bad("schema", schemaFile, err)
			}
			opts = append(opts, kafka.ValueDecoder(func() (kafkadecode.ValueDecoder, error) { return kafkadecode.NewJSONDecoder(sc) }))
		} else {
			opts = append(opts, kafka.ValueDecoder(func() (kafkadecode.ValueDecoder, error) {
				var ao []kafkadecode.AvroOption
				if reg != nil {
					ao = append(ao, kafkadecode.AvroConfluent(), kafkadecode.AvroRegistry(reg, 10*time.Second))
				}
				return kafkadecode.NewAvroDecoder(avroSchema, ao...)
			}))
		}
	default:
		return nil, nil, bad("format", format, fmt.Errorf("want raw, json or avro"))
	}
	closeDL := func() {}
	if v, ok := q.take("dead_letters"); ok && v != "fail" {
		h, c, err := deadLetterFile(v)
		if err != nil {
			return nil, nil, bad("dead_letters", v, err)
		}
		opts, closeDL = append(opts, kafka.DeadLetters(h)), c
	}
	if err := q.done("kafka"); err != nil {
		return nil, nil, err
	}
	if kindEnv.log != nil {
		opts = append(opts, kafka.Logger(kindEnv.log))
	}
	if kindEnv.reg != nil {
		opts = append(opts, kafka.Registerer(kindEnv.reg))
	}
	s, err := kafka.New(opts...)
	if err != nil {
		closeDL()
		return nil, nil, err
	}
	return s, func() { s.Close(); closeDL() }, nil
}

// deadLetterFile appends dead letters as JSON lines to path and syncs the
// file before the handler returns, so a dead letter is on disk before the
// batch after it can be committed.
func deadLetterFile(path string) (kafka.DeadLetterHandler, func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	h := func(_ context.Context, topic string, letters []kafkadecode.DeadLetter) error {
		mu.Lock()
		defer mu.Unlock()
		enc := json.NewEncoder(f)
		for _, d := range letters {
			if err := enc.Encode(map[string]any{"topic": topic, "partition": d.Partition, "offset": d.Offset,
				"timestamp_ms": d.Timestamp, "key": d.Key, "value": d.Value, "error": fmt.Sprint(d.Err)}); err != nil {
				return err
			}
		}
		return f.Sync()
	}
	return h, func() { f.Close() }, nil
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// kafkaConn is the connection part of a kafka: source or sink spec:
// client_id, sasl, user, password_env, tls, tls_ca.
type kafkaConn struct {
	clientID   string
	sasl       string // "", plain, scram-sha-256, scram-sha-512
	user, pass string
	tls        *tls.Config
}

// kafkaConnOpts takes the connection options shared by the kafka: source
// and sink out of q.
func kafkaConnOpts(q query) (kafkaConn, error) {
	var c kafkaConn
	bad := func(k, v string, err error) error { return fmt.Errorf("kafka: %s=%q: %v", k, v, err) }
	c.clientID, _ = q.take("client_id")
	c.user, _ = q.take("user")
	if v, ok := q.take("password_env"); ok {
		c.pass = os.Getenv(v)
		if c.pass == "" {
			return c, fmt.Errorf("kafka: password_env=%s: the variable is unset or empty", v)
		}
	}
	if v, ok := q.take("sasl"); ok {
		switch c.sasl = strings.ToLower(v); c.sasl {
		case "plain", "scram-sha-256", "scram-sha-512":
		default:
			return c, bad("sasl", v, fmt.Errorf("want plain, scram-sha-256 or scram-sha-512"))
		}
	}
	tlsOn, _ := q.take("tls")
	caFile, hasCA := q.take("tls_ca")
	if tlsOn == "true" || hasCA {
		c.tls = &tls.Config{MinVersion: tls.VersionTLS12}
		if hasCA {
			pem, err := os.ReadFile(caFile)
			if err != nil {
				return c, bad("tls_ca", caFile, err)
			}
			c.tls.RootCAs = x509.NewCertPool()
			if !c.tls.RootCAs.AppendCertsFromPEM(pem) {
				return c, bad("tls_ca", caFile, fmt.Errorf("no PEM certificates"))
			}
		}
	}
	return c, nil
}
