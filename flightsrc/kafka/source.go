package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/kafkaconn"
	"github.com/flightline/flightline/kafkadecode"
)

// ErrRebalanced is returned by Reader.Next when the consumer group's
// assignment changed under the Reader. It wraps flightline.ErrConflict, so
// the coordinator treats it as retryable: it reopens the sink and reads
// again after the sink's (merged) checkpoint, and the new Reader serves the
// new assignment.
var ErrRebalanced = fmt.Errorf("kafka: consumer group assignment changed; re-read the sink's checkpoint: %w", flightline.ErrConflict)

// Source is a Kafka source: one stream per topic, served from raw fetch
// responses decoded by kafkadecode. Safe for concurrent use. Close it when
// done: it holds broker connections and, with group membership, one group
// member per (group, topic) read.
type Source struct {
	cfg  config
	cl   *kgo.Client // metadata, fetches, offsets; no consumer
	adm  *kadm.Client
	log  *slog.Logger
	lag  *lagMetrics
	opts []kgo.Opt // connection options shared with group members

	mu      sync.Mutex
	members map[memberKey]*member
	closed  bool
}

// BufferBudget is the fetched bytes the source may hold at once by its
// configuration: one fetch response being read (FetchMaxBytes) and the
// fetched bytes queued for decoding (MaxBufferedBytes); 16 MiB at
// defaults. What is decoded from them is bounded by the other options (see
// the package doc and docs/sources/kafka.md); the CLI sizes the Go
// runtime's memory limit from this.
func (s *Source) BufferBudget() int64 {
	return int64(s.cfg.fetchMaxBytes) + s.cfg.maxBuffered
}

var _ flightsrc.Source = (*Source)(nil)

// New returns a Source reading what cfg names. It validates cfg and the
// options (Brokers and one of Topics and TopicRegex are required) and
// creates the Kafka client, but does not contact the brokers: ctx is not
// used today, and a broker that is down is reported by the first Streams or
// Read (flightline.ErrUnavailable). Options apply only here. Close releases
// the client's connections and the consumer group members Reads joined.
func New(ctx context.Context, cfg Config, opts ...Option) (*Source, error) {
	c, err := cfg.config()
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	s := &Source{cfg: c, log: c.log.With("source", "kafka"), members: map[memberKey]*member{}}
	s.opts = c.conn().Opts(s.log)
	cl, err := kgo.NewClient(s.opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: kafka client: %v", flightline.ErrInvalidInput, err)
	}
	s.cl, s.adm = cl, kadm.NewClient(cl)
	s.lag, err = newLagMetrics(c.registry)
	if err != nil {
		cl.Close()
		return nil, err
	}
	return s, nil
}

// Close leaves every consumer group the source joined and closes its
// connections; it returns nil. Call it once, after the Readers are closed:
// Readers still open fail.
func (s *Source) Close() error {
	s.mu.Lock()
	s.closed = true
	ms := make([]*member, 0, len(s.members))
	for _, m := range s.members {
		ms = append(ms, m)
	}
	s.members = map[memberKey]*member{}
	s.mu.Unlock()
	for _, m := range ms {
		m.close()
	}
	s.cl.Close()
	return nil
}

