// Throughput of the AMQP sink against RabbitMQ, side by side with a plain
// amqp091-go publisher with confirms sending the same messages, encoded
// before the timer; figures and the command in bench/destinations.md.

package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/amqp"
	"github.com/flightline/flightline/internal/rowenc"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// amqpRows rows per op, in batches of amqpBatchRows: one message per row.
const (
	amqpRows      = 100_000
	amqpBatchRows = 10_000
)

// BenchmarkAMQPSink publishes the same rows three ways to one topic
// exchange of the benchmark's own, bound to one (non-durable, so that the
// broker keeps them in memory) queue for every routing key; the queue is
// purged after every op, outside the timer:
//
//   - plain: amqp091-go on a channel in confirm mode (dialled before the
//     timer), each batch's messages (the sink's JSON bodies, MessageIds,
//     content type, timestamp, persistent delivery, mandatory: made
//     before the timer) published with
//     PublishWithDeferredConfirmWithContext, then every confirm of the
//     batch awaited before the next batch (the library's documented way);
//   - plain_notify: the same messages with PublishWithContext, the
//     confirms read from a NotifyPublish channel as large as a batch once
//     the batch is published (the older idiom, and the sink's: no object
//     per message);
//   - sink: flightsink/amqp Open (its connection and channel, inside the
//     timer, as BenchmarkS3's sink side), WriteBatch per batch (JSON
//     encoding of the rows, MessageIds, publishing while draining
//     confirms, every confirm awaited before WriteBatch returns).
//
// rows/s is messages per second for all three.
func BenchmarkAMQPSink(b *testing.B) {
	u := servicetest.Need(b, "FLIGHTLINE_AMQP_URL", "RabbitMQ")
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(b, 0)
	batches := pgBatches(mem, amqpRows)
	defer func() {
		for _, r := range batches {
			r.Release()
		}
	}()
	var small []arrow.RecordBatch
	for _, r := range batches {
		for from := int64(0); from < r.NumRows(); from += amqpBatchRows {
			small = append(small, r.NewSlice(from, min(from+amqpBatchRows, r.NumRows())))
		}
	}
	defer func() {
		for _, r := range small {
			r.Release()
		}
	}()

	conn, err := amqp091.Dial(u)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	admin, err := conn.Channel()
	if err != nil {
		b.Fatal(err)
	}
	name := fmt.Sprintf("fl_bench_%d", rand.Int64())
	if err := admin.ExchangeDeclare(name, "topic", false, true, false, false, nil); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.QueueDeclare(name, false, false, false, false, nil); err != nil {
		b.Fatal(err)
	}
	defer func() { _, _ = admin.QueueDelete(name, false, false, false) }()
	if err := admin.QueueBind(name, "#", name, false, nil); err != nil {
		b.Fatal(err)
	}
	purge := func(b *testing.B) {
		b.StopTimer()
		if _, err := admin.QueuePurge(name, false); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}

	// The sink's messages, made once: the same bodies and MessageIds the
	// sink sends for the same pipeline and checkpoints.
	p := flightsink.Pipeline{ID: "bench", Target: "rows"}
	pubs := make([][]amqp091.Publishing, len(small))
	var at int64
	now := time.Now()
	for i, r := range small {
		at += r.NumRows()
		cp := checkpoint.Positions{"bench/0": at}.Encode()
		var buf bytes.Buffer
		if err := rowenc.NewJSONL(r.Schema()).Encode(&buf, r); err != nil {
			b.Fatal(err)
		}
		for j, body := range bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n")) {
			pubs[i] = append(pubs[i], amqp091.Publishing{ContentType: "application/json", DeliveryMode: amqp091.Persistent,
				Timestamp: now, MessageId: amqp.MessageID(p, cp, j), Body: body})
		}
	}

	ctx := context.Background()
	plain := side{"plain", func(b *testing.B) {
		conn, err := amqp091.Dial(u)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			b.Fatal(err)
		}
		if err := ch.Confirm(false); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			for _, batch := range pubs {
				dcs := make([]*amqp091.DeferredConfirmation, len(batch))
				for j, m := range batch {
					if dcs[j], err = ch.PublishWithDeferredConfirmWithContext(ctx, name, p.Target, true, false, m); err != nil {
						b.Fatal(err)
					}
				}
				for _, dc := range dcs {
					if ok, err := dc.WaitContext(ctx); err != nil || !ok {
						b.Fatalf("confirm: ack %v, %v", ok, err)
					}
				}
			}
			purge(b)
		}
		b.ReportMetric(amqpRows, "rows/op")
	}}
	plainNotify := side{"plain_notify", func(b *testing.B) {
		conn, err := amqp091.Dial(u)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err != nil {
			b.Fatal(err)
		}
		if err := ch.Confirm(false); err != nil {
			b.Fatal(err)
		}
		confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, amqpBatchRows))
		b.ResetTimer()
		for range b.N {
			for _, batch := range pubs {
				for _, m := range batch {
					if err := ch.PublishWithContext(ctx, name, p.Target, true, false, m); err != nil {
						b.Fatal(err)
					}
				}
				for range batch {
					if c := <-confirms; !c.Ack {
						b.Fatalf("nack of %d", c.DeliveryTag)
					}
				}
			}
			purge(b)
		}
		b.ReportMetric(amqpRows, "rows/op")
	}}
	sink := side{"sink", func(b *testing.B) {
		s, err := amqp.New(context.Background(), amqp.Config{URL: u, Exchange: name})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			w, _, err := s.Open(ctx, p)
			if err != nil {
				b.Fatal(err)
			}
			writeAll(b, w, small)
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
			purge(b)
		}
		b.ReportMetric(amqpRows, "rows/op")
	}}
	interleave(b, comparison{wallOnly: true, unit: "rows/s", perOp: amqpRows, ratios: []pair{{"sink", "plain"}, {"sink", "plain_notify"}, {"plain_notify", "plain"}}}, plain, plainNotify, sink)
}
