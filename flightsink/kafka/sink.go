package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/kafkaconn"
)

// Sink is an exactly-once Kafka sink: every batch and its checkpoint are
// one Kafka transaction. Safe for concurrent use by several pipelines; each
// Writer owns its own transactional producer. See the package
// documentation for the transaction layout and fencing.
type Sink struct {
	cfg     config
	brokers []string
	log     *slog.Logger
	base    []kgo.Opt   // connection options every client of the sink uses
	cl      *kgo.Client // metadata, admin, checkpoint reads; never produces
	adm     *kadm.Client

	cpMu    sync.Mutex
	cpReady bool
}

var (
	_ flightsink.Sink       = (*Sink)(nil)
	_ flightsink.Guaranteer = (*Sink)(nil)
)

// New returns a Sink producing to the Kafka cluster at cfg.Brokers. It
// does not contact the brokers (it makes the admin client, which connects
// on first use): an unreachable cluster or bad credentials surface on the
// first Open or Checkpoint. It validates cfg (brokers given, value format,
// timeouts, SASL mechanism). Close releases the admin client's
// connections.
func New(_ context.Context, cfg Config, opts ...Option) (*Sink, error) {
	brokers := cfg.Brokers
	c, err := fromConfig(cfg)
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if len(brokers) == 0 {
		return nil, fmt.Errorf("%w: kafka sink needs bootstrap servers", flightline.ErrInvalidInput)
	}
	s := &Sink{cfg: c, brokers: brokers, log: c.log.With("sink", "kafka")}
	conn := c.auth
	conn.Brokers, conn.ClientID = brokers, c.clientID
	s.base = conn.Opts(s.log)
	cl, err := kgo.NewClient(s.base...)
	if err != nil {
		return nil, fmt.Errorf("%w: kafka client: %v", flightline.ErrInvalidInput, err)
	}
	s.cl, s.adm = cl, kadm.NewClient(cl)
	return s, nil
}

// Guarantee implements flightsink.Guaranteer: rows and checkpoint commit in
// one Kafka transaction.
func (s *Sink) Guarantee() flightsink.Guarantee { return flightsink.ExactlyOnce }

// Close releases the sink's admin connections. Writers keep their own
// producers until their Close. It returns nil; the error is there so every
// connector closes alike (io.Closer).
func (s *Sink) Close() error {
	s.cl.Close()
	return nil
}

// TransactionalID returns the transactional.id the sink uses for p: the
// prefix and the pipeline id, and, for a target other than the sink's
// default topic, "|" and the target topic, so one pipeline id writing two
// topics does not fence itself.
func (s *Sink) TransactionalID(p flightsink.Pipeline) string {
	p = s.normal(p)
	if p.Target == "" {
		return s.cfg.txnPrefix + p.ID
	}
	return s.cfg.txnPrefix + p.ID + "|" + p.Target
}

// normal names the sink's default topic "" in p, so an empty target and
// the default topic's explicit name are one pipeline.
func (s *Sink) normal(p flightsink.Pipeline) flightsink.Pipeline {
	if p.Target == s.cfg.topic {
		p.Target = ""
	}
	return p
}

// CheckpointKey is the key of p's records on the checkpoint topic: the
// pipeline id for the default target (the layout before targets were
// keys), else the JSON array [pipeline_id, target].
func CheckpointKey(p flightsink.Pipeline) []byte {
	if p.Target == "" {
		return []byte(p.ID)
	}
	b, _ := json.Marshal([2]string{p.ID, p.Target})
	return b
}

func (s *Sink) classify(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return kafkaconn.Classify(fmt.Errorf(format+": %w", append(args, err)...), s.cfg.auth.SASLName)
}

