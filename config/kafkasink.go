package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	kafkasink "github.com/flightline/flightline/flightsink/kafka"
	"github.com/flightline/flightline/internal/spec"
)

// kafkaSinkConfig is the kafka: sink kind.
type kafkaSinkConfig struct {
	kafkaConn
	Topic                 *string        `spec:"topic" doc:"topic written when the pipeline names no target (--target overrides it)"`
	CheckpointTopic       string         `spec:"checkpoint_topic" default:"__flightline_checkpoints" doc:"compacted topic holding the checkpoints"`
	ValueFormat           *string        `spec:"value_format" enum:"raw,json" doc:"raw: the binary value column's bytes; json: the row as one JSON object (less the key column without key:, the headers and partition columns, and with key: the change columns _op, _lsn, _commit_time)"`
	Key                   []string       `spec:"key" doc:"key columns: the record key is the column's bytes for one string or binary column, else a JSON object of them in this order; _op=delete becomes a tombstone with the key, so a compacted topic ends with the source table (default: the key column, _op not read)"`
	PartitionColumn       *string        `spec:"partition_column" doc:"int32 column naming each record's partition; default: the key's hash"`
	CreateTopics          *int32         `spec:"create_topics" doc:"create missing topics with this many partitions"`
	TransactionalIDPrefix string         `spec:"transactional_id_prefix" default:"flightline-" doc:"prefix of the per-pipeline transactional ids"`
	BatchTimeout          *time.Duration `spec:"batch_timeout" doc:"longest wait for one commit's records to be produced: a batch's, or a group's under group commit (default 30s)"`
	TransactionTimeout    *time.Duration `spec:"transaction_timeout" doc:"the transaction timeout the brokers enforce (default 60s)"`
}

var kafkaSinkSpec = spec.New[kafkaSinkConfig]("kafka sink", "kafka:?brokers=HOST:PORT&topic=T&…",
	"exactly-once: each batch and its checkpoint in one Kafka transaction", nil)

func init() {
	sinkKinds["kafka"] = sinkOf(kafkaSinkSpec, openKafkaSink)
}

func (c kafkaSinkConfig) sinkConfig() (kafkasink.Config, error) {
	cfg := kafkasink.Config{Brokers: c.Brokers, CheckpointTopic: c.CheckpointTopic, TransactionalIDPrefix: c.TransactionalIDPrefix}
	if c.CheckpointTopic == "" {
		return cfg, fmt.Errorf("%w: empty checkpoint topic", flightline.ErrInvalidInput)
	}
	if c.Topic != nil {
		cfg.Topic = *c.Topic
	}
	if c.ValueFormat != nil {
		cfg.ValueFormat = *c.ValueFormat
	}
	cfg.Key = c.Key
	if c.PartitionColumn != nil {
		cfg.PartitionColumn = *c.PartitionColumn
	}
	if c.CreateTopics != nil {
		if *c.CreateTopics < 1 {
			return cfg, fmt.Errorf("%w: CreateMissingTopics partitions %d < 1", flightline.ErrInvalidInput, *c.CreateTopics)
		}
		cfg.CreateTopics, cfg.CreateReplicationFactor = *c.CreateTopics, -1
	}
	if c.BatchTimeout != nil {
		if *c.BatchTimeout <= 0 {
			return cfg, fmt.Errorf("%w: batch timeout %v <= 0", flightline.ErrInvalidInput, *c.BatchTimeout)
		}
		cfg.BatchTimeout = *c.BatchTimeout
	}
	if c.TransactionTimeout != nil {
		if *c.TransactionTimeout <= 0 { // the sink reads 0 as its default
			return cfg, fmt.Errorf("%w: transaction timeout %v <= 0", flightline.ErrInvalidInput, *c.TransactionTimeout)
		}
		cfg.TransactionTimeout = *c.TransactionTimeout
	}
	if c.ClientID != nil {
		cfg.ClientID = *c.ClientID
	}
	pass, tc, err := c.settings("kafka sink")
	if err != nil {
		return cfg, err
	}
	switch c.SASL {
	case "plain", "scram-sha-256", "scram-sha-512":
		cfg.SASL, cfg.User, cfg.Password = strings.ToUpper(c.SASL), c.User, pass
	}
	cfg.TLS = tc
	return cfg, nil
}

func openKafkaSink(e env, _ *url.URL, c kafkaSinkConfig) (flightsink.Sink, func(), error) {
	cfg, err := c.sinkConfig()
	if err != nil {
		return nil, nil, err
	}
	s, err := kafkasink.New(e.ctx, cfg, kafkasink.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return s, func() { s.Close() }, nil
}
