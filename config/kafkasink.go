package config

import (
	"net/url"
	"strings"
	"time"

	"github.com/flightline/flightline/flightsink"
	kafkasink "github.com/flightline/flightline/flightsink/kafka"
	"github.com/flightline/flightline/internal/spec"
)

// kafkaSinkConfig is the kafka: sink kind.
type kafkaSinkConfig struct {
	kafkaConn
	Topic                 *string        `spec:"topic" doc:"topic written when the pipeline names no target (--target overrides it)"`
	CheckpointTopic       string         `spec:"checkpoint_topic" default:"__flightline_checkpoints" doc:"compacted topic holding the checkpoints"`
	ValueFormat           *string        `spec:"value_format" doc:"how the value column is written; only raw in this version"`
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

func (c kafkaSinkConfig) options(e env) ([]kafkasink.Option, error) {
	var opts []kafkasink.Option
	if c.Topic != nil {
		opts = append(opts, kafkasink.Topic(*c.Topic))
	}
	opts = append(opts, kafkasink.CheckpointTopic(c.CheckpointTopic), kafkasink.TransactionalIDPrefix(c.TransactionalIDPrefix))
	if c.ValueFormat != nil {
		opts = append(opts, kafkasink.ValueFormat(*c.ValueFormat))
	}
	if c.PartitionColumn != nil {
		opts = append(opts, kafkasink.PartitionColumn(*c.PartitionColumn))
	}
	if c.CreateTopics != nil {
		opts = append(opts, kafkasink.CreateMissingTopics(*c.CreateTopics, -1))
	}
	if c.BatchTimeout != nil {
		opts = append(opts, kafkasink.BatchTimeout(*c.BatchTimeout))
	}
	if c.TransactionTimeout != nil {
		opts = append(opts, kafkasink.TransactionTimeout(*c.TransactionTimeout))
	}
	if c.ClientID != nil {
		opts = append(opts, kafkasink.ClientID(*c.ClientID))
	}
	pass, tc, err := c.settings("kafka sink")
	if err != nil {
		return nil, err
	}
	switch c.SASL {
	case "plain":
		opts = append(opts, kafkasink.SASLPlain(c.User, pass))
	case "scram-sha-256", "scram-sha-512":
		opts = append(opts, kafkasink.SASLScram(strings.ToUpper(c.SASL), c.User, pass))
	}
	if tc != nil {
		opts = append(opts, kafkasink.TLS(tc))
	}
	return append(opts, kafkasink.Logger(e.log)), nil
}

func openKafkaSink(e env, _ *url.URL, c kafkaSinkConfig) (flightsink.Sink, func(), error) {
	opts, err := c.options(e)
	if err != nil {
		return nil, nil, err
	}
	s, err := kafkasink.New(c.Brokers, opts...)
	if err != nil {
		return nil, nil, err
	}
	return s, func() { s.Close() }, nil
}
