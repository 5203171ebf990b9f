package kafka

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/kafkaconn"
)

// DefaultCheckpointTopic is the compacted topic checkpoints are committed
// to, keyed by pipeline id.
const DefaultCheckpointTopic = "__flightline_checkpoints"

// DefaultTransactionalIDPrefix prefixes the pipeline id to make the
// transactional.id of the pipeline's producer.
const DefaultTransactionalIDPrefix = "flightline-"

// Option configures a Sink. Options are validated once, in New.
type Option func(*config) error

type config struct {
	topic         string
	cpTopic       string
	txnPrefix     string
	clientID      string
	partitionCol  string
	createParts   int32
	createRF      int16
	create        bool
	txnTimeout    time.Duration
	batchTimeout  time.Duration
	auth          kafkaconn.Config // TLS, SASL and Dial; Brokers and ClientID are set at connect
	maxBufRecords int
	log           *slog.Logger
}

// Topic sets the default topic rows are produced to. Pipeline.Target
// overrides it when non-empty.
func Topic(name string) Option { return func(c *config) error { c.topic = name; return nil } }

// CheckpointTopic sets the compacted topic checkpoints are committed to
// (default DefaultCheckpointTopic). It is created with
// cleanup.policy=compact and one partition when missing. Never add
// partitions to it: a pipeline's checkpoint lives in the partition its id
// hashes to.
func CheckpointTopic(name string) Option {
	return func(c *config) error {
		if name == "" {
			return fmt.Errorf("%w: empty checkpoint topic", flightline.ErrInvalidInput)
		}
		c.cpTopic = name
		return nil
	}
}

// TransactionalIDPrefix sets the prefix of every pipeline's
// transactional.id (default DefaultTransactionalIDPrefix); the id is the
// prefix followed by the pipeline id, stable across restarts.
func TransactionalIDPrefix(p string) Option {
	return func(c *config) error { c.txnPrefix = p; return nil }
}

// ClientID sets the Kafka client id. Default "flightline-sink".
func ClientID(id string) Option { return func(c *config) error { c.clientID = id; return nil } }

// ValueFormat sets how the value column is encoded into record values.
// Only "raw" (the bytes of a binary column, as they are) exists in this
// version; anything else is refused.
func ValueFormat(f string) Option {
	return func(c *config) error {
		if f != "raw" {
			return fmt.Errorf("%w: kafka sink value_format %q: only raw is supported", flightline.ErrInvalidInput, f)
		}
		return nil
	}
}

// PartitionColumn takes each record's partition from the int32 column
// name. Without it, records go where the default partitioner puts them:
// murmur2 of the key (as the Java client does), and keyless records of one
// batch to one partition, rotating per batch.
func PartitionColumn(name string) Option {
	return func(c *config) error { c.partitionCol = name; return nil }
}

// CreateMissingTopics makes Open create a missing target topic with
// partitions and replicationFactor (-1: the broker's default). Without it,
// a missing topic that the broker does not auto-create fails Open with
// flightline.ErrNotFound.
func CreateMissingTopics(partitions int32, replicationFactor int16) Option {
	return func(c *config) error {
		if partitions < 1 {
			return fmt.Errorf("%w: CreateMissingTopics partitions %d < 1", flightline.ErrInvalidInput, partitions)
		}
		c.create, c.createParts, c.createRF = true, partitions, replicationFactor
		return nil
	}
}

// TransactionTimeout sets transaction.timeout.ms: how long the broker keeps
// a transaction of a crashed writer open before aborting it (a restarted
// writer aborts it at once). Default 60s.
func TransactionTimeout(d time.Duration) Option {
	return func(c *config) error { c.txnTimeout = d; return nil }
}

// BatchTimeout bounds one commit, a WriteBatch or a group's WriteBatches
// (produce, flush and commit); past it the transaction is aborted and the
// call fails with flightline.ErrUnavailable. Default 30s. A group is
// bounded by the server's GroupLimits (64 MiB of Arrow buffers by
// default), so it stays within the same order of time as a large batch.
func BatchTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: batch timeout %v <= 0", flightline.ErrInvalidInput, d)
		}
		c.batchTimeout = d
		return nil
	}
}

// MaxBufferedRecords bounds the records the producer buffers (default
// 100000); Produce blocks while it is reached.
func MaxBufferedRecords(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: max buffered records %d < 1", flightline.ErrInvalidInput, n)
		}
		c.maxBufRecords = n
		return nil
	}
}

// TLS connects to the brokers over TLS with cfg.
func TLS(cfg *tls.Config) Option { return func(c *config) error { c.auth.UseTLS(cfg); return nil } }

// SASLPlain authenticates with SASL/PLAIN.
func SASLPlain(user, pass string) Option {
	return func(c *config) error {
		c.auth.UseSASLPlain(user, pass)
		return nil
	}
}

// SASLScram authenticates with SASL/SCRAM; mechanism is "SCRAM-SHA-256" or
// "SCRAM-SHA-512".
func SASLScram(mechanism, user, pass string) Option {
	return func(c *config) error { return c.auth.UseSASLScram(mechanism, user, pass) }
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
