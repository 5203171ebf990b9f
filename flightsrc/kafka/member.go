package kafka

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flightline/flightline"
)

type memberKey struct{ group, topic string }

// member is this process's membership in one consumer group for one topic.
// kgo runs the group protocol (join, sync, heartbeats, cooperative-sticky
// assignment); its own fetching is paused for good, the Readers fetch.
//
// The member outlives Readers, so a pipeline restarting its Reader does not
// cause a rebalance. Readers snapshot the assignment at Read; any change
// ends them with ErrRebalanced. Two rules make a rebalance exactly-once
// when the sink merges per-partition positions:
//
//  1. A revocation (kgo's OnPartitionsRevoked, which the group waits for)
//     returns only after every Reader serving the revoked partitions has
//     been Closed and a later Read has begun. The coordinator's next Read
//     follows its next Sink.Open, which fences the writer of the old
//     attempt, so everything it committed is visible to the partition's
//     next owner.
//  2. A Reader serves an assignment only if a Sink.Open followed the
//     assignment: some Reader of this member was Closed, or Prepare
//     returned, after the assignment took effect (the coordinator opens
//     the sink after both); otherwise it ends with ErrRebalanced at once.
//     So the checkpoint the new owner resumes after includes the previous
//     owner's last commit. On a clean start the coordinator's Prepare waits
//     for the first assignment, so the first Read serves it.
//
// Both assume one pipeline per (group, topic) per process.
type member struct {
	s            *Source
	group, topic string
	cl           *kgo.Client

	mu       sync.Mutex
	epoch    uint64 // bumped on every assignment change
	fresh    uint64 // an epoch in which a Reader was closed
	assigned bool   // the first assignment arrived
	owned    map[int32]bool
	readers  map[*reader]struct{}
	reads    uint64
	changed  chan struct{} // closed and replaced on every change
	closing  bool
}

