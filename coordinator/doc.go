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
//   - Retryable errors (flightline.IsRetryable) back off with jitter and
//     restart at step 1; others (bad input, schema mismatch, fencing,
//     credentials) stop Run and are returned.
//
// Sources and sinks may be local Go values or remote Flight endpoints
// (flightsrc.Dial, flightsink.Dial): the coordinator cannot tell them apart.
// Transform leaves room for a stage between them; a Flight DoExchange
// transform service can later be wrapped as a Transform.
package coordinator
