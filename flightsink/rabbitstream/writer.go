package rabbitstream

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/amqp"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/message"
	"github.com/rabbitmq/rabbitmq-stream-go-client/pkg/stream"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/rowenc"
)

// Writer appends the batches of one pipeline to its stream, on its own
// connection and producer.
type Writer struct {
	s      *Sink
	p      flightsink.Pipeline
	env    *stream.Environment
	prod   *stream.Producer
	box    *confirmBox
	stream string
	name   string // producer name
	tag    string // message-id prefix
	token  string // this writer's claim
	st     *state // the pipeline as this writer left it
	last   int64  // publishing id of this writer's last confirmed message
	schema *arrow.Schema
	broken error
	cut    int // tests: publish only this many messages of the next batch, then fail as a crash would
}

// frameBytes bounds the messages of one publish frame; the broker's
// default frame_max is 1 MiB.
const frameBytes = 512 << 10

// pending is a message about to be published.
type pending struct {
	id  int64
	msg *amqp.AMQP10
	n   int // approximate encoded size
}

func (w *Writer) message(id int64, body []byte, props map[string]any) *pending {
	m := amqp.NewMessage(body)
	m.Properties = &amqp.MessageProperties{MessageID: fmt.Sprintf("%s:%d", w.tag, id)}
	if body != nil {
		m.Properties.ContentType = "application/json"
	}
	m.ApplicationProperties = props
	m.SetPublishingId(id)
	n := len(body) + 64
	for k, v := range props {
		n += len(k) + 16
		if s, ok := v.(string); ok {
			n += len(s)
		}
	}
	return &pending{id: id, msg: m, n: n}
}

func (w *Writer) claim(id int64) *pending {
	return w.message(id, []byte{}, map[string]any{propControl: controlClaim, propWriter: w.token})
}

// WriteBatch appends every row of rec (from row k on, when a crash left
// the batch's first k rows in the stream) and waits for the broker's
// confirms; it then checks that no newer writer claimed the pipeline.
func (w *Writer) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := flightsink.CheckBatch(rec, cp); err != nil {
		return err
	}
	if w.broken != nil {
		return w.broken
	}
	if checkpoint.Replayed(w.st.committed, cp) {
		// Fencing wins over replay: a fenced writer's replay fails too.
		return w.checkFence()
	}
	if w.schema == nil {
		w.schema = rec.Schema()
	} else if !flightsink.SameSchema(w.schema, rec.Schema()) {
		return fmt.Errorf("%w: rabbitmq-stream sink: batch schema %s, writer's %s", flightline.ErrSchemaMismatch, rec.Schema(), w.schema)
	}
	bodies, err := encode(rec)
	if err != nil {
		return err
	}
	n := int64(len(bodies))
	b, from := w.st.batch+1, int64(0)
	ci := w.st.related(cp)
	if ci >= 0 {
		if c := w.st.cut[ci]; c.base == 0 && c.rows == n && bytes.Equal(c.cp, cp) && samePrefix(c.bodies, bodies) {
			b, from = c.batch, c.landed()
			w.s.log.Info("rabbitmq-stream sink: completing a batch a crash cut short",
				"pipeline", w.p.ID, "stream", w.stream, "batch", c.batch, "rows_in_stream", c.landed(), "rows", c.rows)
		} else {
			w.s.log.Warn("rabbitmq-stream sink: the batch a crash cut short came back different; its rows already in the stream may now be there twice",
				"pipeline", w.p.ID, "stream", w.stream, "batch", c.batch, "rows_in_stream", c.landed(), "rows", c.rows,
				"first_publishing_id", c.lastID-int64(len(c.bodies))+1, "last_publishing_id", c.lastID)
		}
	}
	props := map[string]any{
		propBatch: b, propRows: n, propFrom: from,
		propCheckpoint: base64.StdEncoding.EncodeToString(cp),
	}
	id := w.last
	var msgs []*pending
	if n == 0 {
		props[propControl] = controlCommit
		id++
		msgs = append(msgs, w.message(id, []byte{}, props))
	}
	for r := from; r < n; r++ {
		id++
		var pr map[string]any
		if r == from {
			pr = props
		}
		msgs = append(msgs, w.message(id, bodies[r], pr))
	}
	if id>>epochShift != w.last>>epochShift {
		return w.fail(fmt.Errorf("%w: rabbitmq-stream sink: producer %q ran out of publishing ids in its epoch", flightline.ErrInternal, w.name))
	}
	if k := w.cut; k > 0 && k < len(msgs) {
		w.cut = 0
		if err := w.publish(ctx, msgs[:k]); err != nil {
			return w.fail(err)
		}
		return w.fail(fmt.Errorf("%w: rabbitmq-stream sink: cut after %d messages (test)", flightline.ErrUnavailable, k))
	}
	if err := w.publish(ctx, msgs); err != nil {
		return w.fail(err)
	}
	w.last = id
	if err := w.checkFence(); err != nil {
		return err
	}
	w.st.committed = checkpoint.Next(w.st.committed, cp)
	w.st.batch = max(w.st.batch, b)
	if ci >= 0 {
		w.st.cut = slices.Delete(w.st.cut, ci, ci+1)
	}
	return nil
}