// Checkpoint implements flightsink.Sink: the value of the last committed
// record keyed CheckpointKey(p) on the checkpoint topic, read with
// read_committed up to the end of the partition. It neither claims nor
// fences the pipeline. Transactions still open on the partition (other
// pipelines' batches, which end within moments) are waited for at most 2 s;
// a dead writer's transaction stays open until the broker times it out,
// and then Checkpoint answers from below it rather than stall: the last
// committed checkpoint of the dead writer's own pipeline is there. (A
// checkpoint of ours committed above another pipeline's dead transaction
// is missed until that one ends; the DoPut resume_after check turns such a
// stale answer into a retry, never a duplicate.) A missing checkpoint topic
// means no checkpoint.
func (s *Sink) Checkpoint(ctx context.Context, p flightsink.Pipeline) ([]byte, error) {
	if p.ID == "" {
		return nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	return s.readCheckpoint(ctx, s.normal(p), false)
}

// Open implements flightsink.Sink. It makes sure the checkpoint topic and
// the target topic exist, starts the pipeline's transactional producer —
// whose InitProducerID bumps the producer epoch of the transactional.id,
// fencing every earlier producer of the pipeline and completing (committing
// or aborting) its open transaction — and only then reads the checkpoint,
// so the checkpoint returned is the truth until this Writer commits. ctx
// bounds Open only.
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	if p.ID == "" {
		return nil, nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	topic := s.cfg.topic
	if p.Target != "" {
		topic = p.Target
	}
	if topic == "" {
		return nil, nil, fmt.Errorf("%w: pipeline %q has no target topic and the sink no default Topic", flightline.ErrInvalidInput, p.ID)
	}
	if err := s.ensureCheckpointTopic(ctx); err != nil {
		return nil, nil, err
	}
	ti, err := s.targetTopic(ctx, topic)
	if err != nil {
		return nil, nil, err
	}
	w := &writer{s: s, p: s.normal(p), topic: topic, parts: ti.partitions, maxBytes: ti.maxMessageBytes}
	opts := append(append([]kgo.Opt(nil), s.base...),
		kgo.TransactionalID(s.TransactionalID(p)),
		kgo.TransactionTimeout(s.cfg.txnTimeout),
		kgo.RecordPartitioner(&partitioner{sticky: &w.sticky}),
		kgo.MaxBufferedRecords(s.cfg.maxBufRecords),
		kgo.ProducerBatchMaxBytes(ti.maxMessageBytes),
		kgo.RecordDeliveryTimeout(s.cfg.batchTimeout),
	)
	if w.cl, err = kgo.NewClient(opts...); err != nil {
		return nil, nil, fmt.Errorf("%w: kafka producer: %v", flightline.ErrInvalidInput, err)
	}
	// InitProducerID: fences the previous producer of this transactional.id.
	if _, _, err := w.cl.ProducerID(ctx); err != nil {
		w.cl.Close()
		return nil, nil, s.classify(err, "kafka sink: init producer for %q (transactional.id %q)", p.ID, s.TransactionalID(p))
	}
	cp, err := s.readCheckpoint(ctx, s.normal(p), true)
	if err != nil {
		w.cl.Close()
		return nil, nil, err
	}
	w.last = cp
	s.log.Debug("kafka sink: pipeline opened", "pipeline", p.ID, "topic", topic, "transactional_id", s.TransactionalID(p))
	return w, cp, nil
}

// ensureCheckpointTopic creates the compacted checkpoint topic if missing,
// once per Sink.
func (s *Sink) ensureCheckpointTopic(ctx context.Context) error {
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	if s.cpReady {
		return nil
	}
	_, err := s.partitions(ctx, s.cfg.cpTopic)
	if errors.Is(err, flightline.ErrNotFound) {
		resp, cerr := s.adm.CreateTopic(ctx, 1, -1, map[string]*string{
			"cleanup.policy": kadm.StringPtr("compact"),
			// Roll segments so the cleaner can compact them: it never
			// touches the active segment.
			"segment.ms":                kadm.StringPtr(strconv.Itoa(int((time.Hour).Milliseconds()))),
			"min.cleanable.dirty.ratio": kadm.StringPtr("0.1"),
		}, s.cfg.cpTopic)
		if cerr == nil {
			cerr = resp.Err
		}
		if cerr != nil && !errors.Is(cerr, kerr.TopicAlreadyExists) {
			return s.classify(cerr, "kafka sink: creating checkpoint topic %q", s.cfg.cpTopic)
		}
		if cerr == nil {
			s.log.Info("kafka sink: created compacted checkpoint topic", "topic", s.cfg.cpTopic)
		}
		_, err = s.awaitTopic(ctx, s.cfg.cpTopic)
	}
	if err != nil {
		return err
	}
	s.cpReady = true
	return nil
}

type topicInfo struct {
	partitions      int32
	maxMessageBytes int32
}

// targetTopic checks that topic exists (creating it with
// Config.CreateTopics) and reads its partition count and
// max.message.bytes.
func (s *Sink) targetTopic(ctx context.Context, topic string) (topicInfo, error) {
	n, err := s.partitions(ctx, topic)
	if errors.Is(err, flightline.ErrNotFound) && s.cfg.create {
		resp, cerr := s.adm.CreateTopic(ctx, s.cfg.createParts, s.cfg.createRF, nil, topic)
		if cerr == nil {
			cerr = resp.Err
		}
		if cerr != nil && !errors.Is(cerr, kerr.TopicAlreadyExists) {
			return topicInfo{}, s.classify(cerr, "kafka sink: creating topic %q", topic)
		}
		n, err = s.awaitTopic(ctx, topic)
	}
	if errors.Is(err, flightline.ErrNotFound) {
		return topicInfo{}, fmt.Errorf("%w: Kafka topic %q does not exist on %s and the broker did not auto-create it (create it first, or configure the sink to create missing topics)",
			flightline.ErrNotFound, topic, strings.Join(s.brokers, ","))
	}
	if err != nil {
		return topicInfo{}, err
	}
	cfgs, err := s.adm.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		var rc kadm.ResourceConfig
		if rc, err = cfgs.On(topic, nil); err == nil {
			err = rc.Err
		}
		if err == nil {
			for _, c := range rc.Configs {
				if c.Key == "max.message.bytes" && c.Value != nil {
					v, perr := strconv.ParseInt(*c.Value, 10, 32)
					if perr == nil && v > 0 {
						return topicInfo{partitions: n, maxMessageBytes: int32(v)}, nil
					}
				}
			}
		}
	}
	if err != nil {
		return topicInfo{}, s.classify(err, "kafka sink: describing topic %q", topic)
	}
	return topicInfo{partitions: n, maxMessageBytes: 1048588}, nil // the broker default
}

