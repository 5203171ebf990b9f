package flightwire_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/flightwire"
)

// batches builds the test batches in mem: wide int64 columns (whose
// buffers are aliased), strings with nulls, a dictionary column whose
// dictionary changes between batches, a slice of a batch (re-encoded by
// the IPC writer, so copied), an empty batch and, when large, a 48 MiB one.
func batches(mem memory.Allocator, large bool) []arrow.RecordBatch {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "i", Type: arrow.PrimitiveTypes.Int64},
		{Name: "j", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}},
	}, nil)
	build := func(rows, seed int) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		for r := range rows {
			b.Field(0).(*array.Int64Builder).Append(int64(r * seed))
			if r%7 == 0 {
				b.Field(1).AppendNull()
				b.Field(2).AppendNull()
			} else {
				b.Field(1).(*array.Int64Builder).Append(int64(-r))
				b.Field(2).(*array.StringBuilder).Append(fmt.Sprintf("row %d of %d", r, seed))
			}
			if err := b.Field(3).(*array.BinaryDictionaryBuilder).AppendString(fmt.Sprintf("k%d", (r+seed)%(5+seed))); err != nil {
				panic(err)
			}
		}
		return b.NewRecordBatch()
	}
	big := build(16<<10, 1)
	out := []arrow.RecordBatch{big, build(1000, 2), big.NewSlice(3, 10000), build(0, 3), build(5, 4)}
	if large {
		// 3M rows, 48 MiB of int64s, built in bulk.
		const n = 3 << 20
		vals := make([]int64, n)
		for i := range vals {
			vals[i] = int64(i)
		}
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues(vals, nil)
		b.Field(1).AppendNulls(n)
		b.Field(2).AppendNulls(n)
		b.Field(3).AppendNulls(n)
		out = append(out, b.NewRecordBatch())
	}
	return out
}

