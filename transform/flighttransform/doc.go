// Package flighttransform serves a transform.Transform as an Arrow Flight
// DoExchange endpoint (Server) and reaches one (Client), following the
// transform contract of docs/protocol.md.
//
// The Client is transport only: it moves batches and checkpoints both ways
// and validates what it receives as Arrow, but the checkpoint rules are
// checked by transform.Checked, which the coordinator wraps around every
// stage of a chain, local or remote. Wrap a Client in it when using one on
// its own.
//
// Ownership: an exchange owns its input stream (closing the output closes
// it), releases every input batch once written to the wire, and releases
// every received batch it has not handed out when it is closed, on every
// path: end of stream, failure, cancellation.
package flighttransform
