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

// Config is what a Kafka source reads and how: the keys of the kafka:
// source kind. The zero value of an optional field means its default.
type Config struct {
	// Brokers are the bootstrap servers, host:port each. Required.
	Brokers []string
	// Topics are the topics the source offers, one stream per topic, named
	// after it. Exactly one of Topics and TopicRegex is required.
	Topics []string
	// TopicRegex offers every topic whose whole name matches it (anchored),
	// as one stream each; internal topics (names starting with "__") never
	// match.
	TopicRegex string
	// GroupID is the consumer group (Python's group_id). Empty: the
	// pipeline id of each Read is the group.
	GroupID string
	// AutoOffsetReset is where partitions start when neither the checkpoint
	// nor the group has a position, and where an out-of-range position
	// jumps. Default (the zero value) Earliest.
	AutoOffsetReset Reset
	// ClientID is the Kafka client id. Default "flightline".
	ClientID string
	// ReadUncommitted returns the records of aborted and open transactions
	// too. The default is read_committed: fetches stop at the last stable
	// offset and aborted transactions are dropped.
	ReadUncommitted bool
	// WithoutGroupMembership makes every Reader serve all partitions of its
	// topic instead of the partitions the consumer group assigns. The group
	// is still used for committed offsets (as a start position) and
	// advisory commits. Use it for a single instance that must not wait for
	// a rebalance, e.g. after a crash while the dead member's session
	// lasts.
	WithoutGroupMembership bool

	// TLS, when set, connects to the brokers over TLS with it (default
	// plaintext).
	TLS *tls.Config
	// SASL is the SASL mechanism: "PLAIN", "SCRAM-SHA-256" or
	// "SCRAM-SHA-512", in any case (default none), with User and Password.
	SASL string
	// User is the SASL user.
	User string
	// Password is the SASL password.
	Password string

	// BatchRows flushes a batch at this many rows. Default 10000.
	BatchRows int
	// BatchBytes flushes a batch once its rows' keys and values reach this
	// many bytes (raw format only; with a ValueDecoder only BatchRows and
	// BatchWait cut batches). Default 8 MiB.
	BatchBytes int
	// BatchWait flushes whatever a partition holds once its oldest
	// unflushed row has waited this long. Default 500ms. Batches cut by the
	// timer are not deterministic (see the package documentation).
	BatchWait time.Duration

	// FetchMaxBytes bounds one fetch response. Default 8 MiB.
	FetchMaxBytes int32
	// PartitionMaxBytes bounds each partition in a fetch response. Default
	// 1 MiB. A record batch larger than it is still returned whole
	// (KIP-74).
	PartitionMaxBytes int32
	// FetchMaxWait is how long the broker may hold a fetch when it has no
	// new data. Default 250ms.
	FetchMaxWait time.Duration
	// MaxBufferedBytes bounds the fetched bytes a Reader holds that Next
	// has not decoded yet; the fetcher waits while it is reached
	// (back-pressure). Default 8 MiB. One fetch round (at most
	// FetchMaxBytes per partition leader) may exceed it once.
	MaxBufferedBytes int64
	// DecodeBytes bounds the fetched bytes decoded in one step: a fetched
	// partition chunk is decoded a piece of whole record batches of at
	// most this many bytes at a time (a batch larger than it is one piece),
	// and batches are cut between pieces. A piece's decompressed records
	// live in one buffer, freed once the last batch pointing into it is
	// released, so the decompressed working set is bounded by DecodeBytes
	// times the compression ratio, whatever the fetch size. Default 256
	// KiB.
	DecodeBytes int
	// MaxParkedBytes bounds, per partition a Reader serves, the freed
	// decoding buffers (column buffers, decompression buffers) its decoder
	// keeps for reuse once the batches using them are released
	// (kafkadecode.WithMaxParkedBytes). Default (0) 2 MiB; a negative value
	// keeps none.
	MaxParkedBytes int
	// UnavailableAfter is how long the fetcher retries unreachable brokers
	// (logging each address) before Next fails with
	// flightline.ErrUnavailable, so the coordinator restarts from the
	// sink's checkpoint. Default 30s.
	UnavailableAfter time.Duration

	// SessionTimeout is the consumer group session timeout. Default 10s;
	// the broker bounds it (group.min.session.timeout.ms, 6s by default).
	// Without an InstanceID, the partitions of a member that was killed
	// stay assigned to it until its session expires, so the session
	// timeout bounds how long a pipeline stalls after its source crashed
	// (issue 16: kgo's 45s default stalled it for 45s). The member only
	// coordinates and heartbeats every SessionTimeout/3 (at most 3s)
	// whatever the pipeline is doing, so a short session does not cause
	// rebalances under load.
	SessionTimeout time.Duration
	// InstanceID makes the group member static (KIP-345): a restarted
	// instance with the same id takes its partitions back without waiting
	// for the old session to expire (a pipeline whose source was killed
	// and restarted commits again within a few seconds). Give every
	// instance of a pipeline its own stable id; two live members with one
	// id fence each other.
	InstanceID string
	// RevokeTimeout bounds how long a revocation waits for the pipeline
	// that served the revoked partitions to stop and reopen its sink.
	// Default 20s.
	RevokeTimeout time.Duration
}

