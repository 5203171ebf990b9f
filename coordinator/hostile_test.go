package coordinator_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/doputtest"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// rawSource is a Flight source that answers every DoGet with fixed
// messages, however malformed.
type rawSource struct {
	flight.BaseFlightServer
	msgs []doputtest.Message
}

func (s *rawSource) DoGet(_ *flight.Ticket, st flight.FlightService_DoGetServer) error {
	for _, fd := range doputtest.FlightData(nil, s.msgs) {
		if err := st.Send(fd); err != nil {
			return err
		}
	}
	return nil
}

// TestMalformedRemoteSourceIntoLocalSink: batches decoded from a remote
// source are validated before an in-process sink writes them, so a
// malformed one stops the pipeline with a non-retryable ErrInvalidInput,
// and nothing is committed; a decompression bomb is refused before it is
// allocated.
func TestMalformedRemoteSourceIntoLocalSink(t *testing.T) {
	for _, c := range doputtest.Cases() {
		t.Run(c.Name, func(t *testing.T) {
			url := flighttest.Serve(t, &rawSource{msgs: c.Messages}, endpoint.ServerConfig{})
			src, err := flightsrc.Dial(url, flightsrc.ClientConfig{})
			require.NoError(t, err)
			defer src.Close()
			sink, err := flightsink.NewDir(t.TempDir(), nil)
			require.NoError(t, err)
			p := flightsink.Pipeline{ID: "p"}
			co, err := coordinator.New(src, sink, "s", p, coordinator.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = co.Run(ctx)
			require.ErrorIs(t, err, flightline.ErrInvalidInput)
			cp, err := sink.Checkpoint(context.Background(), p)
			require.NoError(t, err)
			require.Nil(t, cp)
		})
	}
}
