package kafka

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/kafkaconn"
	"github.com/flightline/flightline/kafkadecode"
)

// Reset is the auto_offset_reset policy: where a partition starts when
// neither the ticket's checkpoint nor the group names a position, and where
// it jumps when its position is out of range.
type Reset int8

const (
	// Earliest starts at the log start offset.
	Earliest Reset = iota
	// Latest starts at the end of the log (the last stable offset under
	// read_committed, the high watermark otherwise).
	Latest
)

func (r Reset) String() string {
	if r == Latest {
		return "latest"
	}
	return "earliest"
}

// ParseReset parses "earliest" or "latest".
func ParseReset(s string) (Reset, error) {
	switch s {
	case "earliest", "smallest", "beginning":
		return Earliest, nil
	case "latest", "largest", "end":
		return Latest, nil
	}
	return 0, fmt.Errorf("%w: auto_offset_reset %q: want earliest or latest", flightline.ErrInvalidInput, s)
}

// DeadLetterHandler receives the records the source could not decode (a
// value its ValueDecoder rejected, or a whole batch failing its CRC or
// structure checks, with the raw batch as Value). It runs on the Reader's
// goroutine before the batch holding the neighbouring rows is returned; an
// error stops the Reader (non-retryable when it wraps
// flightline.ErrInvalidInput). Dead letters are delivered at least once: a
// pipeline that restarts before the surrounding batch is committed hands
// them over again.
type DeadLetterHandler func(ctx context.Context, topic string, letters []kafkadecode.DeadLetter) error

type config struct {
	brokers       []string
	topics        []string
	topicRegex    *regexp.Regexp
	group         string
	reset         Reset
	clientID      string
	readCommitted bool
	auth          kafkaconn.Config // TLS, SASL and Dial; Brokers and ClientID are set at connect
	valueDecoder  func() (kafkadecode.ValueDecoder, error)
	deadLetters   DeadLetterHandler
	membership    bool

	maxRows, maxBytes int
	maxWait           time.Duration

	fetchMaxBytes, partitionMaxBytes int32
	fetchMaxWait                     time.Duration
	maxBuffered                      int64
	maxParked                        int
	decodeBytes                      int
	unavailableAfter                 time.Duration

	sessionTimeout time.Duration
	instanceID     string
	revokeTimeout  time.Duration

	mem      memory.Allocator
	log      *slog.Logger
	registry prometheus.Registerer
}

// Option configures a Source. Options are validated once, in New.
type Option func(*config) error

// Brokers sets the bootstrap servers, host:port each. Required.
func Brokers(addrs ...string) Option {
	return func(c *config) error { c.brokers = append(c.brokers, addrs...); return nil }
}

// Topics sets the topics the source offers, one stream per topic, named
// after it.
func Topics(topics ...string) Option {
	return func(c *config) error { c.topics = append(c.topics, topics...); return nil }
}

// TopicRegex offers every topic whose whole name matches re (anchored), as
// one stream each; internal topics (names starting with "__") never match.
func TopicRegex(re string) Option {
	return func(c *config) error {
		r, err := regexp.Compile("^(?:" + re + ")$")
		if err != nil {
			return fmt.Errorf("%w: topic regex: %v", flightline.ErrInvalidInput, err)
		}
		c.topicRegex = r
		return nil
	}
}

// GroupID sets the consumer group (Python's group_id). Without it, the
// pipeline id of each Read is the group.
func GroupID(g string) Option { return func(c *config) error { c.group = g; return nil } }

// AutoOffsetReset sets where partitions start when neither the checkpoint
// nor the group has a position, and where an out-of-range position jumps.
// Default Earliest.
func AutoOffsetReset(r Reset) Option { return func(c *config) error { c.reset = r; return nil } }

// ClientID sets the Kafka client id. Default "flightline".
func ClientID(id string) Option { return func(c *config) error { c.clientID = id; return nil } }

// ReadUncommitted returns the records of aborted and open transactions too.
// The default is read_committed: fetches stop at the last stable offset and
// aborted transactions are dropped.
func ReadUncommitted() Option { return func(c *config) error { c.readCommitted = false; return nil } }

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
// it to cut the network).
func Dialer(fn func(ctx context.Context, network, host string) (net.Conn, error)) Option {
	return func(c *config) error { c.auth.UseDialer(fn); return nil }
}

// conn is the connection configuration the sink shares.
func (c *config) conn() kafkaconn.Config {
	conn := c.auth
	conn.Brokers, conn.ClientID = c.brokers, c.clientID
	return conn
}

// ValueDecoder decodes record values into a struct column with a decoder
// from newDecoder (kafkadecode.NewJSONDecoder, NewAvroDecoder, ...). Each
// partition a Reader serves gets its own decoder, so newDecoder is called
// several times and must return independent decoders of the same type.
// Without it the value column is the raw bytes (format "raw").
func ValueDecoder(newDecoder func() (kafkadecode.ValueDecoder, error)) Option {
	return func(c *config) error { c.valueDecoder = newDecoder; return nil }
}

// DeadLetters routes undecodable records and corrupt batches to h. Without
// it they stop the Reader with an error that names the partition and
// offset (fail fast); they are never dropped silently.
func DeadLetters(h DeadLetterHandler) Option {
	return func(c *config) error { c.deadLetters = h; return nil }
}

// WithoutGroupMembership makes every Reader serve all partitions of its
// topic instead of the partitions the consumer group assigns. The group is
// still used for committed offsets (as a start position) and advisory
// commits. Use it for a single instance that must not wait for a
// rebalance, e.g. after a crash while the dead member's session lasts.
func WithoutGroupMembership() Option {
	return func(c *config) error { c.membership = false; return nil }
}

