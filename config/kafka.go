package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/internal/spec"
	"github.com/flightline/flightline/kafkadecode"
)

// kafkaConn is the connection part of a kafka: source or sink spec.
type kafkaConn struct {
	Brokers     []string `spec:"brokers" doc:"bootstrap brokers, HOST:PORT,HOST:PORT (required)"`
	ClientID    *string  `spec:"client_id" doc:"the Kafka client id"`
	SASL        string   `spec:"sasl" enum:"plain,scram-sha-256,scram-sha-512" doc:"SASL mechanism; none when unset"`
	User        string   `spec:"user" doc:"SASL user"`
	PasswordEnv string   `spec:"password_env" doc:"environment variable holding the SASL password (never put it in the URL)"`
	TLS         bool     `spec:"tls" default:"false" doc:"connect with TLS (system roots unless tls_ca)"`
	TLSCA       string   `spec:"tls_ca" doc:"CA file to verify the brokers; implies tls=true"`
}

// settings resolves the password and the TLS config of c.
func (c kafkaConn) settings(kind string) (pass string, tc *tls.Config, err error) {
	if c.PasswordEnv != "" {
		if pass = os.Getenv(c.PasswordEnv); pass == "" {
			return "", nil, fmt.Errorf("%s: password_env=%s: the variable is unset or empty", kind, c.PasswordEnv)
		}
	}
	if c.TLS || c.TLSCA != "" {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
		if c.TLSCA != "" {
			pem, err := os.ReadFile(c.TLSCA)
			if err != nil {
				return "", nil, spec.Bad(kind, kafkaSourceSpec.Field("tls_ca"), c.TLSCA, err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return "", nil, spec.Bad(kind, kafkaSourceSpec.Field("tls_ca"), c.TLSCA, fmt.Errorf("no PEM certificates"))
			}
		}
	}
	return pass, tc, nil
}

// kafkaSourceConfig is the kafka: source kind.
type kafkaSourceConfig struct {
	kafkaConn
	Topics            []string       `spec:"topics" doc:"topics to read, one stream each (or topic_regex)"`
	TopicRegex        *string        `spec:"topic_regex" doc:"read every topic matching this regular expression"`
	Group             *string        `spec:"group" doc:"consumer group; default: the pipeline id"`
	Reset             *string        `spec:"reset" doc:"earliest or latest: where a partition without a position starts (default earliest)"`
	Isolation         string         `spec:"isolation" enum:"read_committed,read_uncommitted" default:"read_committed" doc:"whether aborted transactions' records are read"`
	Format            string         `spec:"format" enum:"raw,json,avro" default:"raw" doc:"raw: key and value bytes; json, avro: typed columns decoded with schema"`
	Schema            string         `spec:"schema" doc:"Avro record schema file (also describes JSON values); needed by format=json|avro"`
	Registry          string         `spec:"registry" doc:"Confluent schema registry URL: format=avro values in the Confluent wire format, resolved by schema id"`
	BatchRows         *int           `spec:"batch_rows" doc:"rows per batch at most (default 10000)"`
	BatchBytes        *spec.Size     `spec:"batch_bytes" doc:"bytes per batch at most (default 8MiB)"`
	BatchWait         *time.Duration `spec:"batch_wait" doc:"longest wait to fill a batch (default 500ms)"`
	FetchMaxBytes     *spec.Size     `spec:"fetch_max_bytes" doc:"bytes one fetch request asks for at most (default 8MiB)"`
	PartitionMaxBytes *spec.Size     `spec:"partition_max_bytes" doc:"bytes one fetch asks of a partition at most (default 1MiB)"`
	MaxBufferedBytes  *spec.Size     `spec:"max_buffered_bytes" doc:"fetched bytes waiting to be decoded at most (default 8MiB)"`
	DecodeBytes       *spec.Size     `spec:"decode_bytes" doc:"bytes of a fetch decoded at a time (default 256KiB)"`
	MaxParkedBytes    *spec.Size     `spec:"max_parked_bytes" doc:"spare decode buffers kept per partition (default 2MiB)"`
	Membership        bool           `spec:"membership" default:"true" doc:"join the consumer group; false: read every partition, committing nothing to the group"`
	SessionTimeout    *time.Duration `spec:"session_timeout" doc:"consumer group session timeout (default 10s): without instance_id, how long a killed source keeps its partitions"`
	InstanceID        *string        `spec:"instance_id" doc:"static group member id (KIP-345): a restart within the session timeout keeps its partitions"`
	DeadLetters       string         `spec:"dead_letters" default:"fail" doc:"undecodable records: fail the pipeline, or append them to FILE.jsonl and go on (a pipeline of the config file routes them with deadletter_sink instead)"`
	MaxValueBytes     *spec.Size     `spec:"max_value_bytes" doc:"format=json|avro: a record value over this size is a dead letter (stage load), not a row"`
}

var kafkaSourceSpec = spec.New[kafkaSourceConfig]("kafka", "kafka:?brokers=HOST:PORT&topics=T,T&…",
	"Kafka topics, one stream per topic", nil)

func init() {
	sourceKinds["kafka"] = sourceOf(kafkaSourceSpec, openKafka)
}

// options turns c into the source's Config and options; closeFn closes
// what they opened (the dead-letter file).
func (c kafkaSourceConfig) options(e env) (cfg kafka.Config, opts []kafka.Option, closeFn func(), err error) {
	const kind = "kafka"
	bad := func(key, raw string, err error) error { return spec.Bad(kind, kafkaSourceSpec.Field(key), raw, err) }
	// atLeast1 refuses a bound below 1, which kafka.Config would take for
	// its default (0): a key, when given, must be a real bound.
	atLeast1 := func(v int64, format string, args ...any) error {
		if v < 1 {
			return fmt.Errorf("%w: "+format, append([]any{flightline.ErrInvalidInput}, args...)...)
		}
		return nil
	}
	cfg = kafka.Config{Brokers: c.Brokers, Topics: c.Topics}
	if c.TopicRegex != nil {
		cfg.TopicRegex = *c.TopicRegex
	}
	if c.Group != nil {
		cfg.GroupID = *c.Group
	}
	if c.Reset != nil {
		r, err := kafka.ParseReset(*c.Reset)
		if err != nil {
			return cfg, nil, nil, bad("reset", *c.Reset, err)
		}
		cfg.AutoOffsetReset = r
	}
	cfg.ReadUncommitted = c.Isolation == "read_uncommitted"
	if c.BatchRows != nil {
		if err := atLeast1(int64(*c.BatchRows), "batch rows %d < 1", *c.BatchRows); err != nil {
			return cfg, nil, nil, err
		}
		cfg.BatchRows = *c.BatchRows
	}
	if c.BatchBytes != nil {
		if err := atLeast1(int64(*c.BatchBytes), "batch bytes %d < 1", int64(*c.BatchBytes)); err != nil {
			return cfg, nil, nil, err
		}
		cfg.BatchBytes = int(*c.BatchBytes)
	}
	if c.FetchMaxBytes != nil || c.PartitionMaxBytes != nil {
		total, perPart := int64(8<<20), int64(1<<20) // the source's defaults
		if c.FetchMaxBytes != nil {
			total = int64(*c.FetchMaxBytes)
		}
		if c.PartitionMaxBytes != nil {
			perPart = int64(*c.PartitionMaxBytes)
		}
		if total > math.MaxInt32 || perPart > math.MaxInt32 {
			return cfg, nil, nil, bad("fetch_max_bytes", fmt.Sprint(total), fmt.Errorf("fetch sizes are at most 2GiB"))
		}
		if err := atLeast1(min(total, perPart), "fetch max bytes %d/%d", total, perPart); err != nil {
			return cfg, nil, nil, err
		}
		cfg.FetchMaxBytes, cfg.PartitionMaxBytes = int32(total), int32(perPart)
	}
	if c.MaxBufferedBytes != nil {
		if err := atLeast1(int64(*c.MaxBufferedBytes), "max buffered bytes %d", int64(*c.MaxBufferedBytes)); err != nil {
			return cfg, nil, nil, err
		}
		cfg.MaxBufferedBytes = int64(*c.MaxBufferedBytes)
	}
	if c.DecodeBytes != nil {
		if err := atLeast1(int64(*c.DecodeBytes), "decode bytes %d < 1", int64(*c.DecodeBytes)); err != nil {
			return cfg, nil, nil, err
		}
		cfg.DecodeBytes = int(*c.DecodeBytes)
	}
	if c.MaxParkedBytes != nil {
		cfg.MaxParkedBytes = int(*c.MaxParkedBytes)
		if cfg.MaxParkedBytes == 0 {
			cfg.MaxParkedBytes = -1 // keep none
		}
	}
	if c.BatchWait != nil {
		if *c.BatchWait <= 0 {
			return cfg, nil, nil, fmt.Errorf("%w: batch wait %v <= 0", flightline.ErrInvalidInput, *c.BatchWait)
		}
		cfg.BatchWait = *c.BatchWait
	}
	cfg.WithoutGroupMembership = !c.Membership
	if c.SessionTimeout != nil {
		cfg.SessionTimeout = *c.SessionTimeout
	}
	if c.InstanceID != nil {
		cfg.InstanceID = *c.InstanceID
	}
	if c.ClientID != nil {
		cfg.ClientID = *c.ClientID
	}
	pass, tc, err := c.settings(kind)
	if err != nil {
		return cfg, nil, nil, err
	}
	switch c.SASL {
	case "plain", "scram-sha-256", "scram-sha-512":
		cfg.SASL, cfg.User, cfg.Password = strings.ToUpper(c.SASL), c.User, pass
	}
	cfg.TLS = tc
	var newDec func() (kafkadecode.ValueDecoder, error)
	switch c.Format {
	case "raw":
		if c.Schema != "" || c.Registry != "" {
			return cfg, nil, nil, fmt.Errorf("kafka: schema= and registry= need format=json or format=avro")
		}
	case "json", "avro":
		if c.Schema == "" {
			return cfg, nil, nil, fmt.Errorf("kafka: format=%s needs schema=FILE (an Avro record schema, also describing JSON values)", c.Format)
		}
		if c.Format == "json" && c.Registry != "" {
			return cfg, nil, nil, fmt.Errorf("kafka: registry= needs format=avro")
		}
		b, err := os.ReadFile(c.Schema)
		if err != nil {
			return cfg, nil, nil, bad("schema", c.Schema, err)
		}
		avroSchema := string(b)
		if c.Format == "json" {
			sc, err := kafkadecode.SchemaFromAvro(avroSchema)
			if err != nil {
				return cfg, nil, nil, bad("schema", c.Schema, err)
			}
			newDec = func() (kafkadecode.ValueDecoder, error) { return kafkadecode.NewJSONDecoder(sc) }
			break
		}
		var reg *kafkadecode.Registry
		if c.Registry != "" {
			if reg, err = kafkadecode.NewRegistry(c.Registry); err != nil {
				return cfg, nil, nil, bad("registry", c.Registry, err)
			}
		}
		newDec = func() (kafkadecode.ValueDecoder, error) {
			var ao []kafkadecode.AvroOption
			if reg != nil {
				ao = append(ao, kafkadecode.AvroConfluent(), kafkadecode.AvroRegistry(reg, 10*time.Second))
			}
			return kafkadecode.NewAvroDecoder(avroSchema, ao...)
		}
	}
	if c.MaxValueBytes != nil {
		if newDec == nil {
			return cfg, nil, nil, bad("max_value_bytes", fmt.Sprint(int64(*c.MaxValueBytes)), fmt.Errorf("needs format=json or format=avro"))
		}
		newDec = limitValues(newDec, int(*c.MaxValueBytes))
	}
	if newDec != nil {
		opts = append(opts, kafka.ValueDecoder(newDec))
	}
	closeFn = func() {}
	if e.deadLetters != nil {
		if c.DeadLetters != "fail" {
			return cfg, nil, nil, bad("dead_letters", c.DeadLetters, fmt.Errorf("the pipeline routes dead letters itself (deadletter_sink or deadletter: discard)"))
		}
		opts = append(opts, kafka.DeadLetters(e.deadLetters.kafkaHandler()))
	} else if c.DeadLetters != "fail" {
		h, closeDL, err := deadLetterFile(c.DeadLetters)
		if err != nil {
			return cfg, nil, nil, bad("dead_letters", c.DeadLetters, err)
		}
		opts, closeFn = append(opts, kafka.DeadLetters(h)), closeDL
	}
	opts = append(opts, kafka.Logger(e.log))
	if e.reg != nil {
		opts = append(opts, kafka.Registerer(e.reg))
	}
	return cfg, opts, closeFn, nil
}

func openKafka(e env, _ *url.URL, c kafkaSourceConfig) (flightsrc.Source, func(), error) {
	cfg, opts, closeDL, err := c.options(e)
	if err != nil {
		return nil, nil, err
	}
	s, err := kafka.New(e.ctx, cfg, opts...)
	if err != nil {
		closeDL()
		return nil, nil, err
	}
	budget := s.BufferBudget()
	memLimit.addBudget(budget)
	return s, func() { s.Close(); closeDL(); memLimit.addBudget(-budget) }, nil
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

// limitValues wraps the decoders newDec makes so that a value over max
// bytes is refused (a dead letter) instead of decoded.
func limitValues(newDec func() (kafkadecode.ValueDecoder, error), max int) func() (kafkadecode.ValueDecoder, error) {
	return func() (kafkadecode.ValueDecoder, error) {
		d, err := newDec()
		if err != nil {
			return nil, err
		}
		return sizeLimit{ValueDecoder: d, max: max}, nil
	}
}

// sizeLimit is a ValueDecoder refusing values over max bytes.
type sizeLimit struct {
	kafkadecode.ValueDecoder
	max int
}

// errOverSize is wrapped by the error of a value over the size limit.
var errOverSize = errors.New("over the size limit")

func (s sizeLimit) AppendValue(b *array.StructBuilder, value []byte) error {
	if len(value) > s.max {
		b.AppendNulls(1) // the contract: one row, also on error
		return fmt.Errorf("%w: value of %d bytes, max_value_bytes is %d", errOverSize, len(value), s.max)
	}
	return s.ValueDecoder.AppendValue(b, value)
}
