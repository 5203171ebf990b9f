package config

// Dead letters of a config-file pipeline. A record the source cannot
// decode (bad JSON, a bad Avro payload, an unknown schema id) or that is
// over max_value_bytes becomes a dead letter, which goes where the
// pipeline says:
//
//   - no deadletter_sink and no deadletter key (deadletter: fail): the
//     source stops the pipeline with an error naming the record's position
//     and reason;
//   - deadletter: discard: counted (flightline_deadletters_total with
//     outcome="discarded"), logged, and dropped;
//   - deadletter_sink: written to that sink, any kind, as rows of
//     deadLetterSchema under pipeline "<id>.deadletters".
//
// The source hands dead letters over on the goroutine that reads the
// partition, before it returns the batch holding the neighbouring rows, and
// the router returns only once the dead-letter sink has committed them. So
// the batch that skipped a record cannot commit before its dead letter is
// durable: a crash can repeat a dead letter, never lose one. Repeats are
// absorbed by the sink's replay check: each write carries a Positions
// checkpoint (topic/partition → last dead offset + 1), and an exactly-once
// sink (PostgreSQL, Delta, Kafka, dir) skips a write its checkpoint
// already covers. An at-least-once sink (s3) rewrites the same object for
// the same checkpoint; a repeat grouped differently after a restart can
// appear twice there, with the same topic, partition and offset, which
// identify it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/kafkadecode"
)

// deadLetterSchema is the schema of the rows a dead-letter sink receives.
var deadLetterSchema = arrow.NewSchema([]arrow.Field{
	{Name: "pipeline", Type: arrow.BinaryTypes.String},
	{Name: "stage", Type: arrow.BinaryTypes.String}, // decode or load
	{Name: "reason", Type: arrow.BinaryTypes.String},
	{Name: "dead_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "topic", Type: arrow.BinaryTypes.String},
	{Name: "partition", Type: arrow.PrimitiveTypes.Int32},
	{Name: "offset", Type: arrow.PrimitiveTypes.Int64},
	{Name: "record_time", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "key", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true},
}, nil)

// deadLetterCounter counts dead letters by pipeline, stage and outcome
// (written or discarded).
var deadLetterCounter = func() func(reg prometheus.Registerer) *prometheus.CounterVec {
	return func(reg prometheus.Registerer) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flightline_deadletters_total",
			Help: "Records that could not be decoded or stored, by pipeline, stage (decode, load) and outcome (written to the dead-letter sink, discarded)."},
			[]string{"pipeline", "stage", "outcome"})
		if reg == nil {
			return c
		}
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return are.ExistingCollector.(*prometheus.CounterVec)
			}
		}
		return c
	}
}()

// deadLetterRouter takes one pipeline's dead letters to its dead-letter
// sink, or counts and discards them.
type deadLetterRouter struct {
	pipeline string
	log      *slog.Logger
	count    *prometheus.CounterVec
	mem      memory.Allocator

	// With a sink; nil when discarding.
	sink flightsink.Sink
	pl   flightsink.Pipeline

	// used is set when a source kind takes the router (at open): a
	// source that does not cannot honour the pipeline's dead-letter
	// setting, which is then an error.
	used bool

	routed atomic.Int64 // dead letters written or discarded

	mu sync.Mutex
	w  flightsink.Writer // open writer; nil until the first write or after a failure
}

func newDeadLetterRouter(p *pipelineConf, sink flightsink.Sink, log *slog.Logger, reg prometheus.Registerer) *deadLetterRouter {
	r := &deadLetterRouter{pipeline: p.name, log: log, count: deadLetterCounter(reg), mem: memory.DefaultAllocator, sink: sink}
	if sink != nil {
		r.pl = deadLetterPipeline(p)
	}
	return r
}

// deadLetter is one record, whatever the source.
type deadLetter struct {
	topic      string
	partition  int32
	offset     int64
	recordTime int64 // ms since the epoch; < 0: unknown
	key, value []byte
	stage      string
	reason     string
}

