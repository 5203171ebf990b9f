// Package flighttest serves Flight services on loopback for tests.
package flighttest

import (
	"net"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/flightline/flightline/internal/endpoint"
)

// Serve serves svc on an ephemeral 127.0.0.1 port with cfg and returns its
// grpc:// URL. The server stops, waiting for its handlers, in t.Cleanup:
// register allocator checks before calling Serve so they run after it.
func Serve(t testing.TB, svc flight.FlightServer, cfg endpoint.ServerConfig) string {
	t.Helper()
	gs, _, err := endpoint.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	flight.RegisterFlightServiceServer(gs, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return "grpc://" + lis.Addr().String()
}

// ServeAt serves svc on addr ("127.0.0.1:0" for an ephemeral port) with
// cfg and returns the address it listens on and a function that stops the
// server, waiting for its handlers (also called in t.Cleanup). A test
// restarts an endpoint, with another configuration, at the same address
// by stopping it and serving again at the address returned.
func ServeAt(t testing.TB, addr string, svc flight.FlightServer, cfg endpoint.ServerConfig) (string, func()) {
	t.Helper()
	gs, _, err := endpoint.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	flight.RegisterFlightServiceServer(gs, svc)
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	var once sync.Once
	stop := func() { once.Do(gs.Stop) }
	t.Cleanup(stop)
	return lis.Addr().String(), stop
}
