package amqp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/rowenc"
)

// Config is what an amqp sink is given in its URL or YAML.
type Config struct {
	// URL is the broker's amqp:// or amqps:// URL, credentials and vhost
	// included.
	URL string
	// Exchange receives every message ("" is the default exchange).
	Exchange string
	// RoutingKey is the routing key of a pipeline without a Target.
	RoutingKey string
	// RoutingKeyColumn, when set, names a utf8 column whose value is each
	// row's routing key (it overrides Target and RoutingKey).
	RoutingKeyColumn string
	// Headers names columns copied into each message's headers.
	Headers []string
	// ConfirmTimeout bounds the wait for a batch's confirms (default 30s).
	ConfirmTimeout time.Duration
}

// Option configures a Sink beyond its Config. The sink has none yet; the
// type keeps New's shape the same as every other sink's.
type Option func(*options)

type options struct{}

// Sink publishes rows to an AMQP 0-9-1 broker. Safe for concurrent use;
// every Writer has its own connection.
type Sink struct{ cfg Config }

var (
	_ flightsink.Sink       = (*Sink)(nil)
	_ flightsink.Guaranteer = (*Sink)(nil)
)

// New returns a Sink for cfg. It does not contact the broker: an
// unreachable broker (flightline.ErrUnavailable) or refused credentials
// (flightline.ErrUnauthenticated) surface on Open. It validates cfg.URL.
// Close releases nothing: every Writer owns its connection.
func New(_ context.Context, cfg Config, opts ...Option) (*Sink, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if _, err := amqp091.ParseURI(cfg.URL); err != nil {
		return nil, fmt.Errorf("%w: amqp sink: %v", flightline.ErrInvalidInput, err)
	}
	if cfg.ConfirmTimeout <= 0 {
		cfg.ConfirmTimeout = 30 * time.Second
	}
	return &Sink{cfg: cfg}, nil
}

// Close releases nothing (every Writer owns its connection and closes it)
// and returns nil.
func (s *Sink) Close() error { return nil }

// Guarantee implements flightsink.Guaranteer: at-least-once (see the
// package documentation).
func (s *Sink) Guarantee() flightsink.Guarantee { return flightsink.AtLeastOnce }

// Checkpoint returns nil: the sink keeps no checkpoint.
func (s *Sink) Checkpoint(context.Context, flightsink.Pipeline) ([]byte, error) { return nil, nil }

// Ping connects to the broker and closes the connection: an unreachable
// broker is ErrUnavailable, refused credentials ErrUnauthenticated.
func (s *Sink) Ping(ctx context.Context) error {
	conn, err := dial(ctx, s.cfg.URL)
	if err != nil {
		return err
	}
	return conn.Close()
}

// Open connects to the broker and returns a Writer and a nil checkpoint.
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	conn, err := dial(ctx, s.cfg.URL)
	if err != nil {
		return nil, nil, err
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.Confirm(false)
	}
	if err != nil {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("%w: amqp sink: channel: %v", flightline.ErrUnavailable, err)
	}
	w := &Writer{s: s, p: p, conn: conn, ch: ch,
		confirms: ch.NotifyPublish(make(chan amqp091.Confirmation, 1024)),
		returns:  ch.NotifyReturn(make(chan amqp091.Return, 1024)),
		closed:   ch.NotifyClose(make(chan *amqp091.Error, 1)),
	}
	return w, nil, nil
}

// dial connects, mapping refused credentials to ErrUnauthenticated and
// everything else to ErrUnavailable.
func dial(ctx context.Context, url string) (*amqp091.Connection, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	conn, err := amqp091.DialConfig(url, amqp091.Config{
		Dial: func(network, addr string) (net.Conn, error) { return d.DialContext(ctx, network, addr) },
	})
	if err == nil {
		return conn, nil
	}
	var ae *amqp091.Error
	if errors.Is(err, amqp091.ErrCredentials) || errors.As(err, &ae) && ae.Code == amqp091.AccessRefused {
		return nil, fmt.Errorf("%w: amqp sink: %v", flightline.ErrUnauthenticated, err)
	}
	// amqp091's errors do not carry the URL, so no password leaks here.
	return nil, fmt.Errorf("%w: amqp sink: %v", flightline.ErrUnavailable, err)
}

