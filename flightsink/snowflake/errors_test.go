package snowflake_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/snowflake"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/snowconn"
)

// A dead endpoint: Open and Checkpoint retry with backoff for RetryFor and
// then fail UNAVAILABLE, within the time the options say (each try bounded
// by the connection's Timeout), not gosnowflake's default minute per
// request. No service needed.
func TestDeadEndpointUnavailable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	const pw = "Dead-Endpoint-Secret"
	cfg := snowconn.Config{Account: "acct", User: "loader", Password: pw, Database: "DB",
		Host: "127.0.0.1", Port: port, Protocol: "http", Timeout: 2 * time.Second, Retries: 1}
	s, err := snowflake.New(context.Background(), snowflake.Config{Config: cfg, Table: "t", RetryFor: 3 * time.Second})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	start := time.Now()
	_, _, err = s.Open(ctx, flightsink.Pipeline{ID: "p"})
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.Equal(t, codes.Unavailable, status.Code(flighterr.ToStatus(err)))
	require.NotContains(t, err.Error(), pw)
	require.Less(t, time.Since(start), 30*time.Second)
	_, err = s.Checkpoint(ctx, flightsink.Pipeline{ID: "p"})
	require.ErrorIs(t, err, flightline.ErrUnavailable)
}

func TestOptionsRefused(t *testing.T) {
	cfg := snowconn.Config{Account: "acct", User: "u", Password: "pw-pw-pw", Database: "DB"}
	for _, c := range []snowflake.Config{
		{Config: cfg, MaxConns: 1}, {Config: cfg, Match: "sometimes"}, {Config: cfg, RetryFor: -time.Second},
		{Config: cfg, Table: `"open`}, {Config: cfg, Stage: "a.b.c.d"}, {Config: cfg, CheckpointTable: `"open`},
	} {
		_, err := snowflake.New(context.Background(), c)
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
	}
	s, err := snowflake.New(context.Background(), snowflake.Config{Config: cfg})
	require.NoError(t, err)
	defer s.Close()
	_, _, err = s.Open(context.Background(), flightsink.Pipeline{ID: "p"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput, "no target and no default table")
}
