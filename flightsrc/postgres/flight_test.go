package postgres_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/postgres"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

// The source served through Flight DoGet: rows, then heartbeats carrying
// the unchanged checkpoint, then rows inserted later.
func TestIntegrationSourceOverFlight(t *testing.T) {
	c := pgtest.Conn(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	table := pgtest.Name("flight")
	pgtest.Exec(t, c, `CREATE TABLE `+table+` (id bigint PRIMARY KEY, v text)`)
	pgtest.Exec(t, c, `INSERT INTO `+table+` SELECT i, 'v' || i FROM generate_series(0, 49) i`)
	src := newSource(t, mem, postgres.Config{Tables: []postgres.Table{{Name: table, Watermark: "id", Key: "id"}}, PollInterval: 20 * time.Millisecond})

	gs, _, err := endpoint.NewServer(endpoint.ServerConfig{})
	require.NoError(t, err)
	flight.RegisterFlightServiceServer(gs, flightsrc.NewServer(src, flightsrc.WithAllocator(mem),
		flightsrc.WithLogger(slog.New(slog.DiscardHandler))))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go gs.Serve(lis)
	defer gs.Stop()
	cl, err := flightsrc.DialWithAllocator("grpc://"+lis.Addr().String(), flightsrc.ClientConfig{}, mem)
	require.NoError(t, err)
	defer cl.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	streams, err := cl.Streams(ctx)
	require.NoError(t, err)
	require.Equal(t, table, streams[0].Name)
	r, err := cl.Read(ctx, flightsrc.ReadRequest{Stream: table})
	require.NoError(t, err)
	defer r.Close()

	var ids []int64
	var cp []byte
	heartbeats := 0
	inserted := false
	for len(ids) < 60 {
		rec, c2, err := r.Next(ctx)
		require.NoError(t, err)
		col := rec.Column(0).(*array.Int64)
		ids = append(ids, col.Int64Values()...)
		if rec.NumRows() == 0 {
			require.Equal(t, string(cp), string(c2), "a heartbeat carries the unchanged checkpoint")
			heartbeats++
			if !inserted && heartbeats >= 2 {
				pgtest.Exec(t, c, `INSERT INTO `+table+` SELECT i, 'v' || i FROM generate_series(50, 59) i`)
				inserted = true
			}
		}
		cp = c2
		rec.Release()
	}
	require.Equal(t, seq(0, 60), ids)
	require.GreaterOrEqual(t, heartbeats, 2)
}
