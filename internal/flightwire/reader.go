package flightwire

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/flightline/flightline/internal/ipcguard"
)

// RecvStream is what a Reader needs of a Flight stream that receives
// FlightData: DoPut's server stream, DoGet's client stream, either side of
// DoExchange.
type RecvStream interface {
	Recv() (*flight.FlightData, error)
	RecvMsg(any) error
	Context() context.Context
}

// Reader reads record batches from a Flight stream, like arrow-go's
// flight.Reader, whose methods it has. Every message with an IPC header is
// checked by an ipcguard.Checker (bound max) before arrow-go's reader sees it.
//
// On a stream that uses Codec (Enabled), a batch's buffers alias the
// received gRPC buffer, which returns to gRPC's pool once every batch and
// dictionary slicing it is released. As with flight.Reader, RecordBatch is
// valid until the next Next; Retain it to keep it longer.
type Reader struct {
	*ipc.Reader
	mr *messageReader
	sw *sweeper
}

// NewReader reads the stream's first message (its schema, perhaps after a
// descriptor-only message) and returns a Reader on s that allocates from
// mem (memory.DefaultAllocator when nil); opts are more of arrow-go's
// reader options. A refused message (malformed protobuf, or refused by
// ipcguard) is an error that Malformed also returns. What a batch that
// failed to load had allocated is freed at Release (see sweeper).
func NewReader(s RecvStream, max int64, mem memory.Allocator, opts ...ipc.Option) (*Reader, error) {
	sw := newSweeper(mem)
	opts = append(opts[:len(opts):len(opts)], ipc.WithAllocator(sw))
	mr := &messageReader{s: s, zero: Enabled(s.Context()), guard: ipcguard.NewChecker(max)}
	mr.refs.Store(1)
	first, err := mr.recv()
	if err != nil {
		return nil, err
	}
	mr.desc = first.desc
	if len(first.header) > 0 {
		mr.peeked = &first
	} else {
		first.release()
	}
	mr.Retain() // one reference for ipc.Reader, one for Reader
	r := &Reader{mr: mr, sw: sw}
	sw.begin()
	r.Reader, err = ipc.NewReaderFromMessageReader(mr, opts...)
	sw.end(err == nil)
	if err != nil {
		mr.Release()
		mr.Release()
		sw.sweep()
		if mr.malformed != nil {
			return nil, mr.malformed
		}
		return nil, fmt.Errorf("flightwire: could not create flight reader: %w", err)
	}
	return r, nil
}

// Next is ipc.Reader's Next.
func (r *Reader) Next() bool {
	r.sw.begin()
	ok := r.Reader.Next()
	r.sw.end(ok)
	return ok
}

// Release releases the reader, its current batch and the message it holds,
// then frees what a batch that failed to load had allocated.
func (r *Reader) Release() {
	r.Reader.Release()
	r.mr.Release()
	r.sw.sweep()
}

// LatestAppMetadata returns the app_metadata of the last message read (the
// current batch's). It is a copy the caller may keep.
func (r *Reader) LatestAppMetadata() []byte { return r.mr.app }

// LatestFlightDescriptor returns the last descriptor received.
func (r *Reader) LatestFlightDescriptor() *flight.FlightDescriptor { return r.mr.desc }

// Malformed returns the refusal that ended the stream: a FlightData that is
// not valid protobuf (wrapping ErrMalformed) or an IPC message ipcguard
// refused (wrapping ipcguard.ErrMalformed); nil when none. arrow-go's
// reader reports it as an unclassified error of its own, hence this.
func (r *Reader) Malformed() error { return r.mr.malformed }

// ZeroCopy reports whether the Reader receives through Codec.
func (r *Reader) ZeroCopy() bool { return r.mr.zero }

// frame is one received FlightData.
type frame struct {
	desc   *flight.FlightDescriptor
	header []byte         // a copy
	app    []byte         // a copy
	body   *memory.Buffer // one reference, owned by the frame
}

func (f *frame) release() {
	if f.body != nil {
		f.body.Release()
		f.body = nil
	}
}

// messageReader is an ipc.MessageReader over the stream.
type messageReader struct {
	s         RecvStream
	zero      bool
	guard     *ipcguard.Checker
	refs      atomic.Int64
	peeked    *frame
	msg       *ipc.Message // the last message returned, released with the next
	app       []byte
	desc      *flight.FlightDescriptor
	malformed error
}