func release(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// service serves recs on DoGet and checks DoPut's batches against them.
type service struct {
	flight.BaseFlightServer
	mem  memory.Allocator
	recs []arrow.RecordBatch
	opts []ipc.Option
	zero bool // both ends must be zero-copy
	// prefetch: DoPut reads through a Prefetch; with readOne it returns
	// after the first batch, leaving what was prefetched unread.
	prefetch, readOne bool
}

func (s *service) DoGet(_ *flight.Ticket, st flight.FlightService_DoGetServer) error {
	w := flightwire.NewWriter(st, append([]ipc.Option{ipc.WithSchema(s.recs[0].Schema()), ipc.WithAllocator(s.mem)}, s.opts...)...)
	defer w.Close()
	if w.ZeroCopy() != s.zero {
		return fmt.Errorf("writer zero-copy %v, want %v", w.ZeroCopy(), s.zero)
	}
	for i, r := range s.recs {
		if err := w.WriteWithAppMetadata(r, []byte(fmt.Sprint(i))); err != nil {
			return err
		}
	}
	return nil
}

func (s *service) DoPut(st flight.FlightService_DoPutServer) error {
	var in flightwire.RecvStream = st
	if s.prefetch {
		pre := flightwire.NewPrefetch(st, 8, nil)
		defer pre.Stop()
		in = pre
	}
	r, err := flightwire.NewReader(in, 1<<30, s.mem)
	if err != nil {
		return err
	}
	defer r.Release()
	if r.ZeroCopy() != s.zero {
		return fmt.Errorf("reader zero-copy %v, want %v", r.ZeroCopy(), s.zero)
	}
	if d := r.LatestFlightDescriptor(); d == nil || d.Path[0] != "put" {
		return fmt.Errorf("descriptor %v", d)
	}
	i := 0
	for ; r.Next(); i++ {
		if i >= len(s.recs) || !array.RecordEqual(r.RecordBatch(), s.recs[i]) {
			return fmt.Errorf("batch %d differs", i)
		}
		if err := st.Send(&flight.PutResult{AppMetadata: bytes.Clone(r.LatestAppMetadata())}); err != nil {
			return err
		}
		if s.readOne {
			return nil
		}
	}
	if err := r.Err(); err != nil {
		return err
	}
	if i != len(s.recs) {
		return fmt.Errorf("%d batches, want %d", i, len(s.recs))
	}
	return nil
}

// serve serves svc on loopback: through endpoint.NewServer (zero-copy)
// or a plain gRPC server.
func serve(t *testing.T, svc flight.FlightServer, zero bool) *grpc.ClientConn {
	t.Helper()
	var gs *grpc.Server
	if zero {
		var err error
		if gs, _, err = endpoint.NewServer(endpoint.ServerConfig{}); err != nil {
			t.Fatal(err)
		}
	} else {
		gs = grpc.NewServer(grpc.MaxRecvMsgSize(1<<30), grpc.MaxSendMsgSize(1<<30))
	}
	flight.RegisterFlightServiceServer(gs, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30), grpc.MaxCallSendMsgSize(1<<30)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// eventually waits, for a loaded machine's sake, until f holds: the
// transport frees what it sent on its own goroutine.
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after 30s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRoundTrip moves the batches both ways, zero-copy and not, with and
// without IPC body compression, and checks that every allocator reads zero
// and no received buffer stays aliased once the batches are released.
func TestRoundTrip(t *testing.T) {
	for _, zero := range []bool{true, false} {
		for _, comp := range []string{"none", "lz4", "zstd"} {
			t.Run(fmt.Sprintf("zero=%v/%s", zero, comp), func(t *testing.T) {
				roundTrip(t, zero, comp, zero && comp == "none" && !testing.Short(), false)
			})
			if comp == "none" {
				t.Run(fmt.Sprintf("zero=%v/prefetch", zero), func(t *testing.T) { roundTrip(t, zero, comp, false, true) })
			}
		}
	}
}

func roundTrip(t *testing.T, zero bool, comp string, large, prefetch bool) {
	smem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cmem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer smem.AssertSize(t, 0)
	defer cmem.AssertSize(t, 0)
	want := batches(memory.NewGoAllocator(), large)
	defer release(want)
	var opts []ipc.Option
	switch comp {
	case "lz4":
		opts = append(opts, ipc.WithLZ4())
	case "zstd":
		opts = append(opts, ipc.WithZstd())
	}
	// The sender's batches, in its checked allocator, are released as
	// soon as each Write returns: the transport keeps what it aliases.
	srecs := batches(smem, large)
	svc := &service{mem: smem, recs: srecs, opts: opts, zero: zero, prefetch: prefetch}
	conn := serve(t, svc, zero)
	fc := flight.NewFlightServiceClient(conn)
	ctx := context.Background()
	var copts []grpc.CallOption
	if zero {
		var o grpc.CallOption
		ctx, o = flightwire.Call(ctx)
		copts = append(copts, o)
	}

	// DoGet: keep every batch until the end, so each must stay readable
	// after the reader has moved on.
	st, err := fc.DoGet(ctx, &flight.Ticket{}, copts...)
	if err != nil {
		t.Fatal(err)
	}
	r, err := flightwire.NewReader(st, 1<<30, cmem)
	if err != nil {
		t.Fatal(err)
	}
	if r.ZeroCopy() != zero {
		t.Fatalf("reader zero-copy %v, want %v", r.ZeroCopy(), zero)
	}
	var got []arrow.RecordBatch
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		got = append(got, rec)
		if m := string(r.LatestAppMetadata()); m != fmt.Sprint(len(got)-1) {
			t.Errorf("batch %d: app metadata %q", len(got)-1, m)
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	r.Release()
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	if zero && comp == "none" && flightwire.LiveBodies() == 0 {
		t.Error("no received body is aliased while its batches are held")
	}
	for i := range got {
		if err := array.ValidateRecordFull(got[i]); err != nil {
			t.Errorf("batch %d: %v", i, err)
		}
		if !array.RecordEqual(got[i], want[i]) {
			t.Errorf("batch %d differs", i)
		}
	}
	release(got)
	if n := flightwire.LiveBodies(); n != 0 {
		t.Errorf("%d received bodies still aliased after every batch was released", n)
	}

	// DoPut: the client's writer, the server's reader.
	pst, err := fc.DoPut(ctx, copts...)
	if err != nil {
		t.Fatal(err)
	}
	w := flightwire.NewWriter(pst, append([]ipc.Option{ipc.WithSchema(want[0].Schema()), ipc.WithAllocator(cmem)}, opts...)...)
	if w.ZeroCopy() != zero {
		t.Fatalf("writer zero-copy %v, want %v", w.ZeroCopy(), zero)
	}
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"put"}})
	crecs := batches(cmem, large)
	for i, rec := range crecs {
		if err := w.WriteWithAppMetadata(rec, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		rec.Release() // the transport holds what it still needs
	}
	w.Close()
	if err := pst.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		res, err := pst.Recv()
		if errors.Is(err, io.EOF) {
			if i != len(want) {
				t.Fatalf("%d acks, want %d", i, len(want))
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if string(res.AppMetadata) != fmt.Sprint(i) {
			t.Fatalf("ack %d: %q", i, res.AppMetadata)
		}
	}
	release(srecs)
	eventually(t, "every sent batch released by the transport", func() bool { return smem.CurrentAlloc() == 0 && cmem.CurrentAlloc() == 0 })
	eventually(t, "no received body aliased", func() bool { return flightwire.LiveBodies() == 0 })
}

// TestPrefetchReleasesUnread: a DoPut handler that returns with messages
// prefetched but not read leaves no received body aliased (Stop releases
// them) and every allocator at zero.
func TestPrefetchReleasesUnread(t *testing.T) {
	smem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	cmem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer smem.AssertSize(t, 0)
	defer cmem.AssertSize(t, 0)
	srecs := batches(smem, false)
	defer release(srecs)
	conn := serve(t, &service{mem: smem, recs: srecs, zero: true, prefetch: true, readOne: true}, true)
	fc := flight.NewFlightServiceClient(conn)
	ctx, o := flightwire.Call(context.Background())
	pst, err := fc.DoPut(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	w := flightwire.NewWriter(pst, ipc.WithSchema(srecs[0].Schema()), ipc.WithAllocator(cmem))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"put"}})
	crecs := batches(cmem, false)
	for i, rec := range crecs {
		_ = w.WriteWithAppMetadata(rec, []byte(fmt.Sprint(i))) // the server may have returned
		rec.Release()
	}
	w.Close()
	_ = pst.CloseSend()
	for {
		if _, err := pst.Recv(); err != nil {
			break
		}
	}
	eventually(t, "every sent batch released by the transport", func() bool { return cmem.CurrentAlloc() == 0 })
	eventually(t, "no received body aliased", func() bool { return flightwire.LiveBodies() == 0 })
}

