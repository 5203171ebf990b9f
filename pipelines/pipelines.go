// Package pipelines holds one-call constructors for common pipelines. It
// imports heavy sinks (Delta Lake's Parquet and object-store code); the core
// packages do not import it.
package pipelines

import (
	"context"

	"github.com/flightline/flightline/coordinator"

	"github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc/kafka"
)

// KafkaToDelta returns a Kafka → Delta Lake pipeline: the Go counterpart of
// the kafka_to_delta(...) helper Python pipeline users know. Keys and values
// are stored as Delta binary columns. tableURI is a
// local path or s3://bucket/prefix; cfg.Pipeline.ID keys the checkpoint in
// the table and is the consumer group unless cfg.Source sets GroupID.
//
// For scale-out, run one KafkaToDelta per process with the same cfg and a
// distinct delta.Instance per process: the group shares the partitions and
// the Delta sink merges per-partition positions across instances (see
// docs/sources/kafka.md).
//
//	r, err := pipelines.KafkaToDelta(ctx, kafka.PipelineConfig{
//		Topic:    "orders",
//		Pipeline: flightsink.Pipeline{ID: "orders-to-delta"},
//		Source:   []kafka.Option{kafka.Brokers("127.0.0.1:9092")},
//	}, "/data/orders")
//	if err == nil {
//		err = r.Run(ctx)
//	}
func KafkaToDelta(ctx context.Context, cfg kafka.PipelineConfig, tableURI string, deltaOpts ...delta.Option) (*kafka.Runner, error) {
	sink, err := delta.New(ctx, tableURI, deltaOpts...)
	if err != nil {
		return nil, err
	}
	// Delta has no view types: keys and values become binary columns.
	cfg.Coordinator = append(append([]coordinator.Option{}, cfg.Coordinator...), coordinator.WithTransform(kafka.BinaryColumns(nil)))
	return kafka.Pipeline(cfg, sink)
}