// kafkaHandler adapts the router to the Kafka source's handler.
func (r *deadLetterRouter) kafkaHandler() func(ctx context.Context, topic string, letters []kafkadecode.DeadLetter) error {
	r.used = true
	return func(ctx context.Context, topic string, letters []kafkadecode.DeadLetter) error {
		ds := make([]deadLetter, len(letters))
		for i, l := range letters {
			stage := "decode"
			if errors.Is(l.Err, errOverSize) {
				stage = "load"
			}
			ds[i] = deadLetter{topic: topic, partition: l.Partition, offset: l.Offset, recordTime: l.Timestamp,
				key: l.Key, value: l.Value, stage: stage, reason: fmt.Sprint(l.Err)}
		}
		return r.route(ctx, ds)
	}
}

// route writes ds to the dead-letter sink and returns once it committed
// them, or counts and discards them.
func (r *deadLetterRouter) route(ctx context.Context, ds []deadLetter) error {
	if len(ds) == 0 {
		return nil
	}
	if r.sink == nil {
		r.routed.Add(int64(len(ds)))
		for _, d := range ds {
			r.count.WithLabelValues(r.pipeline, d.stage, "discarded").Inc()
		}
		r.log.Warn("dead letters discarded", "pipeline", r.pipeline, "count", len(ds), "topic", ds[0].topic,
			"partition", ds[0].partition, "first_offset", ds[0].offset, "first_reason", ds[0].reason)
		return nil
	}
	rec := r.batch(ds)
	defer rec.Release()
	cp := checkpoint.Positions{}
	for _, d := range ds {
		k := fmt.Sprintf("%s/%d", d.topic, d.partition)
		cp[k] = max(cp[k], d.offset+1)
	}
	if err := r.write(ctx, rec, cp.Encode()); err != nil {
		return fmt.Errorf("dead-letter sink: %w", err)
	}
	r.routed.Add(int64(len(ds)))
	for _, d := range ds {
		r.count.WithLabelValues(r.pipeline, d.stage, "written").Inc()
	}
	r.log.Info("dead letters written", "pipeline", r.pipeline, "count", len(ds), "topic", ds[0].topic,
		"partition", ds[0].partition, "first_offset", ds[0].offset, "first_reason", ds[0].reason)
	return nil
}

// write commits rec with cp, opening the writer if needed. A fenced
// writer (another instance of the pipeline opened the dead-letter
// pipeline since) is re-opened once: dead letters of every instance are
// wanted.
func (r *deadLetterRouter) write(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if r.w == nil {
			w, _, err := r.sink.Open(ctx, r.pl)
			if err != nil {
				return err
			}
			r.w = w
		}
		err := r.w.WriteBatch(ctx, rec, cp)
		if err == nil {
			return nil
		}
		_ = r.w.Close(context.WithoutCancel(ctx))
		r.w = nil
		if attempt > 0 || !errors.Is(err, flightline.ErrFenced) {
			return err
		}
	}
}

// total is the number of dead letters written or discarded so far.
func (r *deadLetterRouter) total() int64 { return r.routed.Load() }

// close ends the writer.
func (r *deadLetterRouter) close(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.w != nil {
		_ = r.w.Close(ctx)
		r.w = nil
	}
}

func (r *deadLetterRouter) batch(ds []deadLetter) arrow.RecordBatch {
	b := array.NewRecordBuilder(r.mem, deadLetterSchema)
	defer b.Release()
	now := arrow.Timestamp(time.Now().UnixMicro())
	for _, d := range ds {
		b.Field(0).(*array.StringBuilder).Append(r.pipeline)
		b.Field(1).(*array.StringBuilder).Append(d.stage)
		b.Field(2).(*array.StringBuilder).Append(d.reason)
		b.Field(3).(*array.TimestampBuilder).Append(now)
		b.Field(4).(*array.StringBuilder).Append(d.topic)
		b.Field(5).(*array.Int32Builder).Append(d.partition)
		b.Field(6).(*array.Int64Builder).Append(d.offset)
		if d.recordTime >= 0 {
			b.Field(7).(*array.TimestampBuilder).Append(arrow.Timestamp(d.recordTime))
		} else {
			b.Field(7).AppendNull()
		}
		for i, v := range [][]byte{d.key, d.value} {
			if v == nil {
				b.Field(8 + i).AppendNull()
			} else {
				b.Field(8 + i).(*array.BinaryBuilder).Append(v)
			}
		}
	}
	return b.NewRecordBatch()
}
