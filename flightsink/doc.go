// Package flightsink defines Flightline's sink contract and serves it over
// Arrow Flight.
//
// A Sink hosts pipelines; Open claims one and returns a Writer whose
// WriteBatch is the pipeline's atomic commit point: the batch and its
// checkpoint become durable together or not at all. The coordinator resumes a
// pipeline from Sink.Checkpoint, so a sink that commits data without its
// checkpoint (or the reverse) breaks exactly-once.
//
// NewServer exposes any Sink as a Flight DoPut endpoint; Dial returns a Sink
// backed by a remote endpoint, so the coordinator treats local and remote
// sinks alike. The wire contract is docs/protocol.md.
//
// Pitfalls:
//   - WriteBatch must validate the whole batch (schema, types) before
//     writing anything; an error must never leave a batch partly committed.
//   - Batches from outside the process are validated once, before any
//     Writer sees them: Server.DoPut guards every IPC message
//     (internal/ipcguard) and runs ValidateBatch on every batch; the
//     coordinator runs ValidateBatch on batches from a remote source bound
//     for an in-process sink. Writers may therefore index buffers without
//     checks, and must not be handed unvalidated foreign batches.
//   - A Writer panic is recovered by Server (and by Pipelined) as
//     flightline.ErrInternal, which is not retryable; it is the last line,
//     and a bug to fix where it happened.
//   - A Writer obtained before a newer Open of the same pipeline is a zombie:
//     its commits must fail with flightline.ErrFenced or ErrConflict.
//   - Records passed to WriteBatch are borrowed: Retain what you keep.
//
// Memory, Null and Dir are sinks for tests, benchmarks and the demo; the
// connectors to real systems live in sub-packages so that this package pulls
// no vendor SDK. Package sinktest is the conformance suite every sink runs.
package flightsink
