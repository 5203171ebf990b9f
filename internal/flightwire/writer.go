package flightwire

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// SendStream is what a Writer needs of a Flight stream that sends
// FlightData: DoGet's server stream, DoPut's client stream, either side of
// DoExchange.
type SendStream interface {
	Send(*flight.FlightData) error
	SendMsg(any) error
	Context() context.Context
}

// Writer writes record batches to a Flight stream as IPC messages, like
// arrow-go's flight.Writer, whose methods it has. On a stream that uses
// Codec (Enabled), a batch's buffers go to the transport without being
// copied, and the batch stays retained until the transport has written
// them: the caller may release it when Write returns, as with
// flight.Writer. On any other stream it sends ordinary FlightData.
//
// A Writer is not safe for concurrent use.
type Writer struct {
	*ipc.Writer
	pw *payloadWriter
}

// NewWriter returns a Writer on s; opts go to ipc.NewWriterWithPayloadWriter
// (ipc.WithSchema, ipc.WithAllocator, ipc.WithLZ4, ipc.WithZstd, ...).
func NewWriter(s SendStream, opts ...ipc.Option) *Writer {
	pw := &payloadWriter{s: s, zero: Enabled(s.Context())}
	return &Writer{Writer: ipc.NewWriterWithPayloadWriter(pw, opts...), pw: pw}
}

// SetFlightDescriptor puts d into the next message written, and only that
// one.
func (w *Writer) SetFlightDescriptor(d *flight.FlightDescriptor) { w.pw.desc = d }

// Write writes rec (after any dictionary batches it needs).
func (w *Writer) Write(rec arrow.RecordBatch) error {
	w.pw.rec = rec
	defer func() { w.pw.rec = nil }()
	return w.Writer.Write(rec)
}

// WriteWithAppMetadata writes rec with app as the app_metadata of its
// messages (its dictionary batches' included, as flight.Writer does).
func (w *Writer) WriteWithAppMetadata(rec arrow.RecordBatch, app []byte) error {
	w.pw.app = app
	defer func() { w.pw.app = nil }()
	return w.Write(rec)
}

// ZeroCopy reports whether the Writer sends through Codec.
func (w *Writer) ZeroCopy() bool { return w.pw.zero }

type payloadWriter struct {
	s    SendStream
	zero bool
	desc *flight.FlightDescriptor
	app  []byte
	rec  arrow.RecordBatch // the batch being written, whose buffers may be aliased
	buf  bytes.Buffer      // the body, when not zero-copy
}

func (pw *payloadWriter) Start() error { return nil }
func (pw *payloadWriter) Close() error { return nil }

func (pw *payloadWriter) WritePayload(p ipc.Payload) error {
	meta := p.Meta()
	var header []byte
	if meta != nil {
		defer meta.Release()
		header = meta.Bytes()
	}
	desc := pw.desc
	pw.desc = nil
	if !pw.zero {
		pw.buf.Reset()
		if err := p.SerializeBody(&pw.buf); err != nil {
			return err
		}
		return pw.s.Send(&flight.FlightData{FlightDescriptor: desc, DataHeader: header, AppMetadata: pw.app, DataBody: pw.buf.Bytes()})
	}
	m := &outData{header: header, app: pw.app, rec: pw.rec}
	if desc != nil {
		var err error
		if m.desc, err = proto.Marshal(desc); err != nil {
			return fmt.Errorf("flightwire: marshalling the flight descriptor: %w", err)
		}
	}
	// SerializeBody hands over the body's buffers and paddings in order;
	// the collector keeps the slices, it copies nothing.
	if err := p.SerializeBody(m); err != nil {
		return err
	}
	// SendMsg marshals m (outData.marshal) before it returns, while p's
	// buffers are still alive.
	return pw.s.SendMsg(m)
}

// outData is a FlightData to marshal: header and app are sent as they
// are, body is the list of slices that make data_body.
type outData struct {
	desc, header, app []byte
	body              [][]byte
	bodyLen           int
	rec               arrow.RecordBatch // nil: alias nothing
}

// Write implements io.Writer for Payload.SerializeBody.
func (m *outData) Write(b []byte) (int, error) {
	m.body = append(m.body, b)
	m.bodyLen += len(b)
	return len(b), nil
}

// aliasMin is the smallest body buffer aliased rather than copied: below
// it a copy costs less than a transport buffer, and gRPC does not call back
// when it frees a buffer under its pooling threshold.
const aliasMin = 16 << 10

