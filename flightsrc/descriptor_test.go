package flightsrc_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// A descriptor that does not decode is the caller's mistake:
// INVALID_ARGUMENT, not the INTERNAL gRPC itself answers (which clients
// retry); a well-formed one naming the stream is answered.
func TestUndecodableDescriptorIsInvalidArgument(t *testing.T) {
	gen, err := flightsrc.NewGenerator(flightsrc.GenRows(10))
	require.NoError(t, err)
	url := flighttest.Serve(t, flightsrc.NewServer(gen), endpoint.ServerConfig{})
	conn, err := endpoint.Dial(url, endpoint.ClientConfig{})
	require.NoError(t, err)
	defer conn.Close()
	ctx := context.Background()
	streams, err := gen.Streams(ctx)
	require.NoError(t, err)
	good, err := proto.Marshal(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{streams[0].Name}})
	require.NoError(t, err)
	for _, m := range []string{"GetFlightInfo", "GetSchema"} {
		err := doputtest.RawUnary(ctx, conn, m, doputtest.UndecodableDescriptor)
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", m, err)
		require.NoError(t, doputtest.RawUnary(ctx, conn, m, good), m)
	}
}
