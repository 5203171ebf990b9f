package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/metrics"
)

// demo runs generator -> Flight -> coordinator -> Flight -> Dir sink in one
// process, with both endpoints on loopback, and prints what it wrote. Run
// it again after a kill and it resumes where the sink's checkpoint says.
func demo(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("demo", "demo [--out DIR] [--rows N] [flags]")
	var c common
	c.register(fs)
	dir := fs.String("out", "flightline-demo", "directory the Dir sink writes to")
	rows := fs.Int64("rows", 1_000_000, "rows the generator produces")
	batchRows := fs.Int("batch-rows", 10_000, "rows per batch")
	interval := fs.Duration("interval", 0, "pause between batches (slows the demo down, e.g. for crash tests)")
	pipeline := fs.String("pipeline", "demo", "pipeline id")
	if err := parse(fs, args); err != nil {
		return err
	}
	c.logLevel = map[bool]string{true: c.logLevel, false: "warn"}[isFlagSet(fs, "log-level")]
	log, err := c.logger(os.Stderr)
	if err != nil {
		return err
	}
	gen, err := flightsrc.NewGenerator(flightsrc.GenRows(*rows), flightsrc.GenBatchRows(*batchRows), flightsrc.GenInterval(*interval))
	if err != nil {
		return err
	}
	sink, err := flightsink.NewDir(*dir, nil)
	if err != nil {
		return err
	}
	m := metrics.New()
	stopMetrics, err := c.serveMetrics(m, log)
	if err != nil {
		return err
	}
	defer stopMetrics()

	srcURL, stopSrc, err := serveLoopback(flightsrc.NewServer(gen, flightsrc.WithLogger(log), flightsrc.WithMetrics(m)))
	if err != nil {
		return err
	}
	defer stopSrc()
	sinkURL, stopSink, err := serveLoopback(flightsink.NewServer(sink, flightsink.WithLogger(log), flightsink.WithMetrics(m)))
	if err != nil {
		return err
	}
	defer stopSink()
	src, err := flightsrc.Dial(srcURL, flightsrc.ClientConfig{})
	if err != nil {
		return err
	}
	defer src.Close()
	rs, err := flightsink.Dial(sinkURL, flightsink.ClientConfig{})
	if err != nil {
		return err
	}
	defer rs.Close()

	p := flightsink.Pipeline{ID: *pipeline, Target: "orders"}
	before, err := rs.Checkpoint(ctx, p)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "flightline demo: generator (%d rows) -> Flight %s -> coordinator -> Flight %s -> Arrow files in %s\n", *rows, srcURL, sinkURL, filepath.Join(*dir, "orders"))
	if before != nil {
		fmt.Fprintf(out, "resuming pipeline %q after checkpoint %s\n", *pipeline, before)
	}
	co, err := coordinator.New(src, rs, "orders", p, coordinator.WithLogger(log), coordinator.WithMetrics(m))
	if err != nil {
		return err
	}
	start := time.Now()
	if err := co.Run(ctx); err != nil {
		return err
	}
	took := time.Since(start)
	st := co.Stats()
	after, err := rs.Checkpoint(context.WithoutCancel(ctx), p)
	if err != nil {
		return err
	}
	files, _ := filepath.Glob(filepath.Join(*dir, "orders", "*.arrow"))
	fmt.Fprintf(out, "wrote %d rows in %d batches this run (%.1f MB, %s, %.0f rows/s)\n",
		st.Rows, st.Batches, float64(st.Bytes)/1e6, took.Round(time.Millisecond), float64(st.Rows)/took.Seconds())
	fmt.Fprintf(out, "committed checkpoint: %s\n", after)
	fmt.Fprintf(out, "table: %s (%d commit files)\n", filepath.Join(*dir, "orders"), len(files))
	fmt.Fprintf(out, "read it with: python3 -c \"import pyarrow.dataset as ds; t = ds.dataset('%s', format='arrow').to_table(); print(t.num_rows, t.schema)\"\n", filepath.Join(*dir, "orders"))
	return nil
}

func isFlagSet(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// serveLoopback serves svc on an ephemeral loopback port.
func serveLoopback(svc flight.FlightServer) (string, func(), error) {
	gs, _, err := endpoint.NewServer(endpoint.ServerConfig{})
	if err != nil {
		return "", nil, err
	}
	flight.RegisterFlightServiceServer(gs, svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go gs.Serve(lis)
	return "grpc://" + lis.Addr().String(), gs.Stop, nil
}
