package config

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/flightline/flightline/coordinator"
)

// Progress is how a --once sync shows its progress (SyncOptions).
type Progress string

const (
	ProgressAuto  Progress = "auto"  // a bar on a terminal, plain lines otherwise
	ProgressBar   Progress = "bar"   // a bar (progressbar) on standard error
	ProgressPlain Progress = "plain" // a "sync progress" log line every --progress-every
	ProgressNone  Progress = "none"
)

// resolve picks bar or plain for auto: a bar when standard error (where
// the bar and the logs go) is a terminal and one pipeline runs.
func (m Progress) resolve(pipelines int) Progress {
	if m != ProgressAuto {
		return m
	}
	if pipelines == 1 && term.IsTerminal(int(os.Stderr.Fd())) {
		return ProgressBar
	}
	return ProgressPlain
}

// progress reports a --once run's rows against the rows it has to go.
type progress struct {
	mode     Progress
	every    time.Duration
	out      io.Writer // the bar's
	log      *slog.Logger
	pipeline string
	total    int64 // -1: unknown (the source cannot estimate)
}

// run reports co's progress until ctx ends, then a last time.
func (p *progress) run(ctx context.Context, co *coordinator.Coordinator) {
	start := time.Now()
	switch p.mode {
	case ProgressBar:
		bar := progressbar.NewOptions64(p.total, progressbar.OptionSetWriter(p.out),
			progressbar.OptionSetDescription("sync "+p.pipeline), progressbar.OptionShowCount(),
			progressbar.OptionShowIts(), progressbar.OptionSetItsString("rows"), progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetRenderBlankState(true))
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			_ = bar.Set64(co.Stats().Rows)
			select {
			case <-ctx.Done():
				_ = bar.Set64(co.Stats().Rows)
				_ = bar.Exit()
				fmt.Fprintln(p.out)
				return
			case <-t.C:
			}
		}
	case ProgressPlain:
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.line(co.Stats().Rows, time.Since(start))
			}
		}
	}
}

// line logs one plain progress line: rows done of rows to go, the rate
// and the time left at that rate.
func (p *progress) line(rows int64, took time.Duration) {
	rate := float64(rows) / took.Seconds()
	attrs := []any{"pipeline", p.pipeline, "rows", rows, "rows_per_s", int64(rate)}
	if p.total >= 0 {
		attrs = append(attrs, "total", p.total)
		if p.total > 0 {
			attrs = append(attrs, "percent", min(100, 100*rows/p.total))
		}
		if rate > 0 {
			attrs = append(attrs, "eta", (time.Duration(float64(max(0, p.total-rows)) / rate * float64(time.Second))).Round(time.Second))
		}
	}
	p.log.Info("sync progress", attrs...)
}
