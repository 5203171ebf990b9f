// Package rabbitstream is an exactly-once sink that appends every row of a
// batch as one message to a RabbitMQ stream, over the stream protocol
// (rabbitmq-stream-go-client), using the broker's producer deduplication
// as the fence against older writers.
//
// # Messages
//
// Body: the row as one JSON object (internal/rowenc's JSON-lines encoder
// without the newline), content type application/json. Every message of
// the sink carries the AMQP 1.0 message-id "<writer>:<publishing id>",
// where <writer> is 16 hex digits naming the pipeline on its stream (the
// start of the SHA-256 of the producer name) and the publishing id is the
// one the message was published with. The first message the sink
// publishes of a batch carries application properties: flightline-batch
// (the batch's number in the pipeline), flightline-rows (its rows),
// flightline-from (the row of the batch this message is; 0 but for a batch
// completed after a crash) and flightline-checkpoint (base64 of the
// checkpoint the source sent with the batch).
//
// Besides the rows the stream holds the sink's control messages, with an
// empty body and the application property flightline-control: "claim"
// (one per Open: a writer took the pipeline over) and "commit" (a batch
// without rows, which commits its checkpoint alone). Consumers skip
// messages that have flightline-control.
//
// # Publishing ids, the claim and the fence
//
// The producer name is "flightline/<pipeline id>/<stream>". A publishing
// id is epoch<<40 | n. Open reads the name's last publishing id from the
// broker (QuerySequence), takes the next epoch, and publishes a claim
// message with id epoch<<40. Once it lands, the broker's deduplication
// drops every later message of an older writer of the same name: their
// ids are all lower. That is the fence: an older writer's messages that
// arrive after the claim are dropped by the broker, atomically, whatever
// their timing. (Two producers with one name are both accepted by the
// broker; what the claim fences is their messages, not their
// connections.) A writer checks after each batch's confirms that the name's
// last id is still its own last one; if not, its batch was dropped, in
// part or whole, and WriteBatch returns ErrFenced. Two Opens that draw
// the same epoch at once publish the same claim id: one lands, the other
// is dropped; the loser finds the winner's claim in the stream and fails
// with ErrConflict (retryable).
//
// # The checkpoint
//
// Open (after its claim landed) and Checkpoint read the stream from its
// first message up to the name's last publishing id and follow the
// pipeline's messages: a batch is committed once all its rows (or its
// commit message) are in the stream, and the checkpoint is
// checkpoint.Next folded over the committed batches' checkpoints (for
// Positions, the per-key maximum). Reading from the first message costs time in
// proportion to the stream's length (retention bounds it); it happens
// once per Open and per Checkpoint.
//
// # A batch cut by a crash
//
// A stream has no transaction: a writer that dies (or is fenced) in the
// middle of a batch leaves the batch's first k rows in the stream. The
// next Open finds them (a batch started and not complete) and returns a
// checkpoint without that batch. When the source then sends the same
// batch again — the same checkpoint, the same number of rows, and first k
// rows that encode to the same bytes — the writer publishes only its rows
// from k on, so every row is in the stream once: exactly-once. With
// checkpoint.Positions the cut batch waits for the first batch that
// shares a key with its checkpoint (the same Kafka partition); batches of
// other keys pass before it. Other checkpoints: the next batch. When the batch
// comes back different (a source whose replay forms other batches or
// other rows), the k rows cannot be taken back: the writer logs a warning
// naming them and publishes the batch whole, so those rows may be in the
// stream twice: at-least-once for them. Flightline's generator, and the
// Kafka source's batches cut by rows or bytes, re-form the same batch;
// Kafka batches cut by batch_wait need not (see
// docs/sinks/rabbitmq-stream.md).
package rabbitstream
