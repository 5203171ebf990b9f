package kafka

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/changes"
	"github.com/flightline/flightline/internal/kafkaconn"
)

// DefaultCheckpointTopic is the compacted topic checkpoints are committed
// to, keyed by pipeline id.
const DefaultCheckpointTopic = "__flightline_checkpoints"

// DefaultTransactionalIDPrefix prefixes the pipeline id to make the
// transactional.id of the pipeline's producer.
const DefaultTransactionalIDPrefix = "flightline-"

// Config is what a kafka sink is given in its URL or YAML.
type Config struct {
	// Brokers are the bootstrap servers, host:port each. Required.
	Brokers []string
	// Topic is the default topic rows are produced to. Pipeline.Target
	// overrides it when non-empty.
	Topic string
	// CheckpointTopic is the compacted topic checkpoints are committed to
	// (default DefaultCheckpointTopic). It is created with
	// cleanup.policy=compact and one partition when missing. Never add
	// partitions to it: a pipeline's checkpoint lives in the partition its
	// id hashes to.
	CheckpointTopic string
	// TransactionalIDPrefix is the prefix of every pipeline's
	// transactional.id (default DefaultTransactionalIDPrefix); the id is
	// the prefix followed by the pipeline id, stable across restarts.
	TransactionalIDPrefix string
	// ClientID is the Kafka client id (default "flightline-sink").
	ClientID string
	// ValueFormat is how a row becomes its record's value: ValueRaw (the
	// default) takes the bytes of the binary "value" column as they are;
	// ValueJSON encodes the row as one JSON object of its columns (keys in
	// column order), less the columns that route the record (a "headers"
	// column, the PartitionColumn, and the "key" column where Key is
	// empty) and, where Key is set, the change columns (_op, _lsn,
	// _commit_time). Anything else is refused.
	ValueFormat string
	// Key are the key columns: set, the sink is keyed by them for a
	// change stream (package internal/changes): each record's key is the
	// key columns' value, the bytes of the column where Key is one string
	// or binary column, else a JSON object of the key columns in Key's
	// order ({"id":1}, as Debezium's JSON key without its schema); a row
	// whose _op is "delete" becomes a tombstone (a null value) with that
	// key, so a compacted topic ends with one record per live key. A null
	// key value or an _op other than insert, update or delete refuses the
	// batch (ErrInvalidInput), a key column missing from it too
	// (ErrSchemaMismatch), before anything is produced. Empty (the
	// default): the key is the optional "key" column and _op is not read.
	Key []string
	// PartitionColumn names the int32 column each record's partition is
	// taken from. Empty (the default): records go where the default
	// partitioner puts them: murmur2 of the key (as the Java client does),
	// and keyless records of one batch to one partition, rotating per
	// batch.
	PartitionColumn string
	// CreateTopics, when positive, makes Open create a missing target
	// topic with this many partitions and CreateReplicationFactor
	// replicas. Zero (the default): a missing topic that the broker does
	// not auto-create fails Open with flightline.ErrNotFound.
	CreateTopics int32
	// CreateReplicationFactor is the replication factor of topics
	// CreateTopics creates (default -1: the broker's default).
	CreateReplicationFactor int16
	// TransactionTimeout is transaction.timeout.ms: how long the broker
	// keeps a transaction of a crashed writer open before aborting it (a
	// restarted writer aborts it at once). Default 60s.
	TransactionTimeout time.Duration
	// BatchTimeout bounds one commit, a WriteBatch or a group's
	// WriteBatches (produce, flush and commit); past it the transaction is
	// aborted and the call fails with flightline.ErrUnavailable. Default
	// 30s. A group is bounded by the server's GroupLimits (64 MiB of Arrow
	// buffers by default), so it stays within the same order of time as a
	// large batch.
	BatchTimeout time.Duration
	// MaxBufferedRecords bounds the records the producer buffers (default
	// 100000); Produce blocks while it is reached.
	MaxBufferedRecords int
	// TLS, when set, connects to the brokers over TLS with it (default
	// plaintext).
	TLS *tls.Config
	// SASL is the SASL mechanism: "PLAIN", "SCRAM-SHA-256" or
	// "SCRAM-SHA-512" (default none), with User and Password.
	SASL string
	// User is the SASL user.
	User string
	// Password is the SASL password.
	Password string
}

