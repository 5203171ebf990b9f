// Package doputtest is the corpus of malformed DoPut streams every sink is
// tested with, in-process (flightsink.Server.DoPut on an in-memory stream)
// and over Flight (a loopback gRPC server), and the seed corpus of the
// DoPut fuzz targets.
//
// Each case starts from a valid IPC stream written by arrow-go and breaks
// one rule in the bytes a client sends: the flatbuffer metadata (body
// length, version, node lengths and null counts, buffer lengths,
// compression length prefixes) or the body (offsets, dictionary indices).
// The positions come from ipcguard.Locate, so the cases are exact, not
// random.
package doputtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/internal/flightwire"
	"github.com/flightline/flightline/internal/ipcguard"
)

// Message is one IPC message: a FlightData's data_header and data_body.
type Message struct{ Header, Body []byte }

// Encode writes schema and recs as an IPC stream with opts (ipc.WithLZ4(),
// ipc.WithZstd()) and returns its messages: the schema, then any
// dictionary batch before each record batch.
func Encode(schema *arrow.Schema, recs []arrow.RecordBatch, opts ...ipc.Option) []Message {
	var c collector
	w := flight.NewRecordWriter(&c, append([]ipc.Option{ipc.WithSchema(schema)}, opts...)...)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			panic(err)
		}
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return c.msgs
}

type collector struct{ msgs []Message }

func (c *collector) Send(fd *flight.FlightData) error {
	if len(fd.DataHeader) > 0 {
		c.msgs = append(c.msgs, Message{Header: bytes.Clone(fd.DataHeader), Body: bytes.Clone(fd.DataBody)})
	}
	return nil
}

// FlightData turns messages into the DoPut stream a client sends: the first
// carries desc, and every record batch a checkpoint {"positions":{"c/0":n}}
// (n counting record batches from 1). Dictionary batches carry none.
func FlightData(desc *flight.FlightDescriptor, msgs []Message) []*flight.FlightData {
	out := make([]*flight.FlightData, len(msgs))
	n := 0
	for i, m := range msgs {
		fd := &flight.FlightData{DataHeader: m.Header, DataBody: m.Body}
		if i == 0 {
			fd.FlightDescriptor = desc
		}
		if headerType(m.Header) == 3 {
			n++
			fd.AppMetadata = Checkpoint(n)
		}
		out[i] = fd
	}
	return out
}

// Checkpoint is the checkpoint FlightData gives the n-th record batch.
func Checkpoint(n int) []byte { return checkpoint.Positions{"c/0": int64(n)}.Encode() }

// headerType reads the header type of a Message flatbuffer (3: record
// batch), or -1 when it cannot.
func headerType(h []byte) int {
	if len(h) < 4 {
		return -1
	}
	t := int(binary.LittleEndian.Uint32(h))
	if t < 0 || t+4 > len(h) {
		return -1
	}
	vt := t - int(int32(binary.LittleEndian.Uint32(h[t:])))
	if vt < 0 || vt+8 > len(h) {
		return -1
	}
	size := int(binary.LittleEndian.Uint16(h[vt:]))
	if size < 8 {
		return 0
	}
	off := int(binary.LittleEndian.Uint16(h[vt+6:]))
	if off == 0 || t+off >= len(h) {
		return 0
	}
	return int(h[t+off])
}

// Case is one malformed stream. Every case must be refused with
// INVALID_ARGUMENT and commit nothing.
type Case struct {
	Name     string
	Messages []Message
}

const rows = 100

func schemaOf(fields ...arrow.Field) *arrow.Schema { return arrow.NewSchema(fields, nil) }

// Strings is a valid batch of rows strings, every tenth null.
func Strings(mem memory.Allocator) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schemaOf(arrow.Field{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}))
	defer b.Release()
	sb := b.Field(0).(*array.StringBuilder)
	for i := range rows {
		if i%10 == 3 {
			sb.AppendNull()
		} else {
			sb.Append(fmt.Sprintf("value-%03d", i))
		}
	}
	return b.NewRecordBatch()
}