// marshal returns m as protobuf FlightData: one buffer with the header
// fields (and every small or foreign body piece, copied), then each large
// buffer of m.rec as it is, each holding a reference to m.rec that the
// transport drops (releaser.Put) once it has written it.
func (m *outData) marshal() mem.BufferSlice {
	var spans spanIndex
	if m.rec != nil && slices.ContainsFunc(m.body, func(b []byte) bool { return len(b) >= aliasMin }) {
		spans = indexRecord(m.rec)
	}
	alias := make([]bool, len(m.body))
	copied := 0
	for i, b := range m.body {
		alias[i] = len(b) >= aliasMin && !mem.IsBelowBufferPoolingThreshold(len(b)) && spans.contains(b)
		if !alias[i] {
			copied += len(b)
		}
	}
	cur := make([]byte, 0, 32+len(m.desc)+len(m.header)+len(m.app)+copied)
	for _, f := range []struct {
		n int
		v []byte
	}{{fieldDescriptor, m.desc}, {fieldHeader, m.header}, {fieldAppMeta, m.app}} {
		if len(f.v) > 0 {
			cur = appendTag(cur, f.n, 2)
			cur = appendVarint(cur, uint64(len(f.v)))
			cur = append(cur, f.v...)
		}
	}
	if m.bodyLen > 0 {
		cur = appendTag(cur, fieldBody, 2)
		cur = appendVarint(cur, uint64(m.bodyLen))
	}
	var out mem.BufferSlice
	for i, b := range m.body {
		if !alias[i] {
			cur = append(cur, b...)
			continue
		}
		if len(cur) > 0 {
			out = append(out, mem.SliceBuffer(cur))
			cur = cur[len(cur):]
		}
		out = append(out, aliased(b, m.rec))
	}
	if len(cur) > 0 {
		out = append(out, mem.SliceBuffer(cur))
	}
	return out
}

// aliased returns b, a slice of rec's memory, as a transport buffer that
// holds a reference to rec. The transport frees the buffer once it has
// written it, which releases the reference (releaser.Put). A transport that
// dies with the buffer still queued (its connection closed) never frees it:
// then the garbage collector, once nothing in gRPC can reach the buffer any
// more, releases the reference instead (runtime.AddCleanup), so a batch is
// never released while the transport can still read it, and always is
// eventually.
func aliased(b []byte, rec arrow.RecordBatch) mem.Buffer {
	rec.Retain()
	r := &releaser{rec: rec}
	p := new([]byte)
	*p = b[:len(b):len(b)]
	runtime.AddCleanup(p, (*releaser).release, r)
	return mem.NewBuffer(p, r)
}

// releaser is the "pool" of an aliased buffer: the transport Puts the
// buffer back when it is done with it, which releases the batch's
// reference, once.
type releaser struct {
	rec  arrow.RecordBatch
	done atomic.Bool
}

func (r *releaser) Get(n int) *[]byte {
	b := make([]byte, n)
	return &b
}

func (r *releaser) Put(*[]byte) { r.release() }

func (r *releaser) release() {
	if r.done.CompareAndSwap(false, true) {
		r.rec.Release()
	}
}

// spanIndex is the memory of a batch's buffers, sorted by start address.
type spanIndex []span

type span struct{ start, end uintptr }

func indexRecord(rec arrow.RecordBatch) spanIndex {
	var ix spanIndex
	for _, c := range rec.Columns() {
		ix.add(c.Data(), 0)
	}
	slices.SortFunc(ix, func(a, b span) int {
		switch {
		case a.start < b.start:
			return -1
		case a.start > b.start:
			return 1
		}
		return 0
	})
	return ix
}

func (ix *spanIndex) add(d arrow.ArrayData, depth int) {
	if d == nil || depth > 64 {
		return
	}
	for _, b := range d.Buffers() {
		if b == nil || b.Len() == 0 {
			continue
		}
		p := uintptr(unsafe.Pointer(unsafe.SliceData(b.Bytes())))
		*ix = append(*ix, span{p, p + uintptr(b.Len())})
	}
	for _, c := range d.Children() {
		ix.add(c, depth+1)
	}
	if d.DataType().ID() == arrow.DICTIONARY {
		ix.add(d.Dictionary(), depth+1)
	}
}

// contains reports whether b lies inside one buffer of the index. It may
// miss a buffer that overlaps another (a false "no" only costs a copy).
func (ix spanIndex) contains(b []byte) bool {
	if len(ix) == 0 || len(b) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	i, found := slices.BinarySearchFunc(ix, p, func(s span, p uintptr) int {
		switch {
		case s.start < p:
			return -1
		case s.start > p:
			return 1
		}
		return 0
	})
	if !found {
		i--
	}
	return i >= 0 && p >= ix[i].start && p+uintptr(len(b)) <= ix[i].end
}