// Writer publishes the batches of one pipeline on its own connection.
type Writer struct {
	s        *Sink
	p        flightsink.Pipeline
	conn     *amqp091.Connection
	ch       *amqp091.Channel
	confirms chan amqp091.Confirmation
	returns  chan amqp091.Return
	closed   chan *amqp091.Error
	last     []byte // last committed checkpoint
	seq      uint64 // delivery tags published so far on ch
	broken   error
	schema   *arrow.Schema // of the first batch; later ones must match
}

// WriteBatch publishes every row of rec and waits for all their confirms.
func (w *Writer) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := flightsink.CheckBatch(rec, cp); err != nil {
		return err
	}
	if w.last != nil && bytes.Equal(w.last, cp) {
		return nil
	}
	if w.broken != nil {
		return w.broken
	}
	if w.schema == nil {
		w.schema = rec.Schema()
	} else if !flightsink.SameSchema(w.schema, rec.Schema()) {
		return fmt.Errorf("%w: amqp sink: batch schema %s, writer's %s", flightline.ErrSchemaMismatch, rec.Schema(), w.schema)
	}
	msgs, err := w.messages(rec, cp)
	if err != nil {
		return err
	}
	b := batchWait{w: w, first: w.seq + 1}
	for _, m := range msgs {
		if err := w.ch.PublishWithContext(ctx, w.s.cfg.Exchange, m.key, true, false, m.pub); err != nil {
			return w.fail(fmt.Errorf("%w: amqp sink: publish: %v", flightline.ErrUnavailable, err))
		}
		w.seq++
		b.pending++
		// Drain what has arrived, so the client's reader never blocks on
		// a full confirm channel while a large batch is published.
		for drained := false; !drained; {
			select {
			case r := <-w.returns:
				b.onReturn(r)
			case c := <-w.confirms:
				if err := b.onConfirm(c); err != nil {
					return err
				}
			default:
				drained = true
			}
		}
	}
	timer := time.NewTimer(w.s.cfg.ConfirmTimeout)
	defer timer.Stop()
	for b.pending > 0 {
		select {
		case r := <-w.returns:
			b.onReturn(r)
		case c := <-w.confirms:
			if err := b.onConfirm(c); err != nil {
				return err
			}
		case e := <-w.closed:
			return w.fail(fmt.Errorf("%w: amqp sink: channel closed: %v", flightline.ErrUnavailable, e))
		case <-timer.C:
			return w.fail(fmt.Errorf("%w: amqp sink: no confirm within %s", flightline.ErrUnavailable, w.s.cfg.ConfirmTimeout))
		case <-ctx.Done():
			return w.fail(ctx.Err())
		}
	}
	// The client delivers a message's return before its ack (one reader
	// goroutine, in the broker's order), so every return of the batch has
	// arrived by now.
	if r := b.returned; r != nil {
		return fmt.Errorf("%w: amqp sink: message unroutable: exchange %q routing key %q: %d %s",
			flightline.ErrFailedPrecondition, r.Exchange, r.RoutingKey, r.ReplyCode, r.ReplyText)
	}
	w.last = append(w.last[:0], cp...)
	return nil
}

// batchWait counts the confirms a batch still waits for and keeps its
// first return.
type batchWait struct {
	w        *Writer
	first    uint64 // delivery tag of the batch's first message
	pending  int
	returned *amqp091.Return
}

func (b *batchWait) onReturn(r amqp091.Return) {
	if b.returned == nil {
		b.returned = &r
	}
}

func (b *batchWait) onConfirm(c amqp091.Confirmation) error {
	if c.DeliveryTag < b.first {
		return nil // of an earlier, failed batch
	}
	b.pending--
	if !c.Ack {
		return b.w.fail(fmt.Errorf("%w: amqp sink: broker nacked message %d of the batch", flightline.ErrUnavailable, c.DeliveryTag-b.first))
	}
	return nil
}