// Streams implements flightsrc.Source: one stream per configured topic that
// exists (or per existing topic matching the regex).
func (s *Source) Streams(ctx context.Context) ([]flightsrc.Stream, error) {
	md, err := s.metadata(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []flightsrc.Stream
	for _, t := range md.Topics {
		name := deref(t.Topic)
		if !s.offers(name) || t.ErrorCode != 0 {
			continue
		}
		sc, err := s.schema(name)
		if err != nil {
			return nil, err
		}
		out = append(out, flightsrc.Stream{Name: name, Schema: sc,
			Description: fmt.Sprintf("Kafka topic %s, %d partitions, on %s", name, len(t.Partitions), strings.Join(s.cfg.brokers, ","))})
	}
	slices.SortFunc(out, func(a, b flightsrc.Stream) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (s *Source) offers(topic string) bool {
	if s.cfg.topicRegex != nil {
		return !strings.HasPrefix(topic, "__") && s.cfg.topicRegex.MatchString(topic)
	}
	return slices.Contains(s.cfg.topics, topic)
}

func (s *Source) schema(topic string) (*arrow.Schema, error) {
	var vt arrow.DataType
	if s.cfg.valueDecoder != nil {
		vd, err := s.cfg.valueDecoder()
		if err != nil {
			return nil, fmt.Errorf("%w: value decoder: %v", flightline.ErrInvalidInput, err)
		}
		vt = vd.Type()
	}
	return kafkadecode.Schema(topic, vt), nil
}

// Commit implements flightsrc.Source: it commits the checkpoint's offsets
// of the stream's topic to the consumer group, advisory, so lag dashboards
// and tools see progress. With group membership only partitions this
// instance currently owns are committed.
func (s *Source) Commit(ctx context.Context, req flightsrc.CommitRequest) error {
	pos, err := checkpoint.Parse(req.Checkpoint)
	if err != nil {
		return fmt.Errorf("%w: kafka checkpoint: %v", flightline.ErrInvalidInput, err)
	}
	group, err := s.group(req.Pipeline)
	if err != nil {
		return err
	}
	offs := map[int32]int64{}
	for k, v := range pos {
		t, p, ok := splitKey(k)
		if ok && t == req.Stream {
			offs[p] = v
		}
	}
	if len(offs) == 0 {
		return nil
	}
	if s.cfg.membership {
		s.mu.Lock()
		m := s.members[memberKey{group, req.Stream}]
		s.mu.Unlock()
		if m == nil {
			return nil // not a member: nothing of ours to commit
		}
		return m.commit(ctx, offs)
	}
	os := kadm.Offsets{}
	for p, o := range offs {
		os.Add(kadm.Offset{Topic: req.Stream, Partition: p, At: o, LeaderEpoch: -1})
	}
	resp, err := s.adm.CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return s.classify(fmt.Errorf("kafka: committing offsets of group %q: %w", group, err))
	}
	s.lag.acknowledged(group, req.Stream, offs)
	return nil
}

func (s *Source) group(pipeline string) (string, error) {
	if s.cfg.group != "" {
		return s.cfg.group, nil
	}
	if pipeline == "" {
		return "", fmt.Errorf("%w: kafka source needs a consumer group: configure group_id or pass a pipeline id", flightline.ErrInvalidInput)
	}
	return pipeline, nil
}

// Read implements flightsrc.Source. Partitions start, in order of
// precedence, at the position req.After names, at the group's committed
// offset, or at the auto_offset_reset policy. With group membership the
// Reader serves the partitions the group assigns to this instance and ends
// with ErrRebalanced when that assignment changes.
func (s *Source) Read(ctx context.Context, req flightsrc.ReadRequest) (flightsrc.Reader, error) {
	if !s.offers(req.Stream) {
		return nil, fmt.Errorf("%w: stream %q is not one of this Kafka source's topics", flightline.ErrNotFound, req.Stream)
	}
	var after checkpoint.Positions
	if req.After != nil {
		p, err := checkpoint.Parse(req.After)
		if err != nil {
			return nil, fmt.Errorf("%w: kafka checkpoint: %v", flightline.ErrInvalidInput, err)
		}
		after = p
	}
	group, err := s.group(req.Pipeline)
	if err != nil {
		return nil, err
	}
	tp, err := s.topic(ctx, req.Stream)
	if err != nil {
		return nil, err
	}
	sc, err := s.schema(req.Stream)
	if err != nil {
		return nil, err
	}
	r := &reader{s: s, topic: req.Stream, topicID: tp.id, group: group, schema: sc, after: after, failCh: make(chan struct{})}
	if s.cfg.membership {
		m, err := s.member(group, req.Stream)
		if err != nil {
			return nil, err
		}
		r.m = m
		m.register(r)
	} else {
		r.assign(tp.partitions, 0)
	}
	return r, nil
}

var _ flightsrc.Preparer = (*Source)(nil)

// Prepare implements flightsrc.Preparer; the coordinator calls it before
// it opens the sink. With group membership it joins the consumer group
// (once per group and topic) and waits for the group's first assignment,
// at most UnavailableAfter (then flightline.ErrUnavailable, retryable),
// and records that a sink checkpoint read from now on is read after the
// current assignment took effect: a Read that follows serves that
// assignment at once instead of ending with ErrRebalanced (see member).
// Without membership it only checks the stream.
func (s *Source) Prepare(ctx context.Context, req flightsrc.PrepareRequest) error {
	if !s.offers(req.Stream) {
		return fmt.Errorf("%w: stream %q is not one of this Kafka source's topics", flightline.ErrNotFound, req.Stream)
	}
	if !s.cfg.membership {
		return nil
	}
	group, err := s.group(req.Pipeline)
	if err != nil {
		return err
	}
	if _, err := s.topic(ctx, req.Stream); err != nil {
		return err // unknown topic, unreachable brokers: before joining
	}
	m, err := s.member(group, req.Stream)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeoutCause(ctx, s.cfg.unavailableAfter,
		fmt.Errorf("%w: kafka: no assignment from consumer group %q for %v", flightline.ErrUnavailable, group, s.cfg.unavailableAfter))
	defer cancel()
	if err := m.prepare(wctx); err != nil {
		if ctx.Err() == nil && context.Cause(wctx) != nil {
			return context.Cause(wctx)
		}
		return err
	}
	return nil
}

func (s *Source) member(group, topic string) (*member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: kafka source closed", flightline.ErrUnavailable)
	}
	k := memberKey{group, topic}
	if m := s.members[k]; m != nil {
		return m, nil
	}
	m, err := newMember(s, group, topic)
	if err != nil {
		return nil, err
	}
	s.members[k] = m
	return m, nil
}

type topicInfo struct {
	id         [16]byte
	partitions []int32
	leaders    map[int32]leader
	addrs      map[int32]string // broker node id → host:port
}

func (t topicInfo) addr(node int32) string {
	if a, ok := t.addrs[node]; ok {
		return a
	}
	return fmt.Sprintf("node %d", node)
}

type leader struct {
	node  int32
	epoch int32
}

// metadata asks for topics (nil: all).
func (s *Source) metadata(ctx context.Context, topics []string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	if topics != nil {
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	} else {
		req.Topics = nil // all topics
	}
	req.AllowAutoTopicCreation = false
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return nil, s.classify(fmt.Errorf("kafka: metadata from %s: %w", strings.Join(s.cfg.brokers, ","), err))
	}
	return resp, nil
}

