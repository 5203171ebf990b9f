// Package coordinator connects a source to a sink and keeps the pipeline
// exactly-once across crashes.
//
// One attempt (see Coordinator.Run):
//
//  0. Prepare the source, if it is a flightsrc.Preparer (the Kafka source
//     joins its consumer group and waits for the assignment), so that what
//     it settles precedes the checkpoint read in step 1.
//  1. Open the sink's pipeline. This fences earlier writers and returns the
//     last committed checkpoint, the only resume authority.
//  2. Read the source after that checkpoint.
//  3. Pipe batches into the sink with at most Window unacknowledged.
//  4. Match each acknowledgement, in order, against the checkpoint sent with
//     the batch; then advise the source (Commit) of the newest acknowledged
//     checkpoint, at most once per CommitInterval and when the attempt ends.
//
// Invariants, kept on every path:
//   - A checkpoint reaches the source's Commit only after the sink has
//     acknowledged it, i.e. after it is durable with its data. The
//     coordinator itself stores no checkpoint.
//   - A failure abandons the attempt whole: unacknowledged batches are
//     re-read from the source after the sink's checkpoint, so whatever the
//     sink committed before the failure is not written twice and nothing it
//     did not commit is lost.
//   - A stop (Run's context ends) or a failed read stops reading at once but
//     waits, up to StopTimeout, for the acks of the batches already
//     submitted, then ends the sink's stream normally: a clean stop neither
//     cancels a commit under way nor leaves it out of Stats.
//   - Stats count what the sink committed, over every attempt: acked
//     batches, plus those of a failed attempt whose ack was lost but whose
//     checkpoint the next Open returns (a commit call can fail after
//     committing; the next Open's checkpoint is the truth).
//   - Retryable errors (flightline.IsRetryable) back off with jitter (200 ms
//     growing to 5 s by default) and
//     restart at step 1 — exponentially for outages, at most 4× the minimum
//     for ErrConflict (a rebalance or a moved checkpoint is routine and
//     logged at INFO); others (bad input, schema mismatch, fencing,
//     credentials) stop Run and are returned. A wait ends early when a
//     remote source, sink or transform (a Reconnecter) that was unreachable
//     when it began is reachable again: a restarted serve-sink is retried
//     the moment it listens, not up to a whole backoff later.
//
// Sources and sinks may be local Go values or remote Flight endpoints
// (flightsrc.Dial, flightsink.Dial): the coordinator cannot tell them apart.
// Between them runs an optional chain of transforms (WithChain): in-process
// ones or remote Flight DoExchange services (transform/flighttransform),
// each checked against the checkpoint contract of docs/protocol.md by
// transform.Checked, then WithTransform's Func. Checkpoints travel through
// the chain: the sink commits the checkpoints the last stage hands back,
// and a stage that invents or reorders one stops the pipeline. Every
// attempt opens new exchanges; transforms keep no state across them.
//
// The coordinator is the only core package that imports both flightsrc and
// flightsink; connectors import neither it nor the other side (see
// pipelines for one-call assemblies).
package coordinator
