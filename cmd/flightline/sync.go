package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/flightline/flightline/config"
	"github.com/flightline/flightline/internal/metrics"
)

// syncCommand runs `flightline sync`: the file's pipelines (or the one
// --pipeline names) in this process. With --once each stops, exit 0, when
// its sink's checkpoint covers the end its source reported at the start;
// without, each runs until interrupted.
func syncCommand(ctx context.Context, args []string) error {
	fs := newFlagSet("sync", "sync [--config FILE] [--pipeline NAME] [--once] [flags]")
	path := configFlag(fs)
	var c common
	c.register(fs)
	name := fs.String("pipeline", "", "the pipeline to run; empty: every pipeline in the file")
	mode := fs.String("progress", string(config.ProgressAuto), "with --once: auto (a bar on a terminal, plain lines otherwise), bar, plain or none")
	every := fs.Duration("progress-every", 5*time.Second, "with --progress plain: how often to log a progress line")
	once := fs.Bool("once", false, "stop when the sink has everything the source held at the start (Kafka end offsets, the Delta table version, the PostgreSQL watermark), then exit 0")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(*path, os.LookupEnv)
	if err != nil {
		return err
	}
	m := metrics.New()
	s, err := cfg.NewSync(*name, m.Registry())
	if err != nil {
		return err
	}
	pm := config.Progress(*mode)
	switch pm {
	case config.ProgressAuto, config.ProgressBar, config.ProgressPlain, config.ProgressNone:
	default:
		return fmt.Errorf("--progress: want auto, bar, plain or none, got %q", *mode)
	}
	if *every <= 0 {
		return fmt.Errorf("--progress-every must be positive")
	}
	log, err := c.logger(logOutput)
	if err != nil {
		return err
	}
	stopMetrics, err := c.serveMetrics(m, log, s.StatusRoutes(log))
	if err != nil {
		return err
	}
	defer stopMetrics()
	if c.metricsAddr != "" {
		log.Info("status page", "url", "/status", "json", "/status.json")
	}
	return s.Run(ctx, config.SyncOptions{Once: *once, Progress: pm, Every: *every, Out: logOutput, Log: log, Reg: m.Registry()})
}