func newMember(s *Source, group, topic string) (*member, error) {
	m := &member{s: s, group: group, topic: topic, owned: map[int32]bool{},
		readers: map[*reader]struct{}{}, changed: make(chan struct{})}
	opts := append(slices.Clone(s.opts),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(s.cfg.sessionTimeout),
		kgo.HeartbeatInterval(min(3*time.Second, s.cfg.sessionTimeout/3)),
		kgo.OnPartitionsAssigned(m.onAssigned),
		kgo.OnPartitionsRevoked(m.onRevoked),
		kgo.OnPartitionsLost(m.onLost),
	)
	if s.cfg.instanceID != "" {
		opts = append(opts, kgo.InstanceID(s.cfg.instanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: kafka group client: %v", flightline.ErrInvalidInput, err)
	}
	// The member only coordinates; Readers fetch raw batches themselves.
	cl.PauseFetchTopics(topic)
	m.cl = cl
	s.log.Info("joining consumer group", "group", group, "topic", topic)
	return m, nil
}

// signal wakes everyone waiting for a change. m.mu must be held.
func (m *member) signal() {
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *member) ownedList() []int32 {
	ps := slices.Collect(maps.Keys(m.owned))
	slices.Sort(ps)
	return ps
}

// register gives r its assignment, or marks it to end with ErrRebalanced.
func (m *member) register(r *reader) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	m.readers[r] = struct{}{}
	m.signal()
	switch {
	case m.closing:
		r.fail(fmt.Errorf("%w: kafka source closed", flightline.ErrUnavailable))
	case !m.assigned:
		r.mu.Lock()
		r.waitAssignment = true
		r.mu.Unlock() // Next waits for it, then ends with ErrRebalanced
	case m.fresh != m.epoch:
		r.fail(ErrRebalanced)
	default:
		r.assign(m.ownedList(), m.epoch)
	}
}

// prepare waits for the group's first assignment, then marks the current
// assignment as one a Sink.Open follows (rule 2): the coordinator calls it
// right before it opens the sink, so the checkpoint the next Reader resumes
// after was read after the assignment took effect. A later change of the
// assignment bumps the epoch and ends that Reader as usual.
func (m *member) prepare(ctx context.Context) error {
	for {
		m.mu.Lock()
		if m.closing {
			m.mu.Unlock()
			return fmt.Errorf("%w: kafka source closed", flightline.ErrUnavailable)
		}
		if m.assigned {
			m.fresh = m.epoch
			m.mu.Unlock()
			return nil
		}
		ch := m.changed
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// unregister is called by reader.Close.
func (m *member) unregister(r *reader) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.readers[r]; !ok {
		return
	}
	delete(m.readers, r)
	m.fresh = m.epoch
	m.signal()
}

func (m *member) onAssigned(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	ps := parts[m.topic]
	m.mu.Lock()
	defer m.mu.Unlock()
	m.assigned = true
	for _, p := range ps {
		m.owned[p] = true
	}
	m.epoch++
	for r := range m.readers {
		r.fail(ErrRebalanced)
	}
	m.signal()
	m.s.log.Info("partitions assigned", "group", m.group, "topic", m.topic, "added", ps, "owned", m.ownedList())
}

func (m *member) onRevoked(ctx context.Context, _ *kgo.Client, parts map[string][]int32) {
	m.revoke(ctx, parts[m.topic], true)
}

func (m *member) onLost(ctx context.Context, _ *kgo.Client, parts map[string][]int32) {
	m.revoke(ctx, parts[m.topic], false)
}

func (m *member) revoke(ctx context.Context, ps []int32, wait bool) {
	if len(ps) == 0 {
		return
	}
	m.mu.Lock()
	for _, p := range ps {
		delete(m.owned, p)
	}
	m.epoch++
	var victims []*reader
	for r := range m.readers {
		if r.servesAny(ps) {
			victims = append(victims, r)
		}
		r.fail(ErrRebalanced)
	}
	reads := m.reads
	closing := m.closing
	m.signal()
	m.mu.Unlock()
	m.s.lag.forget(m.group, m.topic, ps)
	m.s.log.Info("partitions revoked", "group", m.group, "topic", m.topic, "revoked", ps, "lost", !wait, "readers", len(victims))
	if !wait || closing || len(victims) == 0 {
		return
	}
	// Hold the rebalance until the pipeline has stopped serving ps and
	// reopened its sink (rule 1 above).
	deadline := time.NewTimer(m.s.cfg.revokeTimeout)
	defer deadline.Stop()
	for {
		m.mu.Lock()
		done := m.closing || m.reads > reads
		for _, r := range victims {
			if _, open := m.readers[r]; open {
				done = false
			}
		}
		ch := m.changed
		m.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-deadline.C:
			m.s.log.Warn("revocation: the pipeline serving the revoked partitions did not restart in time; releasing them anyway",
				"group", m.group, "topic", m.topic, "partitions", ps, "timeout", m.s.cfg.revokeTimeout)
			return
		}
	}
}

// commit commits offs (partition → next offset) for the partitions this
// member owns, in the member's current generation.
func (m *member) commit(ctx context.Context, offs map[int32]int64) error {
	m.mu.Lock()
	mine := map[int32]kgo.EpochOffset{}
	for p, o := range offs {
		if m.owned[p] {
			mine[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
		}
	}
	m.mu.Unlock()
	if len(mine) == 0 {
		return nil
	}
	var cerr error
	m.cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{m.topic: mine},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				cerr = err
				return
			}
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil && cerr == nil {
						cerr = err
					}
				}
			}
		})
	if cerr != nil {
		return m.s.classify(fmt.Errorf("kafka: committing offsets of group %q: %w", m.group, cerr))
	}
	done := map[int32]int64{}
	for p, eo := range mine {
		done[p] = eo.Offset
	}
	m.s.lag.acknowledged(m.group, m.topic, done)
	return nil
}

// close leaves the group. Open Readers fail.
func (m *member) close() {
	m.mu.Lock()
	m.closing = true
	for r := range m.readers {
		r.fail(fmt.Errorf("%w: kafka source closed", flightline.ErrUnavailable))
	}
	m.signal()
	m.mu.Unlock()
	m.cl.Close()
}
