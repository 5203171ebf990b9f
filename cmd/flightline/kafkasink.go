package main

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/flightline/flightline/flightsink"
	kafkasink "github.com/flightline/flightline/flightsink/kafka"
)

const kafkaSinkUsage = "kafka:?brokers=H:P,H:P&topic=T&checkpoint_topic=T&value_format=raw&partition_column=COL&create_topics=PARTITIONS" +
	"&transactional_id_prefix=P&client_id=ID&batch_timeout=DUR&transaction_timeout=DUR&sasl=plain|scram-sha-256|scram-sha-512&user=U" +
	"&password_env=VAR&tls=true&tls_ca=FILE  exactly-once: each batch and its checkpoint in one Kafka transaction (--target overrides topic)"

func init() {
	sinkKinds["kafka"] = sinkKind{usage: kafkaSinkUsage, open: openKafkaSink}
}

func openKafkaSink(_ *url.URL, q query) (flightsink.Sink, func(), error) {
	bad := func(k, v string, err error) error { return fmt.Errorf("kafka sink: %s=%q: %v", k, v, err) }
	var brokers []string
	if v, ok := q.take("brokers"); ok {
		brokers = splitList(v)
	}
	var opts []kafkasink.Option
	if v, ok := q.take("topic"); ok {
		opts = append(opts, kafkasink.Topic(v))
	}
	if v, ok := q.take("checkpoint_topic"); ok {
		opts = append(opts, kafkasink.CheckpointTopic(v))
	}
	if v, ok := q.take("value_format"); ok {
		opts = append(opts, kafkasink.ValueFormat(v))
	}
	if v, ok := q.take("partition_column"); ok {
		opts = append(opts, kafkasink.PartitionColumn(v))
	}
	if v, ok := q.take("create_topics"); ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil {
			return nil, nil, bad("create_topics", v, err)
		}
		opts = append(opts, kafkasink.CreateMissingTopics(int32(n), -1))
	}
	if v, ok := q.take("transactional_id_prefix"); ok {
		opts = append(opts, kafkasink.TransactionalIDPrefix(v))
	}
	for _, k := range []string{"batch_timeout", "transaction_timeout"} {
		if v, ok := q.take(k); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, nil, bad(k, v, err)
			}
			if k == "batch_timeout" {
				opts = append(opts, kafkasink.BatchTimeout(d))
			} else {
				opts = append(opts, kafkasink.TransactionTimeout(d))
			}
		}
	}
	conn, err := kafkaConnOpts(q)
	if err != nil {
		return nil, nil, err
	}
	if conn.clientID != "" {
		opts = append(opts, kafkasink.ClientID(conn.clientID))
	}
	switch conn.sasl {
	case "plain":
		opts = append(opts, kafkasink.SASLPlain(conn.user, conn.pass))
	case "scram-sha-256", "scram-sha-512":
		opts = append(opts, kafkasink.SASLScram(strings.ToUpper(conn.sasl), conn.user, conn.pass))
	}
	if conn.tls != nil {
		opts = append(opts, kafkasink.TLS(conn.tls))
	}
	if err := q.done("kafka sink"); err != nil {
		return nil, nil, err
	}
	if kindEnv.log != nil {
		opts = append(opts, kafkasink.Logger(kindEnv.log))
	}
	s, err := kafkasink.New(brokers, opts...)
	if err != nil {
		return nil, nil, err
	}
	return s, func() { s.Close() }, nil
}
