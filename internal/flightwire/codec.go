// Package flightwire moves Arrow Flight's FlightData messages between
// Flightline's Flight servers and clients without the copies arrow-go and
// protobuf make of every IPC body.
//
// arrow-go's flight.Writer serialises each IPC body into a bytes.Buffer,
// the protobuf codec copies it into the gRPC message, and on the other side
// protobuf copies data_body out of the received message. Here instead:
//
//   - Writer marshals a FlightData as its small protobuf fields (descriptor,
//     data_header, app_metadata, data_body's tag and length) followed by the
//     record batch's own buffers as separate slices of one mem.BufferSlice,
//     which gRPC's transport writes to the socket. An aliased buffer keeps
//     its record batch retained until the transport frees it, so the caller
//     may release the batch as soon as Write returns. Buffers the IPC writer
//     made itself (compressed bodies, re-encoded slices) and small ones are
//     copied: the writer releases them when Write returns.
//   - Reader parses the four FlightData fields of a received message by
//     hand and hands arrow-go's IPC reader a body that aliases the received
//     gRPC buffer. That buffer returns to gRPC's pool when the last Arrow
//     buffer slicing it is released, i.e. when the record batch (and any
//     dictionary the reader keeps) is released. A message gRPC received in
//     several pieces (one per HTTP/2 frame) is first assembled into one
//     pooled buffer: that copy remains.
//
// The codec is never registered globally: a server opts in with
// ServerOptions (endpoint.NewServer does) and a client call with Call. On
// any other stream (a user's own grpc.Server, an in-process test stream),
// Writer and Reader fall back to the standard protobuf messages, so the
// bytes on the wire are the same protobuf FlightData either way and any
// Flight peer (pyarrow, Rust, arrow-go) reads and writes them.
package flightwire

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the codec Codec delegates to
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// Name is the codec's name: "proto", so the content-subtype on the wire
// stays application/grpc+proto and peers see an ordinary protobuf call.
const Name = "proto"

// Codec is a grpc encoding.CodecV2 that marshals Writer's messages and
// unmarshals into Reader's without copying IPC bodies; every other message
// goes to gRPC's protobuf codec unchanged.
type Codec struct{}

var protoCodec = encoding.GetCodecV2(Name)

// Name implements encoding.CodecV2.
func (Codec) Name() string { return Name }

// Marshal implements encoding.CodecV2.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*outData); ok {
		return m.marshal(), nil
	}
	return protoCodec.Marshal(v)
}

// Unmarshal implements encoding.CodecV2. A malformed FlightData is not an
// error here (gRPC would report it as INTERNAL): it is kept in the message
// and Reader reports it as malformed input. Likewise a FlightDescriptor
// that does not decode (GetFlightInfo, GetSchema, PollFlightInfo) becomes
// the descriptor Undecodable reports, which the handler refuses with
// INVALID_ARGUMENT.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*inData); ok {
		m.unmarshal(data)
		return nil
	}
	err := protoCodec.Unmarshal(data, v)
	if d, ok := v.(*flight.FlightDescriptor); ok && err != nil {
		d.Reset()
		d.Type = flight.DescriptorUNKNOWN
		d.Cmd = []byte(undecodable)
		return nil
	}
	return err
}

// undecodable is the command of the descriptor Unmarshal leaves in place
// of one that does not decode.
const undecodable = "\x00flightwire: undecodable descriptor"

// Undecodable reports whether d is what Codec.Unmarshal left of a
// descriptor that did not decode: the caller answers INVALID_ARGUMENT
// (gRPC itself would answer INTERNAL, which clients retry).
func Undecodable(d *flight.FlightDescriptor) bool {
	return d != nil && d.Type == flight.DescriptorUNKNOWN && len(d.Path) == 0 && string(d.Cmd) == undecodable
}

type enabledKey struct{}

// Enabled reports whether the stream whose context is ctx uses Codec: a
// call made with Call's context and option, or a stream served by a server
// built with ServerOptions.
func Enabled(ctx context.Context) bool {
	on, _ := ctx.Value(enabledKey{}).(bool)
	return on
}

// Call returns ctx marked for Enabled and the call option that makes a
// client call use Codec. Pass both to the Flight call (DoGet, DoPut,
// DoExchange) whose stream a Writer or Reader then uses.
func Call(ctx context.Context) (context.Context, grpc.CallOption) {
	return context.WithValue(ctx, enabledKey{}, true), grpc.ForceCodecV2(Codec{})
}

