// Package pipelines holds one-call constructors for common pipelines: a
// source, a sink and the coordinator between them. It is the one place
// that imports both sides: connectors import only their own side's
// contract (flightsrc or flightsink), never the coordinator. It imports
// heavy sinks (Delta Lake's Parquet and object-store code); the core
// packages do not import it.
package pipelines

import (
	"context"
	"fmt"
	"net"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/transform"
)

// KafkaConfig configures a Kafka pipeline (Kafka, KafkaToDelta).
type KafkaConfig struct {
	// Topic is the topic to read (the stream). Required.
	Topic string
	// Pipeline names the pipeline in the sink (its checkpoint key) and the
	// target inside the sink (table, directory, topic). Pipeline.ID is
	// required and is the consumer group unless Source sets GroupID.
	Pipeline flightsink.Pipeline
	// Source configures the Kafka source: Brokers is required; Topic is
	// added to its Topics.
	Source kafka.Config
	// SourceOptions holds the Kafka source's options (value decoder,
	// logger, allocator, TLS, ...).
	SourceOptions []kafka.Option
	// Coordinator holds coordinator options (window, backoff, logger, ...).
	Coordinator []coordinator.Option
}

// Option configures Kafka and KafkaToDelta. Options are validated once,
// in the constructor.
type Option func(*options) error

type options struct {
	deltaCfg *delta.Config
	delta    []delta.Option
	columns  bool
	then     transform.Func
	mem      memory.Allocator
	loopback bool
	srcOpts  []flightsrc.ServerOption
	sinkOpts []flightsink.ServerOption
}

// DeltaConfig is the Config of the Delta sink KafkaToDelta opens
// (storage options, Instance, checkpoint interval, ...); its URI is
// KafkaToDelta's tableURI. Kafka, which is given its sink, refuses it.
func DeltaConfig(c delta.Config) Option {
	return func(o *options) error { o.deltaCfg = &c; return nil }
}

// DeltaOptions passes options to the Delta sink KafkaToDelta opens
// (allocator, logger, ...). Kafka, which is given its sink, refuses it.
func DeltaOptions(opts ...delta.Option) Option {
	return func(o *options) error { o.delta = append(o.delta, opts...); return nil }
}

// ValueColumns stores the fields of the decoded value (the source needs a
// kafka.ValueDecoder, e.g. JSON with a schema) as top-level columns next
// to partition, offset, timestamp, key and headers, instead of one struct
// column. See kafka.ValueColumns.
func ValueColumns() Option { return func(o *options) error { o.columns = true; return nil } }

// Transform runs f over every batch after the pipeline's own transforms
// (ValueColumns), just before the sink. Ownership follows transform.Func.
func Transform(f transform.Func) Option {
	return func(o *options) error { o.then = f; return nil }
}

// Allocator is the allocator of the copies the pipeline's transforms and
// its loopback source server make (nil: the default allocator).
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

// Runner is a ready Kafka pipeline. Run it once; Close releases it when
// Run was never called.
type Runner struct {
	// Coordinator moves the batches; its Stats report progress.
	Coordinator *coordinator.Coordinator
	// Source is the in-process Kafka source and Sink the sink (also when
	// Loopback puts Flight between them and the coordinator). With
	// KafkaToDelta, Sink is a *delta.Sink.
	Source *kafka.Source
	Sink   flightsink.Sink
	// Pipeline is the pipeline the coordinator runs (its checkpoint key).
	Pipeline flightsink.Pipeline
	// SourceURL and SinkURL are the loopback Flight endpoints (Loopback
	// only).
	SourceURL, SinkURL string

	closers []func()
}

// Kafka returns a one-call Kafka → sink pipeline for any flightsink.Sink.
// For Kafka → Delta Lake, KafkaToDelta also opens the table:
//
//	r, err := pipelines.Kafka(pipelines.KafkaConfig{
//		Topic:    "orders",
//		Pipeline: flightsink.Pipeline{ID: "orders-to-files", Target: "orders"},
//		Source:   kafka.Config{Brokers: []string{"127.0.0.1:9092"}},
//	}, sink)
//	if err == nil {
//		err = r.Run(ctx)
//	}
//
// The pipeline is exactly-once when the sink is: the sink's checkpoint is
// the resume authority, the consumer group's commit is advisory. The
// Runner does not close sink.
func Kafka(cfg KafkaConfig, sink flightsink.Sink, opts ...Option) (*Runner, error) {
	o, err := parse(opts)
	if err != nil {
		return nil, err
	}
	if len(o.delta) > 0 || o.deltaCfg != nil {
		return nil, fmt.Errorf("%w: DeltaConfig and DeltaOptions apply to KafkaToDelta, not to a pipeline given its sink", flightline.ErrInvalidInput)
	}
	if sink == nil {
		return nil, fmt.Errorf("%w: kafka pipeline needs a sink", flightline.ErrInvalidInput)
	}
	return build(cfg, sink, o)
}

