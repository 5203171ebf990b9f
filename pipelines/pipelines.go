// Package pipelines holds one-call constructors for common pipelines. It
// imports heavy sinks (Delta Lake's Parquet and object-store code); the core
// packages do not import it.
package pipelines

import (
	"context"
	"fmt"
	"net"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/internal/endpoint"
)

// Option configures KafkaToDelta. Options are validated once, in
// KafkaToDelta.
type Option func(*options) error

type options struct {
	delta    []delta.Option
	columns  bool
	then     coordinator.Transform
	mem      memory.Allocator
	loopback bool
	srcOpts  []flightsrc.ServerOption
	sinkOpts []flightsink.ServerOption
}

// DeltaOptions passes options to the Delta sink (storage options,
// Instance, checkpoint interval, allocator, ...).
func DeltaOptions(opts ...delta.Option) Option {
	return func(o *options) error { o.delta = append(o.delta, opts...); return nil }
}

// ValueColumns stores the fields of the decoded value (the source needs a
// kafka.ValueDecoder, e.g. JSON with a schema) as top-level table columns
// next to partition, offset, timestamp, key and headers, instead of one
// struct column. See kafka.ValueColumns.
func ValueColumns() Option { return func(o *options) error { o.columns = true; return nil } }

// Transform runs f over every batch after the pipeline's own transforms
// (ValueColumns), just before the sink. Ownership follows
// coordinator.Transform.
func Transform(f coordinator.Transform) Option {
	return func(o *options) error { o.then = f; return nil }
}

// Allocator is the allocator of the copies the pipeline's transforms make
// (nil: the default allocator).
func Allocator(mem memory.Allocator) Option {
	return func(o *options) error { o.mem = mem; return nil }
}

// Loopback serves the source and the sink on ephemeral 127.0.0.1 Flight
// ports in this process, and the coordinator talks to them through Flight
// clients, exactly as it would to separate processes (this is what
// `flightline demo` shows). The servers stop when the Runner closes.
func Loopback(src []flightsrc.ServerOption, sink []flightsink.ServerOption) Option {
	return func(o *options) error {
		o.loopback, o.srcOpts, o.sinkOpts = true, src, sink
		return nil
	}
}

// Runner is a ready Kafka → Delta pipeline. Run it once; Close releases it
// when Run was never called.
type Runner struct {
	// Coordinator moves the batches; its Stats report progress.
	Coordinator *coordinator.Coordinator
	// Source is the in-process Kafka source, Sink the Delta sink (also when
	// Loopback puts Flight between them and the coordinator).
	Source *kafka.Source
	Sink   *delta.Sink
	// Pipeline is the pipeline the coordinator runs (its checkpoint key).
	Pipeline flightsink.Pipeline
	// SourceURL and SinkURL are the loopback Flight endpoints (Loopback
	// only).
	SourceURL, SinkURL string

	closers []func()
}