// config turns cfg into the source's settings: defaults for zero fields,
// an error wrapping flightline.ErrInvalidInput for an invalid one.
func (cfg Config) config() (config, error) {
	c := config{
		brokers: cfg.Brokers, topics: cfg.Topics, group: cfg.GroupID, reset: cfg.AutoOffsetReset,
		clientID: "flightline", readCommitted: !cfg.ReadUncommitted, membership: !cfg.WithoutGroupMembership,
		maxRows: 10000, maxBytes: 8 << 20, maxWait: 500 * time.Millisecond,
		fetchMaxBytes: 8 << 20, partitionMaxBytes: 1 << 20, fetchMaxWait: 250 * time.Millisecond,
		maxBuffered: 8 << 20, maxParked: kafkadecode.DefaultMaxParkedBytes, decodeBytes: 256 << 10, unavailableAfter: 30 * time.Second,
		sessionTimeout: 10 * time.Second, instanceID: cfg.InstanceID, revokeTimeout: 20 * time.Second,
		mem: memory.DefaultAllocator, log: slog.Default(),
	}
	if cfg.TopicRegex != "" {
		r, err := regexp.Compile("^(?:" + cfg.TopicRegex + ")$")
		if err != nil {
			return c, fmt.Errorf("%w: topic regex: %v", flightline.ErrInvalidInput, err)
		}
		c.topicRegex = r
	}
	if cfg.ClientID != "" {
		c.clientID = cfg.ClientID
	}
	if cfg.AutoOffsetReset != Earliest && cfg.AutoOffsetReset != Latest {
		return c, fmt.Errorf("%w: auto offset reset %d: want Earliest or Latest", flightline.ErrInvalidInput, cfg.AutoOffsetReset)
	}
	for _, f := range []struct {
		name string
		v    int64
		set  func()
	}{
		{"batch rows", int64(cfg.BatchRows), func() { c.maxRows = cfg.BatchRows }},
		{"batch bytes", int64(cfg.BatchBytes), func() { c.maxBytes = cfg.BatchBytes }},
		{"batch wait", int64(cfg.BatchWait), func() { c.maxWait = cfg.BatchWait }},
		{"fetch max bytes", int64(cfg.FetchMaxBytes), func() { c.fetchMaxBytes = cfg.FetchMaxBytes }},
		{"partition max bytes", int64(cfg.PartitionMaxBytes), func() { c.partitionMaxBytes = cfg.PartitionMaxBytes }},
		{"fetch max wait", int64(cfg.FetchMaxWait), func() { c.fetchMaxWait = cfg.FetchMaxWait }},
		{"max buffered bytes", cfg.MaxBufferedBytes, func() { c.maxBuffered = cfg.MaxBufferedBytes }},
		{"decode bytes", int64(cfg.DecodeBytes), func() { c.decodeBytes = cfg.DecodeBytes }},
		{"unavailable after", int64(cfg.UnavailableAfter), func() { c.unavailableAfter = cfg.UnavailableAfter }},
		{"session timeout", int64(cfg.SessionTimeout), func() { c.sessionTimeout = cfg.SessionTimeout }},
		{"revoke timeout", int64(cfg.RevokeTimeout), func() { c.revokeTimeout = cfg.RevokeTimeout }},
	} {
		if f.v < 0 {
			return c, fmt.Errorf("%w: kafka source: %s %d < 0", flightline.ErrInvalidInput, f.name, f.v)
		}
		if f.v > 0 {
			f.set()
		}
	}
	switch {
	case cfg.MaxParkedBytes < 0:
		c.maxParked = 0
	case cfg.MaxParkedBytes > 0:
		c.maxParked = cfg.MaxParkedBytes
	}
	if cfg.TLS != nil {
		c.auth.UseTLS(cfg.TLS)
	}
	if err := c.auth.UseSASL(cfg.SASL, cfg.User, cfg.Password); err != nil {
		return c, err
	}
	return c, nil
}

// Option sets what a Config cannot hold: decoding and dead-letter hooks,
// an allocator, a logger, a metrics registerer, a test dialer. Options
// apply only in New.
type Option func(*config) error

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
