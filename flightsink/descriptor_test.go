package flightsink_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// A descriptor that does not decode is the caller's mistake:
// INVALID_ARGUMENT, not the INTERNAL gRPC itself answers (which clients
// retry). A well-formed one is UNIMPLEMENTED: a sink offers no flights.
func TestUndecodableDescriptorIsInvalidArgument(t *testing.T) {
	url := flighttest.Serve(t, flightsink.NewServer(flightsink.NewNull()), endpoint.ServerConfig{})
	conn, err := endpoint.Dial(url, endpoint.ClientConfig{})
	require.NoError(t, err)
	defer conn.Close()
	ctx := context.Background()
	good, err := proto.Marshal(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"p"}})
	require.NoError(t, err)
	for _, m := range []string{"GetFlightInfo", "GetSchema"} {
		err := doputtest.RawUnary(ctx, conn, m, doputtest.UndecodableDescriptor)
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", m, err)
		err = doputtest.RawUnary(ctx, conn, m, good)
		require.Equal(t, codes.Unimplemented, status.Code(err), "%s: %v", m, err)
	}
}