// Int64s is a valid batch of rows int64s, every tenth null.
func Int64s(mem memory.Allocator) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schemaOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true}))
	defer b.Release()
	ib := b.Field(0).(*array.Int64Builder)
	for i := range rows {
		if i%10 == 3 {
			ib.AppendNull()
		} else {
			ib.Append(int64(i))
		}
	}
	return b.NewRecordBatch()
}

// Lists is a valid batch of rows lists of int64 (0 to 3 items each).
func Lists(mem memory.Allocator) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schemaOf(arrow.Field{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true}))
	defer b.Release()
	lb := b.Field(0).(*array.ListBuilder)
	vb := lb.ValueBuilder().(*array.Int64Builder)
	for i := range rows {
		lb.Append(true)
		for j := range i % 4 {
			vb.Append(int64(i*10 + j))
		}
	}
	return b.NewRecordBatch()
}

// Structs is a valid batch of rows structs {x int64, y string}.
func Structs(mem memory.Allocator) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schemaOf(arrow.Field{Name: "st", Nullable: true, Type: arrow.StructOf(
		arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		arrow.Field{Name: "y", Type: arrow.BinaryTypes.String, Nullable: true})}))
	defer b.Release()
	sb := b.Field(0).(*array.StructBuilder)
	xb := sb.FieldBuilder(0).(*array.Int64Builder)
	yb := sb.FieldBuilder(1).(*array.StringBuilder)
	for i := range rows {
		sb.Append(true)
		xb.Append(int64(i))
		yb.Append(fmt.Sprintf("y%d", i))
	}
	return b.NewRecordBatch()
}

// Dictionaries is a valid batch of rows dictionary<int32, string> values.
func Dictionaries(mem memory.Allocator) arrow.RecordBatch {
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	b := array.NewRecordBuilder(mem, schemaOf(arrow.Field{Name: "d", Type: dt, Nullable: true}))
	defer b.Release()
	db := b.Field(0).(*array.BinaryDictionaryBuilder)
	for i := range rows {
		if err := db.AppendString(fmt.Sprintf("k%d", i%7)); err != nil {
			panic(err)
		}
	}
	return b.NewRecordBatch()
}

// Values is a valid batch of rows (id int64, value binary): the shape of
// a Kafka record, which sinks that need a key or a value column store.
func Values(mem memory.Allocator) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schemaOf(
		arrow.Field{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true}))
	defer b.Release()
	ib := b.Field(0).(*array.Int64Builder)
	vb := b.Field(1).(*array.BinaryBuilder)
	for i := range rows {
		ib.Append(int64(i))
		vb.Append([]byte(fmt.Sprintf(`{"n":%d}`, i)))
	}
	return b.NewRecordBatch()
}

// Valid returns the valid streams the cases start from, one per shape,
// plain and compressed: the fuzz targets' seeds and the "still serving"
// check.
func Valid() []Case {
	mem := memory.NewGoAllocator()
	var out []Case
	for _, v := range []struct {
		name string
		mk   func(memory.Allocator) arrow.RecordBatch
	}{{"strings", Strings}, {"int64s", Int64s}, {"lists", Lists}, {"structs", Structs}, {"dictionaries", Dictionaries}, {"values", Values}} {
		rec := v.mk(mem)
		out = append(out, Case{v.name, Encode(rec.Schema(), []arrow.RecordBatch{rec})})
		rec.Release()
	}
	rec := Strings(mem)
	out = append(out, Case{"strings lz4", Encode(rec.Schema(), []arrow.RecordBatch{rec}, ipc.WithLZ4())})
	out = append(out, Case{"strings zstd", Encode(rec.Schema(), []arrow.RecordBatch{rec}, ipc.WithZstd())})
	rec.Release()
	return out
}

// edit copies msgs and applies f to a copy of message i's header and body.
func edit(msgs []Message, i int, f func(l ipcguard.Layout, header, body []byte)) []Message {
	out := make([]Message, len(msgs))
	for j, m := range msgs {
		out[j] = Message{Header: bytes.Clone(m.Header), Body: bytes.Clone(m.Body)}
	}
	l, err := ipcguard.Locate(out[i].Header)
	if err != nil {
		panic(fmt.Sprintf("doputtest: message %d: %v", i, err))
	}
	f(l, out[i].Header, out[i].Body)
	return out
}

