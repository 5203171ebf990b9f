package flightsink_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
)

// Any Sink is served over Arrow Flight by flightsink.NewServer and reached
// through flightsink.Dial: the Client is a Sink too, so a coordinator (or
// a Python or Rust client, see docs/protocol.md) writes to a remote sink as
// to a local one.
func ExampleNewServer() {
	ctx := context.Background()
	sink := flightsink.NewMemory()
	defer sink.Release()

	// Serve the sink. flightline serve-sink also adds TLS, tokens and the
	// health service; a plain gRPC server needs only the message size.
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(flightline.MaxMessageSize), grpc.MaxSendMsgSize(flightline.MaxMessageSize))
	flight.RegisterFlightServiceServer(gs, flightsink.NewServer(sink))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go gs.Serve(lis)
	defer gs.Stop()

	// Dial it and write one batch with its checkpoint.
	remote, err := flightsink.Dial("grpc://"+lis.Addr().String(), flightsink.ClientConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer remote.Close()
	p := flightsink.Pipeline{ID: "example", Target: "orders"}
	w, last, err := remote.Open(ctx, p)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("resume after: %q\n", last)
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(`[{"id":1},{"id":2},{"id":3}]`))
	if err != nil {
		log.Fatal(err)
	}
	err = w.WriteBatch(ctx, rec, []byte("after-3"))
	rec.Release()
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		log.Fatal(err)
	}

	cp, err := remote.Checkpoint(ctx, p)
	if err != nil {
		log.Fatal(err)
	}
	rows := int64(0)
	for _, b := range sink.Batches("orders") {
		rows += b.NumRows()
		b.Release()
	}
	fmt.Printf("committed %d rows, checkpoint %q\n", rows, cp)
	// Output:
	// resume after: ""
	// committed 3 rows, checkpoint "after-3"
}