// ServerOptions returns the options that make a gRPC server use Codec for
// every call and mark every stream's context for Enabled, and Pool as its
// buffer pool.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(Codec{}),
		experimental.BufferPool(Pool),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, &markedStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), enabledKey{}, true)})
		}),
	}
}

type markedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *markedStream) Context() context.Context { return s.ctx }

// ErrMalformed is wrapped by the error Reader reports for a FlightData that
// is not valid protobuf.
var ErrMalformed = errors.New("malformed FlightData")

// FlightData field numbers (Flight.proto).
const (
	fieldDescriptor = 1
	fieldHeader     = 2
	fieldAppMeta    = 3
	fieldBody       = 1000
)

func appendTag(b []byte, field int, wireType int) []byte {
	return appendVarint(b, uint64(field)<<3|uint64(wireType))
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// varint reads a varint at b[i:]; it returns the value and the position
// after it, or an error when it is truncated or longer than 10 bytes.
func varint(b []byte, i int) (uint64, int, error) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if i >= len(b) {
			return 0, 0, fmt.Errorf("%w: truncated varint", ErrMalformed)
		}
		c := b[i]
		i++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, i, nil
		}
	}
	return 0, 0, fmt.Errorf("%w: varint longer than 10 bytes", ErrMalformed)
}

// fields is the result of parsing a FlightData: slices of the input.
type fields struct {
	desc, header, app, body []byte
}

// parse parses the protobuf FlightData in b. Every length is checked
// against what remains before it is used; unknown fields are skipped, as
// protobuf does; a field repeated is the last one, as protobuf's bytes
// fields are (a repeated descriptor is merged by protobuf: here the last
// wins, which only a peer that splits one descriptor in two would notice).
func parse(b []byte) (fields, error) {
	var f fields
	_, err := parseFields(b, 0, &f, 0, 0)
	return f, err
}

// maxGroupDepth bounds the nesting of (unknown, deprecated) groups, as
// protobuf's own decoder does.
const maxGroupDepth = 100

// parseFields parses fields from b[i:] until the end of b or, inside a
// group (field group > 0), until that group's end tag; it returns the
// position after what it parsed. Fields inside a group are unknown ones:
// they are skipped, not kept.
func parseFields(b []byte, i int, f *fields, group uint64, depth int) (int, error) {
	for i < len(b) {
		tag, next, err := varint(b, i)
		if err != nil {
			return 0, err
		}
		i = next
		field, wt := tag>>3, tag&7
		if field == 0 || field > 1<<29-1 {
			return 0, fmt.Errorf("%w: field number %d", ErrMalformed, field)
		}
		switch wt {
		case 0: // varint
			if _, i, err = varint(b, i); err != nil {
				return 0, err
			}
		case 1: // fixed64
			if len(b)-i < 8 {
				return 0, fmt.Errorf("%w: truncated fixed64 field %d", ErrMalformed, field)
			}
			i += 8
		case 5: // fixed32
			if len(b)-i < 4 {
				return 0, fmt.Errorf("%w: truncated fixed32 field %d", ErrMalformed, field)
			}
			i += 4
		case 3: // start of a group: skipped whole
			if depth >= maxGroupDepth {
				return 0, fmt.Errorf("%w: groups nested deeper than %d", ErrMalformed, maxGroupDepth)
			}
			if i, err = parseFields(b, i, nil, field, depth+1); err != nil {
				return 0, err
			}
		case 4: // end of a group
			if field != group {
				return 0, fmt.Errorf("%w: end of group %d outside it", ErrMalformed, field)
			}
			return i, nil
		case 2: // length-delimited
			n, next, err := varint(b, i)
			if err != nil {
				return 0, err
			}
			i = next
			if n > uint64(len(b)-i) {
				return 0, fmt.Errorf("%w: field %d declares %d bytes, %d remain", ErrMalformed, field, n, len(b)-i)
			}
			v := b[i : i+int(n) : i+int(n)]
			i += int(n)
			if f == nil {
				continue
			}
			switch field {
			case fieldDescriptor:
				f.desc = v
			case fieldHeader:
				f.header = v
			case fieldAppMeta:
				f.app = v
			case fieldBody:
				f.body = v
			}
		default:
			return 0, fmt.Errorf("%w: wire type %d of field %d", ErrMalformed, wt, field)
		}
	}
	if group != 0 {
		return 0, fmt.Errorf("%w: group %d not ended", ErrMalformed, group)
	}
	return i, nil
}
