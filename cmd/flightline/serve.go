package main

import (
	"context"
	"os"

	"github.com/flightline/flightline/config"
	"github.com/flightline/flightline/internal/metrics"
)

// serveCommand runs `flightline serve`: every source and sink of the file
// that its listen section gives an address is served as a Flight endpoint,
// as serve-source and serve-sink would serve it, until interrupted. One
// file can so describe a chain across hosts: each host serves the entries
// it listens for (--only) and its pipelines name the others as grpc
// endpoints.
func serveCommand(ctx context.Context, args []string) error {
	fs := newFlagSet("serve", "serve [--config FILE] [--only REF,REF] [flags]")
	path := configFlag(fs)
	only := fs.String("only", "", "serve only these entries (sources.NAME, sinks.NAME, …), comma-separated; empty: every entry with a listen address")
	noAuth := fs.Bool("insecure-no-auth", false, "serve entries without token or tls_client_ca on non-loopback addresses, on purpose (logged as a warning)")
	var c common
	c.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(*path, os.LookupEnv)
	if err != nil {
		return err
	}
	ls, err := cfg.Listeners(*only)
	if err != nil {
		return err
	}
	log, err := c.logger(logOutput)
	if err != nil {
		return err
	}
	m := metrics.New()
	stopMetrics, err := c.serveMetrics(m, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	return ls.Serve(ctx, log, m.Registry(), *noAuth)
}