// KafkaToDelta returns a Kafka → Delta Lake pipeline: the Go counterpart of
// the kafka_to_delta(...) helper Python pipeline users know. tableURI is a
// local path or s3://bucket/prefix (with DeltaOptions(delta.StorageOptions
// (...))); cfg.Pipeline.ID keys the checkpoint in the table and is the
// consumer group unless cfg.Source sets GroupID. Raw keys and values are
// stored as Delta binary columns; with a kafka.ValueDecoder the value is a
// struct column, or one column per field with ValueColumns.
//
// The pipeline is exactly-once: every batch and its per-partition offsets
// are one Delta commit, and the table's checkpoint is the resume authority
// (the consumer group's commit is advisory). For scale-out, run one
// KafkaToDelta per process with the same cfg and a distinct delta.Instance
// per process: the group shares the partitions and the Delta sink merges
// per-partition positions across instances (docs/sources/kafka.md).
//
//	r, err := pipelines.KafkaToDelta(ctx, kafka.PipelineConfig{
//		Topic:    "orders",
//		Pipeline: flightsink.Pipeline{ID: "orders-to-delta"},
//		Source:   []kafka.Option{kafka.Brokers("127.0.0.1:9092")},
//	}, "/data/orders")
//	if err == nil {
//		err = r.Run(ctx)
//	}
//
// ctx bounds opening the table, not the pipeline's lifetime.
func KafkaToDelta(ctx context.Context, cfg kafka.PipelineConfig, tableURI string, opts ...Option) (*Runner, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if cfg.Topic == "" || cfg.Pipeline.ID == "" {
		return nil, fmt.Errorf("%w: kafka to delta needs a topic and a pipeline id", flightline.ErrInvalidInput)
	}
	r := &Runner{Pipeline: cfg.Pipeline}
	ok := false
	defer func() {
		if !ok {
			r.Close()
		}
	}()
	var err error
	if r.Sink, err = delta.New(ctx, tableURI, o.delta...); err != nil {
		return nil, err
	}
	if r.Source, err = kafka.New(append(append([]kafka.Option{}, cfg.Source...), kafka.Topics(cfg.Topic))...); err != nil {
		return nil, err
	}
	r.closers = append(r.closers, func() { r.Source.Close() })
	var src flightsrc.Source = r.Source
	var sink flightsink.Sink = r.Sink
	if o.loopback {
		if r.SourceURL, err = r.serve(flightsrc.NewServer(compact(r.Source, o.mem), o.srcOpts...)); err != nil {
			return nil, err
		}
		if r.SinkURL, err = r.serve(flightsink.NewServer(r.Sink, o.sinkOpts...)); err != nil {
			return nil, err
		}
		sc, err := flightsrc.Dial(r.SourceURL, flightsrc.ClientConfig{})
		if err != nil {
			return nil, err
		}
		r.closers = append(r.closers, func() { sc.Close() })
		kc, err := flightsink.Dial(r.SinkURL, flightsink.ClientConfig{})
		if err != nil {
			return nil, err
		}
		r.closers = append(r.closers, func() { kc.Close() })
		src, sink = sc, kc
	}
	co := append([]coordinator.Option{}, cfg.Coordinator...)
	if t := chain(o); t != nil {
		co = append(co, coordinator.WithTransform(t))
	}
	if r.Coordinator, err = coordinator.New(src, sink, cfg.Topic, cfg.Pipeline, co...); err != nil {
		return nil, err
	}
	ok = true
	return r, nil
}

// chain is the pipeline's transform: ValueColumns, then Transform's.
func chain(o options) coordinator.Transform {
	var first coordinator.Transform
	if o.columns {
		first = kafka.ValueColumns(o.mem)
	}
	switch {
	case first == nil:
		return o.then
	case o.then == nil:
		return first
	}
	then := o.then
	return func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		mid, err := first(ctx, rec)
		if err != nil {
			return nil, err
		}
		defer mid.Release()
		return then(ctx, mid)
	}
}

// serve serves svc on an ephemeral loopback port until Close.
func (r *Runner) serve(svc flight.FlightServer) (string, error) {
	gs, _, err := endpoint.NewServer(endpoint.ServerConfig{})
	if err != nil {
		return "", err
	}
	flight.RegisterFlightServiceServer(gs, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go gs.Serve(lis)
	r.closers = append(r.closers, gs.Stop)
	return "grpc://" + lis.Addr().String(), nil
}

// Run moves records until ctx ends (nil), the source ends, or a
// non-retryable error; then it closes the pipeline (leaving the consumer
// group and stopping any loopback servers).
func (r *Runner) Run(ctx context.Context) error {
	defer r.Close()
	return r.Coordinator.Run(ctx)
}

// Checkpoint returns the pipeline's committed checkpoint in the table,
// read from the sink directly (nil before the first commit).
func (r *Runner) Checkpoint(ctx context.Context) ([]byte, error) {
	return r.Sink.Checkpoint(ctx, r.Pipeline)
}

// Close stops the loopback servers, closes the clients and the source. It
// is idempotent and safe after Run.
func (r *Runner) Close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
}