// topic looks up a topic's id, partitions and leaders.
func (s *Source) topic(ctx context.Context, topic string) (topicInfo, error) {
	md, err := s.metadata(ctx, []string{topic})
	if err != nil {
		return topicInfo{}, err
	}
	for _, t := range md.Topics {
		if deref(t.Topic) != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return topicInfo{}, fmt.Errorf("%w: Kafka topic %q does not exist on %s (topics are not auto-created; create it first)",
					flightline.ErrNotFound, topic, strings.Join(s.cfg.brokers, ","))
			}
			return topicInfo{}, s.classify(fmt.Errorf("kafka: metadata of topic %q: %w", topic, err))
		}
		ti := topicInfo{id: t.TopicID, leaders: map[int32]leader{}, addrs: map[int32]string{}}
		for _, b := range md.Brokers {
			ti.addrs[b.NodeID] = net.JoinHostPort(b.Host, fmt.Sprint(b.Port))
		}
		for _, p := range t.Partitions {
			ti.partitions = append(ti.partitions, p.Partition)
			ti.leaders[p.Partition] = leader{node: p.Leader, epoch: p.LeaderEpoch}
		}
		slices.Sort(ti.partitions)
		return ti, nil
	}
	return topicInfo{}, fmt.Errorf("%w: Kafka topic %q not in the metadata of %s", flightline.ErrNotFound, topic, strings.Join(s.cfg.brokers, ","))
}

