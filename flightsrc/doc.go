// Package flightsrc defines Flightline's source contract and serves it over
// Arrow Flight.
//
// A Source offers named streams; Read opens one after a checkpoint and its
// Reader yields (batch, checkpoint) pairs, where the checkpoint is the
// position reached once the batch is durably written downstream. Checkpoints
// are opaque to everyone but the source that made them; sources with
// per-partition positions use the mergeable checkpoint.Positions form.
//
// NewServer exposes any Source as a Flight server (DoGet, ListFlights,
// GetFlightInfo, GetSchema, DoAction "commit"); Dial returns a Source backed
// by a remote Flight server. The wire contract is docs/protocol.md. A Source
// whose batches hold view columns pointing into much larger buffers
// implements WireCompacter, and the server sends those columns compacted.
//
// Source packages (flightsrc/...) import this package and leaf packages
// (checkpoint, transform, internal/...), never the sink side or the
// coordinator; pipelines joins them (layering_test.go checks it).
//
// Pitfalls:
//   - The checkpoint of a batch must cover exactly the records up to and
//     including that batch: a source that reports a checkpoint ahead of the
//     data it has returned loses records on resume.
//   - Commit is advisory: never make resume depend on it.
//   - Readers own the batches they return until Next returns them; after
//     that the caller owns them. Close must release anything buffered.
package flightsrc
