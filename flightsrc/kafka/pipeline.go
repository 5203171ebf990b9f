package kafka

import (
	"context"
	"fmt"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
)

// PipelineConfig configures Pipeline.
type PipelineConfig struct {
	// Topic is the topic to read (the stream). Required.
	Topic string
	// Pipeline names the pipeline in the sink (its checkpoint key) and the
	// target inside the sink (table, directory, topic). Pipeline.ID is
	// required and is the consumer group unless Source sets GroupID.
	Pipeline flightsink.Pipeline
	// Source holds the source options: Brokers is required; Topics is
	// added from Topic.
	Source []Option
	// Coordinator holds coordinator options (window, backoff, logger, ...).
	Coordinator []coordinator.Option
}

// Runner is a Kafka pipeline ready to run.
type Runner struct {
	Source      *Source
	Coordinator *coordinator.Coordinator
}

// Pipeline returns a one-call Kafka → sink pipeline: the Go counterpart of
// the kafka_to_delta(...) helper Python pipeline users know, for any
// flightsink.Sink. For Kafka → Delta Lake use pipelines.KafkaToDelta,
// which adds the Delta sink and its options:
//
//	r, err := kafka.Pipeline(kafka.PipelineConfig{
//		Topic:    "orders",
//		Pipeline: flightsink.Pipeline{ID: "orders-to-files"},
//		Source:   []kafka.Option{kafka.Brokers("127.0.0.1:9092")},
//	}, sink)
//	err = r.Run(ctx)
//
// The pipeline is exactly-once when the sink is: the sink's checkpoint is
// the resume authority, the group commit is advisory.
func Pipeline(cfg PipelineConfig, sink flightsink.Sink) (*Runner, error) {
	if cfg.Topic == "" || cfg.Pipeline.ID == "" || sink == nil {
		return nil, fmt.Errorf("%w: kafka pipeline needs a topic, a pipeline id and a sink", flightline.ErrInvalidInput)
	}
	src, err := New(append(append([]Option{}, cfg.Source...), Topics(cfg.Topic))...)
	if err != nil {
		return nil, err
	}
	co, err := coordinator.New(src, sink, cfg.Topic, cfg.Pipeline, cfg.Coordinator...)
	if err != nil {
		src.Close()
		return nil, err
	}
	return &Runner{Source: src, Coordinator: co}, nil
}

// Run moves records until ctx ends (nil) or a non-retryable error, then
// closes the source (leaving the consumer group).
func (r *Runner) Run(ctx context.Context) error {
	defer r.Source.Close()
	return r.Coordinator.Run(ctx)
}
