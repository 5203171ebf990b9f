package kafka

import "github.com/flightline/flightline/flightsrc"

var _ flightsrc.WireCompacter = (*Source)(nil)

// CompactOnWire implements flightsrc.WireCompacter: it returns true, so a
// flightsrc.Server sends the key and value columns as plain binary copies.
// The Source's binary_view columns point into whole fetch responses, and
// Flight's IPC writer sends a view column's buffers whole: uncompacted, a
// batch ships every fetch buffer it touches (about 35 times the batch for
// 10k-row batches of 100-byte values). In-process consumers read the views
// without a copy.
func (s *Source) CompactOnWire() bool { return true }
