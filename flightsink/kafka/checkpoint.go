package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
)

// Header keys of checkpoint records. The value of a checkpoint record is
// the checkpoint bytes, its key the pipeline id.
const (
	HeaderTarget = "flightline.target" // the data topic of the transaction
)

// hashPartition is the partition of key among n: murmur2, as the Java
// client's default partitioner and kgo's sticky key partitioner place
// keyed records.
func hashPartition(key []byte, n int) int32 {
	return int32(keyHasher.Partition(&kgo.Record{Key: key}, n))
}

var keyHasher = kgo.StickyKeyPartitioner(nil).ForTopic("")

// checkpointPatience is how long Checkpoint waits for open transactions
// on the checkpoint partition before answering from below them. Live
// writers' transactions end within a batch; a dead writer's stays open for
// the transaction timeout.
const checkpointPatience = 2 * time.Second

// readCheckpoint returns the value of the last committed record keyed
// CheckpointKey(p) in the checkpoint topic, or nil. It reads the
// pipeline's partition with read_committed from the log start.
//
// With all, it reads up to the high watermark the first fetch reports.
// Because read_committed fetches stop at the last stable offset, it then
// waits until every transaction open at that moment — of any pipeline
// sharing the partition — has completed: a checkpoint committed after
// another pipeline's transaction began sits above that transaction's first
// offset and would otherwise be missed. Open reads so, after fencing (which
// aborts its own pipeline's open transaction at once). Without all
// (Checkpoint), it waits for that at most checkpointPatience, then answers
// with what is below the last stable offset.
func (s *Sink) readCheckpoint(ctx context.Context, p flightsink.Pipeline, all bool) ([]byte, error) {
	pipeline := p.ID
	md, err := s.metadata(ctx, s.cfg.cpTopic, false)
	if errors.Is(err, flightline.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	key := CheckpointKey(p)
	patience := time.Now().Add(checkpointPatience)
	// Before checkpoints were kept per target, every record was keyed by
	// the pipeline id alone, whatever its topic: for an explicit target,
	// the last such record naming that topic is the checkpoint until the
	// first record under the new key.
	var legacyKey, legacy []byte
	if p.Target != "" {
		legacyKey = []byte(p.ID)
	}
	part := hashPartition(key, len(md.Partitions))
	var (
		last   []byte
		offset int64
		target int64 = -1
	)
	for {
		leader, epoch := int32(-1), int32(-1)
		for _, p := range md.Partitions {
			if p.Partition == part {
				leader, epoch = p.Leader, p.LeaderEpoch
			}
		}
		req := kmsg.NewPtrFetchRequest()
		req.MaxWaitMillis = 200
		req.MinBytes = 1
		req.MaxBytes = 16 << 20
		req.IsolationLevel = 1 // read_committed
		req.SessionID, req.SessionEpoch = 0, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = s.cfg.cpTopic, md.TopicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes = part, offset, epoch, 8<<20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)

		var perr error
		resp, err := req.RequestWith(ctx, s.cl.Broker(int(leader)))
		if err != nil {
			perr = err
		} else if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			perr = kerr.ErrorForCode(resp.ErrorCode)
			if perr == nil {
				perr = fmt.Errorf("unexpected fetch response shape")
			}
		} else {
			frp := &resp.Topics[0].Partitions[0]
			if target < 0 && frp.ErrorCode == 0 {
				target = frp.HighWatermark
			}
			if offset >= target && target >= 0 {
				return pick(last, legacy), nil // nothing (more) to read
			}
			if !all && frp.ErrorCode == 0 && offset >= frp.LastStableOffset && time.Now().After(patience) {
				// Held at the last stable offset past our patience: an open
				// transaction (a dead writer's, until the broker times it
				// out) hides the rest. What is below it is committed.
				return pick(last, legacy), nil
			}
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset: offset, IsolationLevel: kgo.ReadCommitted(), Topic: s.cfg.cpTopic, Partition: part,
			}, frp, kgo.DefaultDecompressor(), nil)
			switch {
			case errors.Is(fp.Err, kerr.OffsetOutOfRange) && frp.LogStartOffset > offset:
				offset = frp.LogStartOffset // compaction or retention moved the start
				continue
			case fp.Err != nil:
				perr = fp.Err
			default:
				for _, r := range fp.Records {
					switch {
					case bytes.Equal(r.Key, key):
						last = bytes.Clone(r.Value)
					case legacyKey != nil && bytes.Equal(r.Key, legacyKey) && headerIs(r, HeaderTarget, p.Target):
						legacy = bytes.Clone(r.Value)
					}
				}
				offset = next
				if offset >= target {
					return pick(last, legacy), nil
				}
				continue
			}
		}
		if err := kafkaconnFatal(perr); err != nil {
			return nil, s.classify(err, "kafka sink: reading checkpoint of %q from %s/%d", pipeline, s.cfg.cpTopic, part)
		}
		// Leadership moved or the broker is catching up: refresh and retry.
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: kafka sink: reading checkpoint of %q: %w (last error: %v)", flightline.ErrUnavailable, pipeline, ctx.Err(), perr)
		case <-time.After(100 * time.Millisecond):
		}
		if md, err = s.metadata(ctx, s.cfg.cpTopic, false); err != nil {
			return nil, err
		}
	}
}

// kafkaconnFatal returns err when retrying the fetch cannot help.
func kafkaconnFatal(err error) error {
	var ke *kerr.Error
	if errors.As(err, &ke) && ke.Retriable {
		return nil
	}
	return err
}

// pick prefers the checkpoint under the current key.
func pick(last, legacy []byte) []byte {
	if last != nil {
		return last
	}
	return legacy
}

func headerIs(r *kgo.Record, key, value string) bool {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value) == value
		}
	}
	return false
}