// BatchRows flushes a batch at n rows. Default 10000.
func BatchRows(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: batch rows %d < 1", flightline.ErrInvalidInput, n)
		}
		c.maxRows = n
		return nil
	}
}

// BatchBytes flushes a batch once its rows' keys and values reach n bytes
// (raw format only; with a ValueDecoder only BatchRows and BatchWait cut
// batches). Default 8 MiB.
func BatchBytes(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: batch bytes %d < 1", flightline.ErrInvalidInput, n)
		}
		c.maxBytes = n
		return nil
	}
}

// BatchWait flushes whatever a partition holds once its oldest unflushed
// row has waited d. Default 500ms. Batches cut by the timer are not
// deterministic (see the package documentation).
func BatchWait(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: batch wait %v <= 0", flightline.ErrInvalidInput, d)
		}
		c.maxWait = d
		return nil
	}
}

// FetchMaxBytes bounds one fetch response and each partition in it.
// Defaults 8 MiB and 1 MiB. A record batch larger than the partition
// bound is still returned whole (KIP-74).
func FetchMaxBytes(total, perPartition int32) Option {
	return func(c *config) error {
		if total < 1 || perPartition < 1 {
			return fmt.Errorf("%w: fetch max bytes %d/%d", flightline.ErrInvalidInput, total, perPartition)
		}
		c.fetchMaxBytes, c.partitionMaxBytes = total, perPartition
		return nil
	}
}

// FetchMaxWait is how long the broker may hold a fetch when it has no new
// data. Default 250ms.
func FetchMaxWait(d time.Duration) Option {
	return func(c *config) error { c.fetchMaxWait = d; return nil }
}

// MaxBufferedBytes bounds the fetched bytes a Reader holds that Next has
// not decoded yet; the fetcher waits while it is reached (back-pressure).
// Default 8 MiB. One fetch round (at most FetchMaxBytes per partition
// leader) may exceed it once.
func MaxBufferedBytes(n int64) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: max buffered bytes %d", flightline.ErrInvalidInput, n)
		}
		c.maxBuffered = n
		return nil
	}
}

// DecodeBytes bounds the fetched bytes decoded in one step: a fetched
// partition chunk is decoded a piece of whole record batches of at most n
// bytes at a time (a batch larger than n is one piece), and batches are cut
// between pieces. A piece's decompressed records live in one buffer, freed
// once the last batch pointing into it is released, so the decompressed
// working set is bounded by n times the compression ratio, whatever the
// fetch size. Default 256 KiB.
func DecodeBytes(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("%w: decode bytes %d < 1", flightline.ErrInvalidInput, n)
		}
		c.decodeBytes = n
		return nil
	}
}

// MaxParkedBytes bounds, per partition a Reader serves, the freed decoding
// buffers (column buffers, decompression buffers) its decoder keeps for
// reuse once the batches using them are released
// (kafkadecode.WithMaxParkedBytes). Default 2 MiB; 0 keeps none.
func MaxParkedBytes(n int) Option {
	return func(c *config) error {
		if n < 0 {
			return fmt.Errorf("%w: max parked bytes %d", flightline.ErrInvalidInput, n)
		}
		c.maxParked = n
		return nil
	}
}

// UnavailableAfter is how long the fetcher retries unreachable brokers
// (logging each address) before Next fails with flightline.ErrUnavailable,
// so the coordinator restarts from the sink's checkpoint. Default 30s.
func UnavailableAfter(d time.Duration) Option {
	return func(c *config) error { c.unavailableAfter = d; return nil }
}

// SessionTimeout sets the consumer group session timeout. Default 10s; the
// broker bounds it (group.min.session.timeout.ms, 6s by default). Without
// an InstanceID, the partitions of a member that was killed stay assigned
// to it until its session expires, so the session timeout bounds how long a
// pipeline stalls after its source crashed (issue 16: kgo's 45s default
// stalled it for 45s). The member only coordinates and heartbeats every
// SessionTimeout/3 (at most 3s) whatever the pipeline is doing, so a short
// session does not cause rebalances under load.
func SessionTimeout(d time.Duration) Option {
	return func(c *config) error { c.sessionTimeout = d; return nil }
}

// InstanceID makes the group member static (KIP-345): a restarted
// instance with the same id takes its partitions back without waiting for
// the old session to expire (a pipeline whose source was killed and
// restarted commits again within a few seconds). Give every instance of a
// pipeline its own stable id; two live members with one id fence each
// other.
func InstanceID(id string) Option { return func(c *config) error { c.instanceID = id; return nil } }

// RevokeTimeout bounds how long a revocation waits for the pipeline that
// served the revoked partitions to stop and reopen its sink. Default 20s.
func RevokeTimeout(d time.Duration) Option {
	return func(c *config) error { c.revokeTimeout = d; return nil }
}

// Allocator sets the allocator batches are built with; nil means
// memory.DefaultAllocator, the default.
func Allocator(mem memory.Allocator) Option {
	return func(c *config) error {
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		c.mem = mem
		return nil
	}
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

// Registerer registers the per-partition lag gauges with r.
func Registerer(r prometheus.Registerer) Option {
	return func(c *config) error { c.registry = r; return nil }
}

func (c *config) validate() error {
	if len(c.brokers) == 0 {
		return fmt.Errorf("%w: kafka source needs bootstrap servers", flightline.ErrInvalidInput)
	}
	if (len(c.topics) == 0) == (c.topicRegex == nil) {
		return fmt.Errorf("%w: kafka source needs either a topic list or a topic regex", flightline.ErrInvalidInput)
	}
	if c.maxWait <= 0 {
		return fmt.Errorf("%w: batch wait must be > 0", flightline.ErrInvalidInput)
	}
	return nil
}