func put64(b []byte, p int, v int64) { binary.LittleEndian.PutUint64(b[p:], uint64(v)) }
func get64(b []byte, p int) int64    { return int64(binary.LittleEndian.Uint64(b[p:])) }

// buffer returns the offset and length of buffer k of l.
func buffer(l ipcguard.Layout, h []byte, k int) (int, int) {
	return int(get64(h, l.Buffers[k])), int(get64(h, l.Buffers[k]+8))
}

func putOffset(body []byte, start, i int, v int32) {
	binary.LittleEndian.PutUint32(body[start+4*i:], uint32(v))
}

// Cases returns the corpus: the malformed inputs of issue 22, each built
// from a valid stream.
func Cases() []Case {
	mem := memory.NewGoAllocator()
	enc := func(mk func(memory.Allocator) arrow.RecordBatch, opts ...ipc.Option) []Message {
		rec := mk(mem)
		defer rec.Release()
		return Encode(rec.Schema(), []arrow.RecordBatch{rec}, opts...)
	}
	str, i64, lists, structs, dicts := enc(Strings), enc(Int64s), enc(Lists), enc(Structs), enc(Dictionaries)
	lz4, zstd := enc(Strings, ipc.WithLZ4()), enc(Strings, ipc.WithZstd())
	structsLZ4 := enc(Structs, ipc.WithLZ4())
	last := func(m []Message) int { return len(m) - 1 }
	// Buffers: strings validity 0, offsets 1, data 2; int64 validity 0,
	// values 1; list validity 0, offsets 1, child validity 2, values 3;
	// struct validity 0, x validity 1, x values 2, y validity 3, offsets 4,
	// data 5; dictionary batch: validity 0, offsets 1, data 2; record
	// batch: validity 0, indices 1.
	cs := []Case{
		{"string offsets negative", edit(str, 1, func(l ipcguard.Layout, h, b []byte) {
			off, _ := buffer(l, h, 1)
			putOffset(b, off, 50, -8)
		})},
		{"string offsets not monotonic", edit(str, 1, func(l ipcguard.Layout, h, b []byte) {
			off, _ := buffer(l, h, 1)
			putOffset(b, off, 50, int32(binary.LittleEndian.Uint32(b[off+4*rows:])))
		})},
		{"string first offset huge", edit(str, 1, func(l ipcguard.Layout, h, b []byte) {
			off, _ := buffer(l, h, 1)
			putOffset(b, off, 0, 1<<30)
		})},
		{"string last offset past the data", edit(str, 1, func(l ipcguard.Layout, h, b []byte) {
			off, _ := buffer(l, h, 1)
			putOffset(b, off, rows, 1<<20)
		})},
		{"string not UTF-8", edit(str, 1, func(l ipcguard.Layout, h, b []byte) {
			off, _ := buffer(l, h, 2)
			b[off] = 0xff
		})},
		{"validity bitmap shorter than the batch", edit(str, 1, func(l ipcguard.Layout, h, b []byte) {
			put64(h, l.Buffers[0]+8, 1)
		})},
		{"int64 values buffer too short", edit(i64, 1, func(l ipcguard.Layout, h, b []byte) {
			put64(h, l.Buffers[1]+8, 8)
		})},
		{"null count 2^40", edit(i64, 1, func(l ipcguard.Layout, h, b []byte) {
			put64(h, l.Nodes[0]+8, 1<<40)
		})},
		{"null count lies", edit(i64, 1, func(l ipcguard.Layout, h, b []byte) {
			put64(h, l.Nodes[0]+8, 2)
		})},
		{"row count lies", edit(i64, 1, func(l ipcguard.Layout, h, b []byte) {
			put64(h, l.Length, rows*10)
		})},
		{"list offsets past the child", edit(lists, 1, func(l ipcguard.Layout, h, b []byte) {
			off, _ := buffer(l, h, 1)
			putOffset(b, off, rows, 1<<16)
		})},
		{"list offsets not monotonic", edit(lists, 1, func(l ipcguard.Layout, h, b []byte) {
			off, _ := buffer(l, h, 1)
			putOffset(b, off, 40, int32(binary.LittleEndian.Uint32(b[off+4*rows:])))
		})},
		{"list offsets negative", edit(lists, 1, func(l ipcguard.Layout, h, b []byte) {
			off, _ := buffer(l, h, 1)
			putOffset(b, off, 40, -3)
		})},
		{"struct child shorter than its parent", edit(structs, 1, func(l ipcguard.Layout, h, b []byte) {
			put64(h, l.Nodes[1], rows/2)
		})},
		{"struct child longer than its parent", edit(structs, 1, func(l ipcguard.Layout, h, b []byte) {
			put64(h, l.Nodes[1], rows*2)
		})},
		{"dictionary index out of range", edit(dicts, last(dicts), func(l ipcguard.Layout, h, b []byte) {
			off, _ := buffer(l, h, 1)
			binary.LittleEndian.PutUint32(b[off+4*10:], 1000)
		})},
		{"dictionary index negative", edit(dicts, last(dicts), func(l ipcguard.Layout, h, b []byte) {
			off, _ := buffer(l, h, 1)
			binary.LittleEndian.PutUint32(b[off+4*10:], 0xffffffff)
		})},
		{"body length lies", edit(i64, 1, func(l ipcguard.Layout, h, b []byte) {
			put64(h, l.BodyLength, int64(len(b))+64)
		})},
		{"metadata version 99", edit(i64, 1, func(l ipcguard.Layout, h, b []byte) {
			binary.LittleEndian.PutUint16(h[l.Version:], 99)
		})},
		{"buffer past the body", edit(i64, 1, func(l ipcguard.Layout, h, b []byte) {
			put64(h, l.Buffers[1], int64(len(b)))
		})},
		{"buffer length negative", edit(i64, 1, func(l ipcguard.Layout, h, b []byte) {
			put64(h, l.Buffers[1]+8, -16)
		})},
		{"node length negative", edit(i64, 1, func(l ipcguard.Layout, h, b []byte) {
			put64(h, l.Nodes[0], -1)
		})},
		{"row count 2^62", edit(i64, 1, func(l ipcguard.Layout, h, b []byte) {
			put64(h, l.Length, 1<<62)
		})},
		{"node length 2^40", edit(i64, 1, func(l ipcguard.Layout, h, b []byte) {
			put64(h, l.Nodes[0], 1<<40)
		})},
		{"LZ4 body declaring 1 TiB", bomb(lz4, 1<<40)},
		{"ZSTD body declaring 8 GiB", bomb(zstd, 8<<30)},
		{"ZSTD body declaring 600 MiB", bomb(zstd, 600<<20)},
		{"LZ4 corrupt data", edit(lz4, 1, func(l ipcguard.Layout, h, b []byte) {
			off, n := buffer(l, h, 2)
			for i := off + 8; i < off+n; i++ {
				b[i] ^= 0x5a
			}
		})},
		// arrow-go's reader decompresses a column's buffers as it reads
		// them and panics when the next one is missing, leaking those
		// already decompressed.
		{"LZ4 struct batch with its last buffer missing", edit(structsLZ4, 1, func(l ipcguard.Layout, h, b []byte) {
			binary.LittleEndian.PutUint32(h[l.Buffers[0]-4:], uint32(len(l.Buffers)-1))
		})},
		{"LZ4 struct batch with its last field node missing", edit(structsLZ4, 1, func(l ipcguard.Layout, h, b []byte) {
			binary.LittleEndian.PutUint32(h[l.Nodes[0]-4:], uint32(len(l.Nodes)-1))
		})},
		{"batch before the schema", []Message{i64[1], i64[0], i64[1]}},
		{"schema declaring 2^31 fields", schemaFields(i64, 1<<31-1)},
		{"schema declaring 2^20 fields", schemaFields(i64, 1<<20)},
	}
	return cs
}