// The values of Config.ValueFormat.
const (
	ValueRaw  = "raw"
	ValueJSON = "json"
)

// Option configures a Sink beyond its Config. Options are validated once,
// in New.
type Option func(*config) error

type config struct {
	topic         string
	cpTopic       string
	txnPrefix     string
	clientID      string
	partitionCol  string
	json          bool     // ValueFormat ValueJSON
	key           []string // Config.Key
	createParts   int32
	createRF      int16
	create        bool
	txnTimeout    time.Duration
	batchTimeout  time.Duration
	auth          kafkaconn.Config // TLS, SASL and Dial; Brokers and ClientID are set at connect
	maxBufRecords int
	log           *slog.Logger
}

// fromConfig validates cfg and turns it into the sink's settings, defaults
// filled in.
func fromConfig(cfg Config) (config, error) {
	c := config{
		topic: cfg.Topic, cpTopic: cfg.CheckpointTopic, txnPrefix: cfg.TransactionalIDPrefix, clientID: cfg.ClientID,
		partitionCol: cfg.PartitionColumn, txnTimeout: cfg.TransactionTimeout, batchTimeout: cfg.BatchTimeout,
		maxBufRecords: cfg.MaxBufferedRecords, log: slog.Default(),
	}
	if c.cpTopic == "" {
		c.cpTopic = DefaultCheckpointTopic
	}
	if c.txnPrefix == "" {
		c.txnPrefix = DefaultTransactionalIDPrefix
	}
	if c.clientID == "" {
		c.clientID = "flightline-sink"
	}
	switch cfg.ValueFormat {
	case "", ValueRaw:
	case ValueJSON:
		c.json = true
	default:
		return c, fmt.Errorf("%w: kafka sink value_format %q: want %s or %s", flightline.ErrInvalidInput, cfg.ValueFormat, ValueRaw, ValueJSON)
	}
	for _, k := range cfg.Key {
		if k == "" {
			return c, fmt.Errorf("%w: kafka sink: empty key column", flightline.ErrInvalidInput)
		}
		if changes.IsChangeColumn(k) {
			return c, fmt.Errorf("%w: kafka sink: key column %q is a change column", flightline.ErrInvalidInput, k)
		}
		if k == cfg.PartitionColumn {
			return c, fmt.Errorf("%w: kafka sink: key column %q is the partition column", flightline.ErrInvalidInput, k)
		}
	}
	c.key = slices.Clone(cfg.Key)
	switch {
	case cfg.CreateTopics < 0:
		return c, fmt.Errorf("%w: create topics partitions %d < 1", flightline.ErrInvalidInput, cfg.CreateTopics)
	case cfg.CreateTopics > 0:
		c.create, c.createParts, c.createRF = true, cfg.CreateTopics, cfg.CreateReplicationFactor
		if c.createRF == 0 {
			c.createRF = -1
		}
	}
	if c.txnTimeout == 0 {
		c.txnTimeout = 60 * time.Second
	}
	switch {
	case c.batchTimeout == 0:
		c.batchTimeout = 30 * time.Second
	case c.batchTimeout < 0:
		return c, fmt.Errorf("%w: batch timeout %v <= 0", flightline.ErrInvalidInput, c.batchTimeout)
	}
	switch {
	case c.maxBufRecords == 0:
		c.maxBufRecords = 100_000
	case c.maxBufRecords < 0:
		return c, fmt.Errorf("%w: max buffered records %d < 1", flightline.ErrInvalidInput, c.maxBufRecords)
	}
	if cfg.TLS != nil {
		c.auth.UseTLS(cfg.TLS)
	}
	if err := c.auth.UseSASL(cfg.SASL, cfg.User, cfg.Password); err != nil {
		return c, err
	}
	return c, nil
}

// Dialer sets the function broker connections are dialed with (tests use
// it to cut the network mid-transaction).
func Dialer(fn func(ctx context.Context, network, host string) (net.Conn, error)) Option {
	return func(c *config) error { c.auth.UseDialer(fn); return nil }
}

// Logger sets the logger; nil means slog.Default(), the default.
func Logger(l *slog.Logger) Option {
	return func(c *config) error {
		if l == nil {
			l = slog.Default()
		}
		c.log = l
		return nil
	}
}
