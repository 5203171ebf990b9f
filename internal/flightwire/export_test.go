package flightwire

import "google.golang.org/grpc/mem"

// LiveBodies is the number of received bodies still aliasing a gRPC
// buffer.
func LiveBodies() int64 { return liveBodies.Load() }

// Unmarshal runs the codec's receive parse on b and returns what a Reader
// would see: the header and body length, or the refusal.
func Unmarshal(b []byte) (header []byte, bodyLen int, err error) {
	var m inData
	m.unmarshal(mem.BufferSlice{mem.SliceBuffer(b)})
	if m.body != nil {
		bodyLen = m.body.Len()
		m.body.Release()
	}
	return m.header, bodyLen, m.err
}