// schemaFields sets the length of the fields vector of a stream's schema
// message to n.
func schemaFields(msgs []Message, n uint32) []Message {
	out := make([]Message, len(msgs))
	copy(out, msgs)
	h := bytes.Clone(msgs[0].Header)
	p, err := ipcguard.LocateSchemaFields(h)
	if err != nil {
		panic(err)
	}
	binary.LittleEndian.PutUint32(h[p:], n)
	out[0] = Message{Header: h, Body: msgs[0].Body}
	return out
}

// bomb sets the uncompressed length prefix of the compressed data buffer of
// a strings stream's batch to size.
func bomb(msgs []Message, size int64) []Message {
	return edit(msgs, 1, func(l ipcguard.Layout, h, b []byte) {
		off, _ := buffer(l, h, 2)
		put64(b, off, size)
	})
}

// Bombs returns the cases that declare far more than they carry: the
// compressed bodies and the schemas declaring millions of fields.
func Bombs() []Case {
	var out []Case
	for _, c := range Cases() {
		if bytes.Contains([]byte(c.Name), []byte("declaring")) {
			out = append(out, c)
		}
	}
	return out
}

// Marshal encodes messages as one fuzz input: for each, a uint32 header
// length, the header, a uint32 body length, the body.
func Marshal(msgs []Message) []byte {
	var b []byte
	for _, m := range msgs {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(m.Header)))
		b = append(b, m.Header...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(m.Body)))
		b = append(b, m.Body...)
	}
	return b
}