// checkFence fails the writer with ErrFenced when the producer name's
// last publishing id is not this writer's: a newer writer claimed it.
func (w *Writer) checkFence() error {
	now, err := w.env.QuerySequence(w.name, w.stream)
	if err != nil {
		return w.fail(classify("query sequence", err))
	}
	if now != w.last {
		return w.fail(fmt.Errorf("%w: rabbitmq-stream sink: pipeline %s on stream %q was claimed by a newer writer (producer %q at publishing id %d, this writer's last %d)",
			flightline.ErrFenced, w.p.ID, w.stream, w.name, now, w.last))
	}
	return nil
}

func samePrefix(have, got [][]byte) bool {
	if len(have) > len(got) {
		return false
	}
	for i, h := range have {
		if !bytes.Equal(h, got[i]) {
			return false
		}
	}
	return true
}

// encode returns each row of rec as one JSON object.
func encode(rec arrow.RecordBatch) ([][]byte, error) {
	if rec.NumRows() == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := rowenc.NewJSONL(rec.Schema()).Encode(&buf, rec); err != nil {
		return nil, fmt.Errorf("%w: rabbitmq-stream sink: %v", flightline.ErrInvalidInput, err)
	}
	lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
	if int64(len(lines)) != rec.NumRows() {
		return nil, fmt.Errorf("%w: rabbitmq-stream sink: %d rows encoded as %d lines", flightline.ErrInternal, rec.NumRows(), len(lines))
	}
	return lines, nil
}

// publish sends msgs in frames of at most frameBytes and waits until the
// broker confirmed every one (a duplicate the broker dropped is confirmed
// too: checkFence tells).
func (w *Writer) publish(ctx context.Context, msgs []*pending) error {
	want := make(map[int64]bool, len(msgs))
	if len(msgs) > 0 {
		w.box.forget(msgs[0].id)
	}
	var frame []message.StreamMessage
	size := 0
	flush := func() error {
		if len(frame) == 0 {
			return nil
		}
		if err := w.prod.BatchSend(frame); err != nil {
			return classify("publish", err)
		}
		frame, size = frame[:0], 0
		return nil
	}
	for _, m := range msgs {
		if m.n > frameBytes {
			return fmt.Errorf("%w: rabbitmq-stream sink: a row of %d bytes does not fit a publish frame (%d bytes)", flightline.ErrInvalidInput, m.n, frameBytes)
		}
		if size+m.n > frameBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		frame = append(frame, m.msg)
		size += m.n
		want[m.id] = true
	}
	if err := flush(); err != nil {
		return err
	}
	// A caller that has gone away gets its context's error whether or not
	// the confirms are in yet, as it would a moment later: the outcome is
	// the same either way (a replay of a published batch is deduplicated),
	// and it does not depend on how fast the broker answered.
	if err := ctx.Err(); err != nil {
		return err
	}
	timer := time.NewTimer(w.s.cfg.ConfirmTimeout)
	defer timer.Stop()
	for {
		if err := w.box.take(want); err != nil || len(want) == 0 {
			return err
		}
		select {
		case <-w.box.notify:
		case <-timer.C:
			return fmt.Errorf("%w: rabbitmq-stream sink: %d messages unconfirmed after %s", flightline.ErrUnavailable, len(want), w.s.cfg.ConfirmTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// confirmBox collects the producer's confirms. The client delivers them
// on a channel it sends to while holding a lock that Producer.Close also
// takes: a confirm nobody reads (a batch abandoned on a cancelled
// context) would block the client's reader and Close for ever. So one
// goroutine reads that channel until the client closes it, and never
// blocks.
type confirmBox struct {
	mu     sync.Mutex
	got    map[int64]error // publishing id → nil (confirmed) or the error
	closed bool
	notify chan struct{} // capacity 1: something arrived
}

func newConfirmBox(ch stream.ChannelPublishConfirm) *confirmBox {
	b := &confirmBox{got: map[int64]error{}, notify: make(chan struct{}, 1)}
	go func() {
		for sts := range ch {
			b.mu.Lock()
			for _, c := range sts {
				var err error
				if !c.IsConfirmed() {
					err = fmt.Errorf("%w: rabbitmq-stream sink: message with publishing id %d not confirmed: %v", flightline.ErrUnavailable, c.GetPublishingId(), c.GetError())
				}
				b.got[c.GetPublishingId()] = err
			}
			b.mu.Unlock()
			b.signal()
		}
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		b.signal()
	}()
	return b
}

func (b *confirmBox) signal() {
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

// forget drops what arrived for ids below first (earlier, failed batches).
func (b *confirmBox) forget(first int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range b.got {
		if id < first {
			delete(b.got, id)
		}
	}
}

// take removes from want the ids that were confirmed; it returns the
// first failure, or an error once the producer closed with ids left.
func (b *confirmBox) take(want map[int64]bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range want {
		err, ok := b.got[id]
		if !ok {
			continue
		}
		delete(b.got, id)
		if err != nil {
			return err
		}
		delete(want, id)
	}
	if b.closed && len(want) > 0 {
		return fmt.Errorf("%w: rabbitmq-stream sink: producer closed with %d messages unconfirmed", flightline.ErrUnavailable, len(want))
	}
	return nil
}

func (w *Writer) fail(err error) error {
	w.broken = err
	return err
}

// Close closes the writer's producer and connection. It commits nothing.
func (w *Writer) Close(context.Context) error {
	_ = w.prod.Close()
	return w.env.Close()
}