// TestWireBytes: what the codec marshals is byte for byte what arrow-go's
// flight.Writer and protobuf send, so any Flight peer reads it.
func TestWireBytes(t *testing.T) {
	recs := batches(memory.NewGoAllocator(), false)
	defer release(recs)
	for _, comp := range []string{"none", "zstd"} {
		var opts []ipc.Option
		if comp == "zstd" {
			opts = append(opts, ipc.WithZstd())
		}
		desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte("cmd")}
		var theirs, ours capture
		fw := flight.NewRecordWriter(&theirs, append([]ipc.Option{ipc.WithSchema(recs[0].Schema())}, opts...)...)
		fw.SetFlightDescriptor(desc)
		ours.zero = true
		ww := flightwire.NewWriter(&ours, append([]ipc.Option{ipc.WithSchema(recs[0].Schema())}, opts...)...)
		ww.SetFlightDescriptor(desc)
		for i, r := range recs {
			if err := fw.WriteWithAppMetadata(r, []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
			if err := ww.WriteWithAppMetadata(r, []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
		}
		fw.Close()
		ww.Close()
		if len(ours.msgs) != len(theirs.msgs) || len(ours.msgs) < len(recs) {
			t.Fatalf("%s: %d messages, arrow-go sent %d", comp, len(ours.msgs), len(theirs.msgs))
		}
		for i := range ours.msgs {
			if !bytes.Equal(ours.msgs[i], theirs.msgs[i]) {
				t.Errorf("%s: message %d differs from arrow-go's (%d and %d bytes)", comp, i, len(ours.msgs[i]), len(theirs.msgs[i]))
			}
		}
		if comp == "none" && ours.aliased == 0 {
			t.Error("no buffer was aliased")
		}
	}
}

// capture marshals what is sent as protobuf bytes: arrow-go's FlightData
// with protobuf, ours with the codec.
type capture struct {
	zero    bool
	msgs    [][]byte
	aliased int
}

func (c *capture) Context() context.Context {
	if c.zero {
		ctx, _ := flightwire.Call(context.Background())
		return ctx
	}
	return context.Background()
}

func (c *capture) Send(fd *flight.FlightData) error {
	b, err := proto.Marshal(fd)
	c.msgs = append(c.msgs, b)
	return err
}

func (c *capture) SendMsg(m any) error {
	bs, err := flightwire.Codec{}.Marshal(m)
	if err != nil {
		return err
	}
	for _, b := range bs {
		if _, ok := b.(mem.SliceBuffer); !ok {
			c.aliased++
		}
	}
	c.msgs = append(c.msgs, bs.Materialize())
	bs.Free()
	return nil
}

// TestParseMalformed: a FlightData that is not valid protobuf is refused
// with ErrMalformed, never a panic; valid variants (fields reordered,
// unknown fields) parse as protobuf does.
func TestParseMalformed(t *testing.T) {
	good := func() []byte {
		b, _ := proto.Marshal(&flight.FlightData{DataHeader: []byte("hdr"), AppMetadata: []byte("app"), DataBody: bytes.Repeat([]byte{7}, 100)})
		return b
	}()
	for _, c := range malformed(good) {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := flightwire.Unmarshal(c.b)
			if !errors.Is(err, flightwire.ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
	var fd flight.FlightData
	for name, b := range map[string][]byte{
		"as protobuf writes it": good,
		"fields reordered":      append(append([]byte{0xc2, 0x3e, 3, 1, 2, 3}, 0x1a, 1, 'a'), 0x12, 3, 'h', 'd', 'r'),
		"unknown fields":        append([]byte{0x20, 0x96, 0x01, 0x29, 1, 2, 3, 4, 5, 6, 7, 8, 0x35, 1, 2, 3, 4, 0x3a, 2, 'x', 'y'}, good...),
		"empty":                 {},
		"unknown group":         append([]byte{0x23, 0x08, 0x01, 0x2b, 0x2c, 0x24}, good...),
	} {
		h, n, err := flightwire.Unmarshal(b)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if err := proto.Unmarshal(b, &fd); err != nil {
			t.Fatalf("%s: protobuf refuses it: %v", name, err)
		}
		if !bytes.Equal(h, fd.DataHeader) || n != len(fd.DataBody) {
			t.Errorf("%s: header %q body %d, protobuf reads %q and %d", name, h, n, fd.DataHeader, len(fd.DataBody))
		}
	}
	if n := flightwire.LiveBodies(); n != 0 {
		t.Errorf("%d bodies still aliased", n)
	}
}

type rawCase struct {
	name string
	b    []byte
}

// malformed returns FlightData encodings that lie or are cut short, made
// from the valid encoding good.
func malformed(good []byte) []rawCase {
	return []rawCase{
		{"body length lies", append([]byte{0xc2, 0x3e, 0xff, 0xff, 0x03}, 1, 2, 3)},
		{"body length 2^63", append([]byte{0xc2, 0x3e, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, 1, 2, 3)},
		{"header length lies", []byte{0x12, 0x40, 'h'}},
		{"truncated tag", []byte{0xc2}},
		{"truncated length", []byte{0x12}},
		{"truncated", good[:len(good)-1]},
		{"varint of 11 bytes", []byte{0x20, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}},
		{"truncated fixed64", []byte{0x29, 1, 2}},
		{"truncated fixed32", []byte{0x35, 1}},
		{"field 0", []byte{0x02, 0}},
		{"group not ended", []byte{0x13, 0x08, 0x01}},
		{"group end alone", []byte{0x14}},
		{"group ended by another", []byte{0x13, 0x1c}},
		{"wire type 7", []byte{0x17}},
	}
}

// FuzzParse: the codec's parse never panics and agrees with protobuf on
// what is valid and what the fields hold.
func FuzzParse(f *testing.F) {
	good, _ := proto.Marshal(&flight.FlightData{FlightDescriptor: &flight.FlightDescriptor{Path: []string{"p"}}, DataHeader: []byte("hdr"), AppMetadata: []byte("app"), DataBody: bytes.Repeat([]byte{7}, 100)})
	f.Add(good)
	for _, c := range malformed(good) {
		f.Add(c.b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := flightwire.Unmarshal(b)
		var fd flight.FlightData
		perr := proto.Unmarshal(b, &fd)
		if err == nil && perr == nil && (!bytes.Equal(h, fd.DataHeader) || n != len(fd.DataBody)) {
			t.Fatalf("header %q body %d; protobuf reads %q and %d", h, n, fd.DataHeader, len(fd.DataBody))
		}
		if err != nil && perr == nil && !strings.Contains(err.Error(), "field number") {
			// protobuf accepts nothing this parser refuses, but for field
			// numbers it reserves (19000-19999 are fine on the wire).
			t.Fatalf("refused %x that protobuf reads: %v", b, err)
		}
	})
}

// TestMalformedOverGRPC: a peer that sends a malformed FlightData to a
// zero-copy reader gets the refusal, not INTERNAL, and nothing leaks.
func TestMalformedOverGRPC(t *testing.T) {
	good, _ := proto.Marshal(&flight.FlightData{DataHeader: []byte("hdr")})
	svc := &refuser{}
	conn := serve(t, svc, true)
	for _, c := range malformed(good) {
		st, err := conn.NewStream(context.Background(), &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/arrow.flight.protocol.FlightService/DoPut", grpc.ForceCodecV2(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SendMsg(c.b); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		_ = st.CloseSend()
		var out []byte
		err = st.RecvMsg(&out)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "malformed FlightData") {
			t.Errorf("%s: got %v, want INVALID_ARGUMENT", c.name, err)
		}
	}
	if n := flightwire.LiveBodies(); n != 0 {
		t.Errorf("%d bodies still aliased", n)
	}
}

// refuser answers DoPut the way Flightline's servers do: a malformed
// message is INVALID_ARGUMENT.
type refuser struct{ flight.BaseFlightServer }

func (refuser) DoPut(st flight.FlightService_DoPutServer) error {
	r, err := flightwire.NewReader(st, 1<<20, nil)
	if errors.Is(err, flightwire.ErrMalformed) {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if err != nil {
		return err
	}
	r.Release()
	return errors.New("a malformed message was read")
}

// rawCodec sends []byte as they are.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

// TestCancelReleases: a client that goes away in the middle of a DoGet
// (its call cancelled, then its connection closed) leaves no sent batch
// retained by the server's transport once the server has stopped.
func TestCancelReleases(t *testing.T) {
	for _, how := range []string{"cancel", "close"} {
		t.Run(how, func(t *testing.T) {
			smem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			recs := batches(smem, false)
			svc := &endless{mem: smem, rec: recs[0]}
			gs, _, err := endpoint.NewServer(endpoint.ServerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			flight.RegisterFlightServiceServer(gs, svc)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			go gs.Serve(lis)
			conn, err := endpoint.Dial("grpc://"+lis.Addr().String(), endpoint.ClientConfig{})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ctx, o := flightwire.Call(ctx)
			st, err := flight.NewFlightServiceClient(conn).DoGet(ctx, &flight.Ticket{}, o)
			if err != nil {
				t.Fatal(err)
			}
			r, err := flightwire.NewReader(st, 1<<30, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 3 && r.Next(); i++ {
			}
			if how == "cancel" {
				cancel()
			}
			conn.Close()
			r.Release()
			cancel()
			gs.Stop()
			release(recs)
			// What a dead transport never freed, the garbage collector
			// releases once gRPC can no longer reach it.
			eventually(t, "every sent batch released", func() bool { runtime.GC(); return smem.CurrentAlloc() == 0 })
			eventually(t, "no received body aliased", func() bool { return flightwire.LiveBodies() == 0 })
		})
	}
}

// endless sends rec until the call ends.
type endless struct {
	flight.BaseFlightServer
	mem memory.Allocator
	rec arrow.RecordBatch
}

func (s *endless) DoGet(_ *flight.Ticket, st flight.FlightService_DoGetServer) error {
	w := flightwire.NewWriter(st, ipc.WithSchema(s.rec.Schema()), ipc.WithAllocator(s.mem))
	defer w.Close()
	for {
		if err := w.Write(s.rec); err != nil {
			return err
		}
	}
}
