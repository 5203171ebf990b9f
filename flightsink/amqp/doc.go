// Package amqp is an at-least-once sink that publishes every row of a batch
// as one AMQP 0-9-1 message (RabbitMQ) to an exchange.
//
// # Messages
//
// Body: the row as one JSON object (internal/rowenc's JSON-lines encoder,
// without the newline), content type application/json, persistent
// delivery. Routing key: the pipeline's Target, else the configured
// RoutingKey, or, with RoutingKeyColumn, that column's value in the row.
// Headers: the configured columns' values (as text; a null is left out).
// MessageId: the hex SHA-256 of pipeline id, target, the batch's checkpoint
// and the row's index in the batch, so a replay of a batch gives its rows
// the same ids and a consumer can drop repeats by MessageId.
//
// # Commit
//
// Every message is published with mandatory set on a channel in confirm
// mode; WriteBatch returns nil only when the broker confirmed (acked)
// every message of the batch and returned none. A returned message (no
// queue bound for its routing key) fails the batch with an error naming
// the exchange and key; a nack fails it too. Messages published before a
// failure stay published: the batch is then replayed whole, so its rows
// may arrive twice.
//
// # Guarantee
//
// At-least-once (Guarantee), and it cannot be more: AMQP 0-9-1 has no
// transaction that covers both the messages and a checkpoint (tx.select
// is neither atomic across queues nor durable at commit, and publisher
// confirms are per message). The sink keeps no checkpoint: Checkpoint and
// Open return nil, as the S3 sink does, and the coordinator resumes from
// the source's advisory commit. A writer remembers the last checkpoint it
// committed, so a batch resent to the same writer (a lost ack) is a no-op;
// after a restart, the batches since the source's last advisory commit are
// published again, with the same MessageIds.
//
// RabbitMQ streams with producer deduplication (exactly-once for
// deterministic replays) are not in this package; see docs/sinks/amqp.md.
package amqp