// Unmarshal decodes a fuzz input; a truncated tail is dropped. At most 16
// messages are decoded.
func Unmarshal(b []byte) []Message {
	var out []Message
	next := func() ([]byte, bool) {
		if len(b) < 4 {
			return nil, false
		}
		n := binary.LittleEndian.Uint32(b)
		b = b[4:]
		if uint64(n) > uint64(len(b)) {
			return nil, false
		}
		v := b[:n]
		b = b[n:]
		return v, true
	}
	for len(out) < 16 {
		h, ok := next()
		if !ok {
			break
		}
		body, ok := next()
		if !ok {
			break
		}
		out = append(out, Message{Header: h, Body: body})
	}
	return out
}

// Stream is an in-memory flight.FlightService_DoPutServer: Recv returns
// the messages in order, then io.EOF; Send collects the acks. With Wire,
// its context says it uses flightwire's codec, and RecvMsg gives the
// server each message as that codec parses its protobuf encoding, so the
// server reads through flightwire's zero-copy path.
type Stream struct {
	grpc.ServerStream
	Ctx  context.Context
	In   []*flight.FlightData
	Acks [][]byte
	Wire bool
}

// Context implements grpc.ServerStream.
func (s *Stream) Context() context.Context {
	if s.Wire {
		ctx, _ := flightwire.Call(s.Ctx)
		return ctx
	}
	return s.Ctx
}

// RecvMsg implements grpc.ServerStream for a Wire stream.
func (s *Stream) RecvMsg(m any) error {
	if !s.Wire {
		return errors.New("doputtest: RecvMsg on a stream that is not Wire")
	}
	if len(s.In) == 0 {
		return io.EOF
	}
	b, err := proto.Marshal(s.In[0])
	if err != nil {
		return err
	}
	s.In = s.In[1:]
	return flightwire.Codec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, m)
}

// SetHeader implements grpc.ServerStream.
func (s *Stream) SetHeader(metadata.MD) error { return nil }

// SendHeader implements grpc.ServerStream.
func (s *Stream) SendHeader(metadata.MD) error { return nil }

// SetTrailer implements grpc.ServerStream.
func (s *Stream) SetTrailer(metadata.MD) {}

// Recv implements flight.FlightService_DoPutServer.
func (s *Stream) Recv() (*flight.FlightData, error) {
	if len(s.In) == 0 {
		return nil, io.EOF
	}
	fd := s.In[0]
	s.In = s.In[1:]
	return fd, nil
}