// awaitTopic waits until a topic just created shows in the metadata.
func (s *Sink) awaitTopic(ctx context.Context, topic string) (int32, error) {
	deadline := time.Now().Add(15 * time.Second)
	for {
		n, err := s.partitions(ctx, topic)
		if !errors.Is(err, flightline.ErrNotFound) || time.Now().After(deadline) {
			return n, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// partitions returns the partition count of topic, asking the broker to
// auto-create it where the broker allows that.
func (s *Sink) partitions(ctx context.Context, topic string) (int32, error) {
	md, err := s.metadata(ctx, topic, true)
	if err != nil {
		return 0, err
	}
	return int32(len(md.Partitions)), nil
}

func (s *Sink) metadata(ctx context.Context, topic string, autoCreate bool) (kmsg.MetadataResponseTopic, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	req.AllowAutoTopicCreation = autoCreate
	for attempt := 0; ; attempt++ {
		resp, err := req.RequestWith(ctx, s.cl)
		if err != nil {
			return kmsg.MetadataResponseTopic{}, s.classify(err, "kafka sink: metadata from %s", strings.Join(s.brokers, ","))
		}
		i := slices.IndexFunc(resp.Topics, func(t kmsg.MetadataResponseTopic) bool { return t.Topic != nil && *t.Topic == topic })
		if i < 0 {
			return kmsg.MetadataResponseTopic{}, fmt.Errorf("%w: Kafka topic %q not in the metadata of %s", flightline.ErrNotFound, topic, strings.Join(s.brokers, ","))
		}
		t := resp.Topics[i]
		err = kerr.ErrorForCode(t.ErrorCode)
		// A topic being auto-created has no leader for a moment.
		if !errors.Is(err, kerr.LeaderNotAvailable) || attempt >= 20 {
			if err != nil {
				return kmsg.MetadataResponseTopic{}, s.classify(err, "kafka sink: metadata of topic %q", topic)
			}
			return t, nil
		}
		select {
		case <-ctx.Done():
			return kmsg.MetadataResponseTopic{}, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
