package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/kafka"
	"github.com/flightline/flightline/internal/metrics"
	"github.com/flightline/flightline/kafkadecode"
	"github.com/flightline/flightline/pipelines"
	"github.com/flightline/flightline/transform"
)

// demoOrder is one generated order, as JSON in the embedded topic and as
// the typed columns of the Delta table.
type demoOrder struct {
	OrderID   int64     `arrow:"order_id,required" json:"order_id"`
	Customer  string    `arrow:"customer" json:"customer"`
	Item      string    `arrow:"item" json:"item"`
	Quantity  int32     `arrow:"quantity" json:"quantity"`
	Price     float64   `arrow:"price" json:"price"`
	CreatedAt time.Time `arrow:"created_at,unit=ms" json:"created_at"`
}

var demoItems = []string{"keyboard", "mouse", "monitor", "laptop", "dock", "cable", "headset", "webcam"}

// demoRecord is order i of the demo topic: the same bytes, partition and
// (hence) offset on every run, so a restarted demo re-creates the topic
// its table's checkpoint refers to.
func demoRecord(i int64, partitions int32) *kgo.Record {
	v := fmt.Appendf(nil, `{"order_id":%d,"customer":"customer-%d","item":"%s","quantity":%d,"price":%d.%02d,"created_at":%d}`,
		i, i%9973, demoItems[i%int64(len(demoItems))], 1+i%5, 5+i%500, i%100, 1767225600000+i)
	return &kgo.Record{Partition: int32(i % int64(partitions)), Key: fmt.Appendf(nil, "order-%d", i), Value: v}
}

// seedDemo starts an in-memory kfake cluster holding rows orders in topic
// "orders" and returns it with each partition's end offset.
func seedDemo(ctx context.Context, rows int64, partitions int32) (*kfake.Cluster, checkpoint.Positions, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "orders"))
	if err != nil {
		return nil, nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("orders"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	defer cl.Close()
	errc := make(chan error, 1)
	for i := range rows {
		cl.Produce(ctx, demoRecord(i, partitions), func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		c.Close()
		return nil, nil, err
	}
	select {
	case err := <-errc:
		c.Close()
		return nil, nil, fmt.Errorf("seeding the embedded Kafka: %w", err)
	default:
	}
	ends := checkpoint.Positions{}
	for p := range partitions {
		n := rows / int64(partitions)
		if int64(p) < rows%int64(partitions) {
			n++
		}
		ends[fmt.Sprintf("orders/%d", p)] = n
	}
	return c, ends, nil
}

// demo runs embedded Kafka (kfake, seeded with generated JSON orders) ->
// Kafka source -> Flight -> coordinator -> Flight -> Delta sink in one
// process, with both endpoints on loopback, until the table holds every
// seeded order; then it prints what it wrote. Run it again after a kill
// and it resumes where the table's checkpoint says.
func demo(ctx context.Context, args []string, out io.Writer) error {
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
	cluster, ends, err := seedDemo(ctx, *rows, int32(*partitions))
	if err != nil {
		return fmt.Errorf("demo: seeding the embedded Kafka: %w", err)
	}
	defer cluster.Close()
	seeded := time.Since(seedStart)

	sc, err := kafkadecode.SchemaOf[demoOrder]()
	if err != nil {
		return err
	}
	table := filepath.Join(*dir, "orders")
	var opts []pipelines.Option
	opts = append(opts, pipelines.DeltaOptions(delta.Logger(log)), pipelines.ValueColumns(),
		pipelines.Loopback([]flightsrc.ServerOption{flightsrc.WithLogger(log), flightsrc.WithMetrics(m.Registry())},
			[]flightsink.ServerOption{flightsink.WithLogger(log), flightsink.WithMetrics(m.Registry())}))
	if *interval > 0 {
		opts = append(opts, pipelines.Transform(pause(*interval)))
	}
	p := flightsink.Pipeline{ID: *pipeline}
	r, err := pipelines.KafkaToDelta(ctx, pipelines.KafkaConfig{
		Topic:    "orders",
		Pipeline: p,
		Source: []kafka.Option{
			kafka.Brokers(cluster.ListenAddrs()...),
			kafka.WithoutGroupMembership(), // one instance: no group join to wait for
			kafka.BatchRows(*batchRows), kafka.BatchWait(100 * time.Millisecond),
			kafka.ValueDecoder(func() (kafkadecode.ValueDecoder, error) { return kafkadecode.NewJSONDecoder(sc) }),
			kafka.Logger(log), kafka.Registerer(m.Registry()),
		},
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
			if covered(cp, ends) {
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

// covered reports whether checkpoint cp reaches ends in every partition.
func covered(cp []byte, ends checkpoint.Positions) bool {
	empty := true
	for _, v := range ends {
		empty = empty && v == 0
	}
	if empty {
		return true
	}
	if cp == nil {
		return false
	}
	p, err := checkpoint.Parse(cp)
	return err == nil && checkpoint.Covers(p, ends)
}

// pause is a transform that waits d before passing each batch on.
func pause(d time.Duration) transform.Func {
	return func(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		rec.Retain()
		return rec, nil
	}
}

func isFlagSet(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}
