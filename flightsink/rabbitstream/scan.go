package rabbitstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
)

// Application properties of the sink's messages.
const (
	propControl    = "flightline-control"
	propWriter     = "flightline-writer"
	propBatch      = "flightline-batch"
	propRows       = "flightline-rows"
	propFrom       = "flightline-from"
	propCheckpoint = "flightline-checkpoint"

	controlClaim  = "claim"
	controlCommit = "commit"
)

// state is what the stream says of one pipeline, up to a publishing id.
type state struct {
	committed []byte // checkpoint.Next over every complete batch (nil: none)
	batch     int64  // highest batch number seen
	// cut are the batches started and not complete (a writer died in
	// them), at most one per source position: a later batch of the same
	// position completes its cut batch or abandons it. The last one is
	// the batch whose rows the messages that follow are.
	cut   []*partial
	claim string // token of the last claim
}

// partial is a batch whose first rows are in the stream and the rest not.
type partial struct {
	batch, rows int64
	cp          []byte   // the batch's own checkpoint
	base        int64    // row of the batch bodies[0] is (0 unless the stream lost its start)
	bodies      [][]byte // bodies of rows base.. that landed, in order
	lastID      int64    // publishing id of the last of them
}

func (p *partial) landed() int64 { return p.base + int64(len(p.bodies)) }

// msg is one message of the stream, reduced to what the scan reads.
type msg struct {
	id    int64
	props map[string]any
	body  []byte
}

// scan reads stream from its first message until the message of writer
// tag with publishing id last, and returns the pipeline's state. It
// fails when that message does not come within timeout of the last one
// read (ErrUnavailable).
func scan(ctx context.Context, env *stream.Environment, name, tag string, last int64, timeout time.Duration) (*state, error) {
	ch := make(chan msg, 1024)
	done := make(chan struct{})
	prefix := tag + ":"
	handler := func(_ stream.ConsumerContext, m *amqp.Message) {
		if m == nil || m.Properties == nil {
			return
		}
		s, ok := m.Properties.MessageID.(string)
		if !ok || !strings.HasPrefix(s, prefix) {
			return
		}
		id, err := strconv.ParseInt(s[len(prefix):], 10, 64)
		if err != nil {
			return
		}
		var body []byte
		if len(m.Data) > 0 {
			body = m.Data[0]
		}
		select {
		case ch <- msg{id: id, props: m.ApplicationProperties, body: body}:
		case <-done:
		}
	}
	c, err := env.NewConsumer(name, handler, stream.NewConsumerOptions().
		SetOffset(stream.OffsetSpecification{}.First()).SetClientProvidedName("flightline-scan"))
	if err != nil {
		close(done)
		return nil, classify("read stream", err)
	}
	defer func() {
		close(done) // unblock the handler before Close waits for it
		_ = c.Close()
	}()
	st := &state{}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case m := <-ch:
			if err := st.add(m); err != nil {
				return nil, err
			}
			if m.id >= last {
				return st, nil
			}
			timer.Reset(timeout)
		case <-timer.C:
			return nil, fmt.Errorf("%w: rabbitmq-stream sink: reading stream %q: publishing id %d of writer %s not found within %s",
				flightline.ErrUnavailable, name, last, tag, timeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// add folds one of the pipeline's messages, in stream order, into st.
func (st *state) add(m msg) error {
	ctl, _ := m.props[propControl].(string)
	if ctl == controlClaim {
		st.claim, _ = m.props[propWriter].(string)
		return nil
	}
	if _, ok := m.props[propBatch]; !ok {
		// A row after its batch's first message.
		if n := len(st.cut); n > 0 {
			if c := st.cut[n-1]; m.id == c.lastID+1 {
				c.bodies = append(c.bodies, m.body)
				c.lastID = m.id
				st.completeIfDone(n - 1)
			}
		}
		return nil
	}
	b, err1 := intProp(m.props, propBatch)
	n, err2 := intProp(m.props, propRows)
	from, err3 := intProp(m.props, propFrom)
	cp, err4 := cpProp(m.props, propCheckpoint)
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return fmt.Errorf("%w: rabbitmq-stream sink: message %d: %v", flightline.ErrInternal, m.id, err)
		}
	}
	st.batch = max(st.batch, b)
	if i := st.related(cp); i >= 0 {
		if c := st.cut[i]; c.batch == b && c.rows == n && c.landed() == from && bytes.Equal(c.cp, cp) {
			// The batch, continued after a crash by a later writer.
			st.cut = append(slices.Delete(st.cut, i, i+1), c)
			c.bodies = append(c.bodies, m.body)
			c.lastID = m.id
			st.completeIfDone(len(st.cut) - 1)
			return nil
		}
		// It came back different: abandoned (see the package documentation).
		st.cut = slices.Delete(st.cut, i, i+1)
	}
	if ctl == controlCommit || n == 0 {
		st.committed = checkpoint.Next(st.committed, cp)
		return nil
	}
	st.cut = append(st.cut, &partial{batch: b, rows: n, cp: cp, base: from, bodies: [][]byte{m.body}, lastID: m.id})
	st.completeIfDone(len(st.cut) - 1)
	return nil
}

// related returns the index of the cut batch that a batch with
// checkpoint cp would complete or abandon, or -1: one at the same source
// position (sharing a key of checkpoint.Positions; any, for checkpoints
// of other forms).
func (st *state) related(cp []byte) int {
	for i, c := range st.cut {
		if sameSource(c.cp, cp) {
			return i
		}
	}
	return -1
}

func sameSource(a, b []byte) bool {
	pa, errA := checkpoint.Parse(a)
	pb, errB := checkpoint.Parse(b)
	if errA != nil || errB != nil {
		return true
	}
	for k := range pa {
		if _, ok := pb[k]; ok {
			return true
		}
	}
	return false
}

func (st *state) completeIfDone(i int) {
	if c := st.cut[i]; c.landed() >= c.rows {
		st.committed = checkpoint.Next(st.committed, c.cp)
		st.cut = slices.Delete(st.cut, i, i+1)
	}
}

func intProp(props map[string]any, k string) (int64, error) {
	switch v := props[k].(type) {
	case int64:
		return v, nil
	case int32:
		return int64(v), nil
	case uint64:
		return int64(v), nil
	case uint32:
		return int64(v), nil
	case int:
		return int64(v), nil
	}
	return 0, fmt.Errorf("property %s: %T, want an integer", k, props[k])
}

func cpProp(props map[string]any, k string) ([]byte, error) {
	s, ok := props[k].(string)
	if !ok {
		return nil, fmt.Errorf("property %s: %T, want a string", k, props[k])
	}
	if s == "" {
		return nil, nil
	}
	return base64.StdEncoding.DecodeString(s)
}