func (r *messageReader) recv() (frame, error) {
	if r.malformed != nil {
		return frame{}, r.malformed
	}
	var f frame
	if r.zero {
		var m inData
		if err := r.s.RecvMsg(&m); err != nil {
			return frame{}, err
		}
		if m.err != nil {
			r.malformed = m.err
			return frame{}, m.err
		}
		f = frame{header: m.header, app: m.app, body: m.body}
		if m.desc != nil {
			f.desc = new(flight.FlightDescriptor)
			if err := proto.Unmarshal(m.desc, f.desc); err != nil {
				f.release()
				r.malformed = fmt.Errorf("%w: flight descriptor: %v", ErrMalformed, err)
				return frame{}, r.malformed
			}
		}
	} else {
		fd, err := r.s.Recv()
		if err != nil {
			return frame{}, err
		}
		f = frame{desc: fd.FlightDescriptor, header: fd.DataHeader, app: bytes.Clone(fd.AppMetadata), body: memory.NewBufferBytes(fd.DataBody)}
	}
	if f.body == nil {
		f.body = memory.NewBufferBytes(nil)
	}
	if len(f.header) > 0 {
		if _, err := r.guard.Check(f.header, f.body.Bytes()); err != nil {
			f.release()
			r.malformed = err
			return frame{}, err
		}
	}
	return f, nil
}

// Message implements ipc.MessageReader.
func (r *messageReader) Message() (*ipc.Message, error) {
	if r.msg != nil {
		r.msg.Release()
		r.msg = nil
	}
	var (
		f   frame
		err error
	)
	if r.peeked != nil {
		f, r.peeked = *r.peeked, nil
	} else {
		f, err = r.recv()
	}
	if err != nil {
		r.app, r.desc = nil, nil
		return nil, err
	}
	r.app = f.app
	if f.desc != nil {
		r.desc = f.desc
	}
	r.msg = ipc.NewMessage(memory.NewBufferBytes(f.header), f.body)
	f.release() // the message holds its own reference
	return r.msg, nil
}

// Retain implements ipc.MessageReader.
func (r *messageReader) Retain() { r.refs.Add(1) }

// Release implements ipc.MessageReader.
func (r *messageReader) Release() {
	if r.refs.Add(-1) != 0 {
		return
	}
	if r.msg != nil {
		r.msg.Release()
		r.msg = nil
	}
	if r.peeked != nil {
		r.peeked.release()
		r.peeked = nil
	}
	r.app = nil
}

// inData is a received FlightData: what Codec.Unmarshal parsed.
type inData struct {
	desc, header, app []byte         // copies
	body              *memory.Buffer // aliases the received buffer; nil when empty
	err               error          // not valid protobuf
}

// release drops the body's reference to the received buffer.
func (m *inData) release() {
	if m.body != nil {
		m.body.Release()
		m.body = nil
	}
}

// unmarshal parses data. The body aliases it: a reference is taken, which
// the body's release drops.
func (m *inData) unmarshal(data mem.BufferSlice) {
	buf := data.MaterializeToBuffer(Pool)
	f, err := parse(buf.ReadOnlyData())
	if err != nil {
		buf.Free()
		m.err = err
		return
	}
	m.desc, m.header, m.app = bytes.Clone(f.desc), bytes.Clone(f.header), bytes.Clone(f.app)
	if len(f.body) == 0 {
		buf.Free()
		return
	}
	liveBodies.Add(1)
	m.body = memory.NewBufferWithAllocator(f.body, &bufferFree{buf: buf})
}

// liveBodies counts the received bodies still aliasing a gRPC buffer, for
// tests.
var liveBodies atomic.Int64

// bufferFree is the allocator of a body that aliases a gRPC buffer: Free
// gives the buffer back. Only Free is ever called (by memory.Buffer's last
// Release).
type bufferFree struct {
	memory.Allocator // nil: Allocate and Reallocate are never called
	buf              mem.Buffer
	freed            atomic.Bool
}

func (b *bufferFree) Free([]byte) {
	if b.freed.CompareAndSwap(false, true) {
		liveBodies.Add(-1)
		b.buf.Free()
	}
}