// startOffsets resolves where partitions without a checkpoint position
// start: the group's committed offset, else the reset policy.
func (s *Source) startOffsets(ctx context.Context, group, topic string, parts []int32) (map[int32]int64, map[int32]string, error) {
	out := map[int32]int64{}
	why := map[int32]string{}
	if len(parts) == 0 {
		return out, why, nil
	}
	var committed kadm.OffsetResponses
	err := s.retry(ctx, "fetching committed offsets of group "+group, func() (err error) {
		committed, err = s.adm.FetchOffsets(ctx, group)
		if errors.Is(err, kerr.GroupIDNotFound) {
			committed, err = nil, nil // a group that never committed
		}
		return err
	})
	if err != nil {
		return nil, nil, s.classify(fmt.Errorf("kafka: fetching committed offsets of group %q: %w", group, err))
	}
	var rest []int32
	for _, p := range parts {
		if o, ok := committed.Lookup(topic, p); ok && o.Err == nil && o.At >= 0 {
			out[p], why[p] = o.At, "group"
		} else {
			rest = append(rest, p)
		}
	}
	if len(rest) > 0 {
		offs, err := s.resetOffsets(ctx, topic, rest)
		if err != nil {
			return nil, nil, err
		}
		for p, o := range offs {
			out[p], why[p] = o, s.cfg.reset.String()
		}
	}
	return out, why, nil
}

// resetOffsets applies auto_offset_reset to parts.
func (s *Source) resetOffsets(ctx context.Context, topic string, parts []int32) (map[int32]int64, error) {
	var lo kadm.ListedOffsets
	err := s.retry(ctx, "listing "+s.cfg.reset.String()+" offsets of "+topic, func() (err error) {
		switch {
		case s.cfg.reset == Earliest:
			lo, err = s.adm.ListStartOffsets(ctx, topic)
		case s.cfg.readCommitted:
			lo, err = s.adm.ListCommittedOffsets(ctx, topic)
		default:
			lo, err = s.adm.ListEndOffsets(ctx, topic)
		}
		if err == nil {
			err = lo.Error()
		}
		return err
	})
	if err != nil {
		return nil, s.classify(fmt.Errorf("kafka: listing %s offsets of %q: %w", s.cfg.reset, topic, err))
	}
	out := map[int32]int64{}
	for _, p := range parts {
		o, ok := lo.Lookup(topic, p)
		if !ok {
			return nil, fmt.Errorf("%w: kafka: no %s offset for %s/%d", flightline.ErrUnavailable, s.cfg.reset, topic, p)
		}
		out[p] = o.Offset
	}
	return out, nil
}

// retry runs op until it succeeds, fails with an error that is not a
// retriable Kafka protocol error, ctx ends or UnavailableAfter has passed,
// and returns op's last error. A broker that has just started answers
// group requests with COORDINATOR_NOT_AVAILABLE while it creates
// __consumer_offsets, and a new topic's offsets with LEADER_NOT_AVAILABLE,
// for longer than kgo's own request retries last.
func (s *Source) retry(ctx context.Context, what string, op func() error) error {
	deadline := time.Now().Add(s.cfg.unavailableAfter)
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		err := op()
		if err == nil || !kafkaconn.IsRetriableKerr(err) || time.Now().Add(backoff).After(deadline) {
			return err
		}
		s.log.Warn("kafka: retrying", "what", what, "in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// classify wraps err with the flightline sentinel callers branch on.
func (s *Source) classify(err error) error { return kafkaconn.Classify(err, s.cfg.auth.SASLName) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// key returns the checkpoint key of a partition: "<topic>/<partition>".
func key(topic string, p int32) string { return fmt.Sprintf("%s/%d", topic, p) }

func splitKey(k string) (string, int32, bool) {
	i := strings.LastIndexByte(k, '/')
	if i < 0 {
		return "", 0, false
	}
	var p int32
	if _, err := fmt.Sscanf(k[i+1:], "%d", &p); err != nil {
		return "", 0, false
	}
	return k[:i], p, true
}