// KafkaToDelta returns a Kafka → Delta Lake pipeline: the Go counterpart of
// the kafka_to_delta(...) helper Python pipeline users know. tableURI is a
// local path or s3://bucket/prefix (with DeltaConfig(delta.Config{Storage:
// ...})); cfg.Pipeline.ID keys the checkpoint in the table and is the
// consumer group unless cfg.Source sets GroupID. Raw keys and values are
// stored as Delta binary columns; with a kafka.ValueDecoder option the
// value is a struct column, or one column per field with ValueColumns.
//
// The pipeline is exactly-once: every batch and its per-partition offsets
// are one Delta commit, and the table's checkpoint is the resume authority
// (the consumer group's commit is advisory). For scale-out, run one
// KafkaToDelta per process with the same cfg and a distinct Instance in
// DeltaConfig per process: the group shares the partitions and the Delta sink merges
// per-partition positions across instances (docs/sources/kafka.md).
//
//	r, err := pipelines.KafkaToDelta(ctx, pipelines.KafkaConfig{
//		Topic:    "orders",
//		Pipeline: flightsink.Pipeline{ID: "orders-to-delta"},
//		Source:   kafka.Config{Brokers: []string{"127.0.0.1:9092"}},
//	}, "/data/orders")
//	if err == nil {
//		err = r.Run(ctx)
//	}
//
// ctx bounds opening the table, not the pipeline's lifetime.
func KafkaToDelta(ctx context.Context, cfg KafkaConfig, tableURI string, opts ...Option) (*Runner, error) {
	o, err := parse(opts)
	if err != nil {
		return nil, err
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	var dc delta.Config
	if o.deltaCfg != nil {
		dc = *o.deltaCfg
	}
	dc.URI = tableURI
	sink, err := delta.New(ctx, dc, o.delta...)
	if err != nil {
		return nil, err
	}
	return build(cfg, sink, o)
}

func parse(opts []Option) (options, error) {
	var o options
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

func (cfg KafkaConfig) check() error {
	if cfg.Topic == "" || cfg.Pipeline.ID == "" {
		return fmt.Errorf("%w: kafka pipeline needs a topic and a pipeline id", flightline.ErrInvalidInput)
	}
	return nil
}

// build opens the source and, with Loopback, the servers and clients, and
// returns the Runner; on error it closes what it opened.
func build(cfg KafkaConfig, sink flightsink.Sink, o options) (*Runner, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	r := &Runner{Pipeline: cfg.Pipeline, Sink: sink}
	ok := false
	defer func() {
		if !ok {
			r.Close()
		}
	}()
	var err error
	kcfg := cfg.Source
	kcfg.Topics = append(append([]string{}, kcfg.Topics...), cfg.Topic)
	if r.Source, err = kafka.New(context.Background(), kcfg, cfg.SourceOptions...); err != nil {
		return nil, err
	}
	r.closers = append(r.closers, func() { r.Source.Close() })
	var src flightsrc.Source = r.Source
	if o.loopback {
		// The source server compacts the Kafka source's view columns
		// (flightsrc.WireCompacter); its copies come from o.mem unless the
		// caller's server options say otherwise.
		srcOpts := o.srcOpts
		if o.mem != nil {
			srcOpts = append([]flightsrc.ServerOption{flightsrc.WithAllocator(o.mem)}, srcOpts...)
		}
		if r.SourceURL, err = r.serve(flightsrc.NewServer(r.Source, srcOpts...)); err != nil {
			return nil, err
		}
		if r.SinkURL, err = r.serve(flightsink.NewServer(sink, o.sinkOpts...)); err != nil {
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
	var first transform.Func
	if o.columns {
		first = kafka.ValueColumns(o.mem)
	}
	if t := transform.Chain(first, o.then); t != nil {
		co = append(co, coordinator.WithTransform(t))
	}
	if r.Coordinator, err = coordinator.New(src, sink, cfg.Topic, cfg.Pipeline, co...); err != nil {
		return nil, err
	}
	ok = true
	return r, nil
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

// Checkpoint returns the pipeline's committed checkpoint, read from the
// sink directly (nil before the first commit).
func (r *Runner) Checkpoint(ctx context.Context) ([]byte, error) {
	return r.Sink.Checkpoint(ctx, r.Pipeline)
}

// Close stops the loopback servers, closes the clients and the source (not
// a sink given to Kafka). It is idempotent and safe after Run.
func (r *Runner) Close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.closers = nil
}