// Send implements flight.FlightService_DoPutServer.
func (s *Stream) Send(r *flight.PutResult) error {
	s.Acks = append(s.Acks, bytes.Clone(r.AppMetadata))
	return nil
}

// DoPutServer is what the in-process runner needs of flightsink.Server.
type DoPutServer interface {
	DoPut(flight.FlightService_DoPutServer) error
}

// InProcess runs one DoPut of msgs on srv without gRPC and returns the acks
// and the handler's error (a status error).
func InProcess(ctx context.Context, srv DoPutServer, msgs []*flight.FlightData) ([][]byte, error) {
	s := &Stream{Ctx: ctx, In: msgs}
	err := srv.DoPut(s)
	return s.Acks, err
}

// InProcessWire is InProcess through flightwire's codec (a Wire Stream).
func InProcessWire(ctx context.Context, srv DoPutServer, msgs []*flight.FlightData) ([][]byte, error) {
	s := &Stream{Ctx: ctx, In: msgs, Wire: true}
	err := srv.DoPut(s)
	return s.Acks, err
}

// RawCases are DoPut streams whose FlightData is not valid protobuf: a
// length that lies, a field cut short. Each is one message, sent as it is
// (RawOverFlight).
func RawCases() []RawCase {
	msgs := FlightData(Descriptor, Valid()[0].Messages)
	schema, _ := proto.Marshal(msgs[0])
	batch, _ := proto.Marshal(msgs[1])
	lie := func(b []byte) []byte {
		// data_header is field 2; its length follows the tag (0x12).
		out := bytes.Clone(b)
		i := bytes.IndexByte(out, 0x12)
		out[i+1] += 100
		return out
	}
	return []RawCase{
		{"schema message cut short", schema[:len(schema)-1]},
		{"batch message cut short", batch[:len(batch)-3]},
		{"header length lies", lie(schema)},
		{"body length lies", append(bytes.Clone(schema), 0xc2, 0x3e, 0xff, 0xff, 0xff, 0xff, 0x07, 1, 2, 3)},
		{"truncated varint", append(bytes.Clone(schema), 0xc2, 0x3e, 0xff)},
		{"wire type 7", append(bytes.Clone(schema), 0x0f)},
	}
}

// RawCase is one message of raw protobuf bytes.
type RawCase struct {
	Name string
	B    []byte
}

// RawOverFlight sends b as one DoPut message to the server at conn, as it
// is, and returns the call's status error.
func RawOverFlight(ctx context.Context, conn *grpc.ClientConn, b []byte) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true},
		"/arrow.flight.protocol.FlightService/DoPut", grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		return err
	}
	if err := st.SendMsg(b); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	_ = st.CloseSend()
	for {
		var out []byte
		if err := st.RecvMsg(&out); err != nil {
			return err
		}
	}
}

// RawUnary calls the unary Flight method (e.g. "GetFlightInfo") of the
// server at conn with b as the request message, as it is, and returns the
// call's status error.
func RawUnary(ctx context.Context, conn *grpc.ClientConn, method string, b []byte) error {
	var out []byte
	return conn.Invoke(ctx, "/arrow.flight.protocol.FlightService/"+method, b, &out, grpc.ForceCodecV2(rawCodec{}))
}

// UndecodableDescriptor is a request message that does not decode as a
// FlightDescriptor: field 1 (type) as a varint that never ends.
var UndecodableDescriptor = []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// rawCodec sends []byte as they are and receives them so.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// OverFlight runs one DoPut of msgs against the Flight server at conn and
// returns the acks and the call's status error.
func OverFlight(ctx context.Context, conn grpc.ClientConnInterface, msgs []*flight.FlightData) ([][]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := flight.NewFlightServiceClient(conn).DoPut(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if err := st.Send(m); err != nil {
			break // the server ended the call; Recv returns its status
		}
	}
	_ = st.CloseSend()
	var acks [][]byte
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return acks, nil
		}
		if err != nil {
			return acks, err
		}
		acks = append(acks, bytes.Clone(r.AppMetadata))
	}
}

// Descriptor is the descriptor the runners' streams carry.
var Descriptor = &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"corpus"}}
