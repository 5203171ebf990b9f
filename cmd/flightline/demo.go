package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/internal/metrics"
	"github.com/flightline/flightline/kafkadecode"
	"github.com/flightline/flightline/pipelines"
	"github.com/flightline/flightline/pipelines/demo"
)

// demoCommand runs embedded Kafka (kfake, seeded with generated JSON orders) ->
// Kafka source -> Flight -> coordinator -> Flight -> Delta sink in one
// process, with both endpoints on loopback, until the table holds every
// seeded order; then it prints what it wrote. Run it again after a kill
// and it resumes where the table's checkpoint says.
func demoCommand(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("demo", "demo [--out DIR] [--rows N] [flags]")
	var c common
	c.register(fs)
	dir := fs.String("out", "flightline-demo", "directory holding the Delta table (DIR/orders)")
	rows := fs.Int64("rows", 1_000_000, "orders seeded into the embedded Kafka topic")
	partitions := fs.Int("partitions", 4, "partitions of the embedded topic")
	batchRows := fs.Int("batch-rows", 10_000, "rows per batch (and per Delta commit)")
	interval := fs.Duration("interval", 0, "pause before each batch (slows the demo down, e.g. for crash tests)")
	pipeline := fs.String("pipeline", "demo", "pipeline id")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *rows < 0 || *partitions < 1 {
		return fmt.Errorf("demo: --rows must be ≥ 0 and --partitions ≥ 1")
	}
	c.logLevel = map[bool]string{true: c.logLevel, false: "warn"}[isFlagSet(fs, "log-level")]
	log, err := c.logger(logOutput)
	if err != nil {
		return err
	}
	m := metrics.New()
	stopMetrics, err := c.serveMetrics(m, log)
	if err != nil {
		return err
	}
	defer stopMetrics()

	seedStart := time.Now()
	cluster, ends, err := demo.Seed(ctx, *rows, int32(*partitions))
	if err != nil {
		return fmt.Errorf("demo: seeding the embedded Kafka: %w", err)
	}
	defer cluster.Close()
	seeded := time.Since(seedStart)

	sc, err := kafkadecode.SchemaOf[demo.Order]()
	if err != nil {
		return err
	}
	table := filepath.Join(*dir, "orders")
	var opts []pipelines.Option
	opts = append(opts, pipelines.DeltaOptions(delta.Logger(log)), pipelines.ValueColumns(),
		pipelines.Loopback([]flightsrc.ServerOption{flightsrc.WithLogger(log), flightsrc.WithMetrics(m.Registry())},
			[]flightsink.ServerOption{flightsink.WithLogger(log), flightsink.WithMetrics(m.Registry())}))
	if *interval > 0 {
		opts = append(opts, pipelines.Transform(demo.Pause(*interval)))
	}
	p := flightsink.Pipeline{ID: *pipeline}
	r, err := pipelines.KafkaToDelta(ctx, pipelines.KafkaConfig{
		Topic:    "orders",
		Pipeline: p,
		Source: kafka.Config{
			Brokers:                cluster.ListenAddrs(),
			WithoutGroupMembership: true, // one instance: no group join to wait for
			BatchRows:              *batchRows, BatchWait: 100 * time.Millisecond,
		},
		SourceOptions: []kafka.Option{kafka.ValueDecoder(func() (kafkadecode.ValueDecoder, error) { return kafkadecode.NewJSONDecoder(sc) }),
			kafka.Logger(log),
			kafka.Registerer(m.Registry())},
		Coordinator: []coordinator.Option{coordinator.WithLogger(log), coordinator.WithMetrics(m.Registry())},
	}, table, opts...)
	if err != nil {
		return err
	}
	defer r.Close()

	before, err := r.Checkpoint(ctx)
	if err != nil {
		return fmt.Errorf("demo: reading the table's checkpoint: %w", err)
	}
	fmt.Fprintf(out, "flightline demo: embedded Kafka (kfake, topic orders, %d partitions, %d JSON orders, seeded in %s) -> Flight %s -> coordinator -> Flight %s -> Delta table %s\n",
		*partitions, *rows, seeded.Round(time.Millisecond), r.SourceURL, r.SinkURL, table)
	if before != nil {
		fmt.Fprintf(out, "resuming pipeline %q after checkpoint %s\n", *pipeline, before)
	}

	// The topic never ends: run until the table's checkpoint covers every
	// seeded order, watching it through the sink.
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- r.Run(rctx) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var runErr error
wait:
	for {
		select {
		case runErr = <-done:
			break wait
		case <-tick.C:
			// Not ctx: an interrupt ends Run (and the loop), not this read.
			cp, err := r.Checkpoint(context.WithoutCancel(ctx))
			if err != nil {
				stop()
				<-done
				return err
			}
			if demo.Covered(cp, ends) {
				stop()
				runErr = <-done
				break wait
			}
		}
	}
	took := time.Since(start)
	if runErr != nil {
		return runErr
	}
	st := r.Coordinator.Stats()
	after, err := r.Checkpoint(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	abs, _ := filepath.Abs(table)
	fmt.Fprintf(out, "wrote %d rows in %d batches this run (%.1f MB, %s, %.0f rows/s)\n",
		st.Rows, st.Batches, float64(st.Bytes)/1e6, took.Round(time.Millisecond), float64(st.Rows)/took.Seconds())
	fmt.Fprintf(out, "committed checkpoint: %s\n", after)
	if ctx.Err() != nil {
		fmt.Fprintf(out, "interrupted before the end of the topic; run the demo again to resume\n")
	}
	fmt.Fprintf(out, "table: %s (Delta Lake; columns partition, offset, timestamp, key, order_id, customer, item, quantity, price, created_at, headers)\n", abs)
	fmt.Fprintf(out, "read it with: python3 -c \"import deltalake; print(deltalake.DeltaTable('%s').to_pyarrow_table().num_rows)\"\n", abs)
	fmt.Fprintf(out, "  (needs pip install deltalake; after make test, ~/.cache/flightline/venv/bin/python has it)\n")
	return nil
}

func isFlagSet(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}