func (w *Writer) fail(err error) error {
	w.broken = err
	return err
}

type message struct {
	key string
	pub amqp091.Publishing
}

// messages encodes the rows of rec.
func (w *Writer) messages(rec arrow.RecordBatch, cp []byte) ([]message, error) {
	cfg := w.s.cfg
	key := cfg.RoutingKey
	if w.p.Target != "" {
		key = w.p.Target
	}
	var keyCol *array.String
	if cfg.RoutingKeyColumn != "" {
		i := rec.Schema().FieldIndices(cfg.RoutingKeyColumn)
		if len(i) != 1 {
			return nil, fmt.Errorf("%w: amqp sink: routing key column %q not in the batch", flightline.ErrSchemaMismatch, cfg.RoutingKeyColumn)
		}
		c, ok := rec.Column(i[0]).(*array.String)
		if !ok {
			return nil, fmt.Errorf("%w: amqp sink: routing key column %q is %s, not utf8", flightline.ErrSchemaMismatch, cfg.RoutingKeyColumn, rec.Column(i[0]).DataType())
		}
		keyCol = c
	}
	hdrs := make([]arrow.Array, len(cfg.Headers))
	for j, h := range cfg.Headers {
		i := rec.Schema().FieldIndices(h)
		if len(i) != 1 {
			return nil, fmt.Errorf("%w: amqp sink: header column %q not in the batch", flightline.ErrSchemaMismatch, h)
		}
		hdrs[j] = rec.Column(i[0])
	}
	var buf bytes.Buffer
	if err := rowenc.NewJSONL(rec.Schema()).Encode(&buf, rec); err != nil {
		return nil, fmt.Errorf("%w: amqp sink: %v", flightline.ErrInvalidInput, err)
	}
	lines := bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
	if rec.NumRows() == 0 {
		lines = nil
	}
	if int64(len(lines)) != rec.NumRows() {
		return nil, fmt.Errorf("%w: amqp sink: %d rows encoded as %d lines", flightline.ErrInternal, rec.NumRows(), len(lines))
	}
	now := time.Now()
	out := make([]message, len(lines))
	for r, body := range lines {
		k := key
		if keyCol != nil {
			if keyCol.IsNull(r) {
				return nil, fmt.Errorf("%w: amqp sink: row %d has a null routing key", flightline.ErrInvalidInput, r)
			}
			k = keyCol.Value(r)
		}
		var h amqp091.Table
		if len(hdrs) > 0 {
			h = amqp091.Table{}
			for j, a := range hdrs {
				if !a.IsNull(r) {
					h[cfg.Headers[j]] = a.ValueStr(r)
				}
			}
		}
		out[r] = message{key: k, pub: amqp091.Publishing{
			ContentType: "application/json", DeliveryMode: amqp091.Persistent, Timestamp: now,
			MessageId: MessageID(w.p, cp, r), Headers: h, Body: body,
		}}
	}
	return out, nil
}

// MessageID is the MessageId of row r of the batch with checkpoint cp of
// pipeline p: the hex SHA-256 of p.ID, p.Target, cp and r, each
// length-prefixed.
func MessageID(p flightsink.Pipeline, cp []byte, r int) string {
	h := sha256.New()
	for _, s := range [][]byte{[]byte(p.ID), []byte(p.Target), cp} {
		_ = binary.Write(h, binary.BigEndian, uint64(len(s)))
		h.Write(s)
	}
	_ = binary.Write(h, binary.BigEndian, uint64(r))
	return hex.EncodeToString(h.Sum(nil))
}

// Close closes the writer's connection.
func (w *Writer) Close(context.Context) error {
	err := w.conn.Close()
	if err != nil && !errors.Is(err, amqp091.ErrClosed) {
		return fmt.Errorf("amqp sink: close: %v", err)
	}
	return nil
}
