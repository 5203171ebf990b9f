package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/kafkaconn"
	"github.com/flightline/flightline/kafkadecode"
)

// fetch is the fetcher goroutine: plain (sessionless) Fetch requests, one
// per partition leader per round, issued concurrently. Each partition's raw
// record bytes are queued for Next as a chunk; the fetch position advances
// past the last complete record batch, read from the batch headers, so the
// fetcher never waits for decoding. It stops when ctx ends or after queueing
// a terminal error.
func (r *reader) fetch(ctx context.Context, start map[int32]int64) {
	cfg := &r.s.cfg
	pos := maps.Clone(start)
	partMax := map[int32]int32{}
	var (
		ti           topicInfo
		needMeta     = true
		failingSince time.Time
		backoff      = 100 * time.Millisecond
	)
	fail := func(err error) { r.send(ctx, chunk{err: err}) }
	for ctx.Err() == nil {
		for r.buffered.Load() >= cfg.maxBuffered { // back-pressure
			select {
			case <-r.room:
			case <-ctx.Done():
				return
			}
		}
		var roundErr error
		if needMeta {
			t, err := r.s.topic(ctx, r.topic)
			switch {
			case errors.Is(err, flightline.ErrNotFound):
				fail(err)
				return
			case err != nil:
				roundErr = err
			default:
				ti, needMeta = t, false
			}
		}
		if roundErr == nil {
			byLeader := map[int32][]int32{}
			for _, p := range slices.Sorted(maps.Keys(pos)) {
				l, ok := ti.leaders[p]
				if !ok || l.node < 0 {
					needMeta = true
					continue
				}
				byLeader[l.node] = append(byLeader[l.node], p)
			}
			type result struct {
				node int32
				resp *kmsg.FetchResponse
				err  error
			}
			results := make([]result, 0, len(byLeader))
			var (
				mu sync.Mutex
				wg sync.WaitGroup
			)
			for node, parts := range byLeader {
				req := r.fetchRequest(ti, parts, pos, partMax)
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, err := req.RequestWith(ctx, r.s.cl.Broker(int(node)))
					mu.Lock()
					results = append(results, result{node, resp, err})
					mu.Unlock()
				}()
			}
			wg.Wait()
			if ctx.Err() != nil {
				return
			}
			for _, res := range results {
				if res.err != nil {
					r.s.log.Warn("kafka fetch failed; retrying", "broker", ti.addr(res.node), "topic", r.topic, "err", res.err)
					roundErr, needMeta = res.err, true
					continue
				}
				if err := kerr.ErrorForCode(res.resp.ErrorCode); err != nil {
					roundErr, needMeta = err, true
					continue
				}
				for _, t := range res.resp.Topics {
					if t.Topic != r.topic && t.TopicID != ti.id {
						continue
					}
					for i := range t.Partitions {
						rp := &t.Partitions[i]
						err, terminal := r.partition(ctx, rp, pos, partMax)
						if terminal {
							fail(err)
							return
						}
						if err != nil {
							roundErr, needMeta = err, true
						}
					}
				}
			}
		}
		if roundErr == nil {
			failingSince, backoff = time.Time{}, 100*time.Millisecond
			continue
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		} else if time.Since(failingSince) > cfg.unavailableAfter {
			fail(fmt.Errorf("%w: kafka: fetching %s from %v failed for %v: %w",
				flightline.ErrUnavailable, r.topic, cfg.brokers, cfg.unavailableAfter, roundErr))
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (r *reader) fetchRequest(ti topicInfo, parts []int32, pos map[int32]int64, partMax map[int32]int32) *kmsg.FetchRequest {
	cfg := &r.s.cfg
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = int32(cfg.fetchMaxWait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = cfg.fetchMaxBytes
	if cfg.readCommitted {
		req.IsolationLevel = 1
	}
	req.SessionID, req.SessionEpoch = 0, -1 // plain fetches, no session
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = r.topic, ti.id
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rp.FetchOffset = pos[p]
		rp.CurrentLeaderEpoch = ti.leaders[p].epoch
		rp.PartitionMaxBytes = cfg.partitionMaxBytes
		if m := partMax[p]; m > 0 {
			rp.PartitionMaxBytes = m
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// partition handles one partition of a fetch response. A non-nil error
// that is not terminal is transient: refresh metadata and retry.
func (r *reader) partition(ctx context.Context, rp *kmsg.FetchResponseTopicPartition, pos map[int32]int64, partMax map[int32]int32) (error, bool) {
	p := rp.Partition
	at, ok := pos[p]
	if !ok {
		return nil, false
	}
	err := kerr.ErrorForCode(rp.ErrorCode)
	switch {
	case err == nil:
	case errors.Is(err, kerr.OffsetOutOfRange):
		to, rerr := r.s.resetOffsets(ctx, r.topic, []int32{p})
		if rerr != nil {
			return rerr, false
		}
		r.s.log.Error("KAFKA OFFSET OUT OF RANGE: applying auto_offset_reset; records between the two positions are skipped or re-read",
			"topic", r.topic, "partition", p, "position", at, "log_start", rp.LogStartOffset, "high_watermark", rp.HighWatermark,
			"auto_offset_reset", r.s.cfg.reset.String(), "new_position", to[p])
		pos[p] = to[p]
		if !r.send(ctx, chunk{p: p, resetTo: to[p]}) {
			return ctx.Err(), true
		}
		return nil, false
	case errors.Is(err, kerr.TopicAuthorizationFailed):
		return fmt.Errorf("%w: kafka: fetching %s/%d: %w", flightline.ErrPermissionDenied, r.topic, p, err), true
	case errors.Is(err, kerr.NotLeaderForPartition), errors.Is(err, kerr.LeaderNotAvailable),
		errors.Is(err, kerr.FencedLeaderEpoch), errors.Is(err, kerr.UnknownLeaderEpoch),
		errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID),
		errors.Is(err, kerr.KafkaStorageError), errors.Is(err, kerr.OffsetNotAvailable),
		errors.Is(err, kerr.ReplicaNotAvailable), kafkaconn.IsRetriableKerr(err):
		r.s.log.Info("kafka partition moved or unavailable; refreshing metadata", "topic", r.topic, "partition", p, "err", err)
		return err, false
	default:
		return fmt.Errorf("kafka: fetching %s/%d: %w", r.topic, p, err), true
	}
	data := rp.RecordBatches
	if len(data) > 0 {
		next, complete := nextOffset(data, at)
		switch {
		case complete == 0 && len(data) > 0:
			// A batch larger than the partition limit (brokers before
			// KIP-74): ask for more next time.
			partMax[p] = max(partMax[p], r.s.cfg.partitionMaxBytes) * 2
		default:
			r.buffered.Add(int64(complete)) // handle subtracts len(chunk.data)
			aborted := make([]kafkadecode.AbortedTransaction, len(rp.AbortedTransactions))
			for i, a := range rp.AbortedTransactions {
				aborted[i] = kafkadecode.AbortedTransaction{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset}
			}
			if !r.send(ctx, chunk{p: p, offset: at, data: data[:complete], aborted: aborted, resetTo: -1}) {
				return ctx.Err(), true
			}
			if next > at {
				pos[p] = next
			}
		}
	}
	r.s.lag.fetchedAt(r.group, r.topic, p, rp.HighWatermark, pos[p])
	return nil, false
}

// Record batch header offsets (Kafka magic v2).
const (
	hdrLen            = 61
	offLength         = 8
	offMagic          = 16
	offLastOffsetDelt = 23
)

// batchBounds returns a v2 batch's base offset, last offset and total size
// (total <= 0 when b does not start with a batch header).
func batchBounds(b []byte) (base, last int64, total int) {
	if len(b) < hdrLen {
		return 0, 0, 0
	}
	base = int64(binary.BigEndian.Uint64(b))
	total = 12 + int(int32(binary.BigEndian.Uint32(b[offLength:])))
	if b[offMagic] != 2 {
		return base, base, total
	}
	last = base + int64(int32(binary.BigEndian.Uint32(b[offLastOffsetDelt:])))
	return base, last, total
}

// nextOffset walks the batch headers of a partition's records and returns
// the offset after the last complete batch (at least from) and the byte
// length of the complete batches.
func nextOffset(b []byte, from int64) (next int64, complete int) {
	next = from
	for complete < len(b) {
		_, last, total := batchBounds(b[complete:])
		if total <= 12 || total > len(b)-complete {
			break
		}
		complete += total
		if last+1 > next {
			next = last + 1
		}
	}
	return next, complete
}
