package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/transform"
	"github.com/prometheus/client_golang/prometheus"
)

// syncResult is what one pipeline's sync did.
type syncResult struct {
	stats       coordinator.Stats
	deadLetters int64
	wall        time.Duration
	checkpoint  []byte
}

// syncPipeline runs p until ctx ends or, with once, until the sink's
// checkpoint covers the end the source reported at the start.
func syncPipeline(ctx context.Context, e env, p *pipelineConf, once bool, pr *progress, board *statusBoard) error {
	start := time.Now()
	log := e.log
	if p.deadLetter != nil || p.discard {
		var dlSink flightsink.Sink
		if p.deadLetter != nil {
			s, closeDL, err := openConfSink(e, p.deadLetter)
			if err != nil {
				return err
			}
			defer closeDL()
			dlSink = s
		}
		e.deadLetters = newDeadLetterRouter(p, dlSink, log, e.reg)
		defer e.deadLetters.close(context.WithoutCancel(ctx))
	}
	src, closeSrc, err := openConfSource(e, p.source)
	if err != nil {
		return err
	}
	defer closeSrc()
	if e.deadLetters != nil && !e.deadLetters.used {
		return fmt.Errorf("the %s source %s does not hand over undecodable records: deadletter_sink and deadletter: discard need one that does (kafka)", p.source.kind, p.source.ref())
	}
	sink, closeSink, err := openConfSink(e, p.sink)
	if err != nil {
		return err
	}
	defer closeSink()
	if p.schemaSink != nil {
		reg, err := newRegistrar(ctx, p, log)
		if err != nil {
			return err
		}
		sink = withSchemaSink(sink, reg)
	}
	stream, err := pipelineStream(ctx, src, p)
	if err != nil {
		return err
	}
	pl := flightsink.Pipeline{ID: p.id, Target: p.target}

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var end flightsrc.End
	var w *endWatch
	ender, isEnder := src.(flightsrc.Ender)
	switch {
	case !once:
	case !isEnder && p.source.remote():
		// A Flight source cannot say where its stream ends; a bounded one
		// (a served generator with rows=N) ends it by itself.
		log.Info("sync --once: a remote source cannot tell where its stream ends: reading until it ends the stream (an unbounded one runs until SIGINT)", "pipeline", p.name, "source", p.source.ref())
	case !isEnder:
		return fmt.Errorf("--once: the %s source %s cannot tell where its stream ends: run sync without --once and stop it with SIGINT", p.source.kind, p.source.ref())
	default:
		if end, err = ender.End(ctx, stream); err != nil {
			return fmt.Errorf("--once: the end of %s %s: %w", p.source.ref(), stream, err)
		}
		cp, err := sink.Checkpoint(ctx, pl)
		if err != nil {
			return err
		}
		log.Info("sync --once: reading to the end", "stream", stream, "end", end.Desc, "checkpoint", string(cp))
		w = &endWatch{end: end, merged: cp, stop: stopRun}
		done, err := end.Covered(ctx, cp)
		if err != nil {
			return err
		}
		if done {
			board.setState(p.name, "complete")
			logComplete(log, p, syncResult{wall: time.Since(start), checkpoint: cp})
			return nil
		}
	}
	tap := slog.New(errorTap{Handler: log.Handler(), f: func(msg, err string) {
		board.setError(p.name, fmt.Errorf("%s: %s", msg, err))
		board.set(p.name, func(s *pipelineStatus) {
			if s.state == "running" {
				s.state = "restarting"
			}
		})
	}})
	opts := []coordinator.Option{coordinator.Window(p.window), coordinator.WithLogger(tap),
		coordinator.WithMetrics(e.reg), coordinator.MaxAttempts(p.attempts)}
	if p.plainViews {
		opts = append(opts, coordinator.WithTransform(transform.PlainViews(nil)))
	}
	chain, closeChain, err := openConfTransforms(e, p, stream)
	if err != nil {
		return err
	}
	defer closeChain()
	opts = append(opts, coordinator.WithChain(chain...))
	co, err := coordinator.New(src, sink, stream, pl, opts...)
	if err != nil {
		return err
	}
	var watchDone chan struct{}
	if w != nil {
		watchDone = make(chan struct{})
		go func() { defer close(watchDone); w.run(runCtx, co, log) }()
	}
	progressDone := make(chan struct{})
	if pr != nil {
		pr.total = -1
		if end.Left != nil {
			if n, err := end.Left(ctx, w.merged); err == nil {
				pr.total = n
			} else {
				log.Warn("sync --once: cannot count the rows to go", "err", err)
			}
		}
		go func() { defer close(progressDone); pr.run(runCtx, co) }()
	} else {
		close(progressDone)
	}
	board.set(p.name, func(s *pipelineStatus) {
		s.co, s.stream, s.dl, s.state = co, stream, e.deadLetters, "running"
	})
	runErr := co.Run(runCtx)
	stopRun()
	board.sample(time.Now())
	switch {
	case runErr != nil:
	case ctx.Err() != nil:
		board.setState(p.name, "stopped")
	default:
		board.setState(p.name, "complete")
	}
	if watchDone != nil {
		<-watchDone
	}
	<-progressDone
	res := syncResult{stats: co.Stats(), wall: time.Since(start)}
	if e.deadLetters != nil {
		res.deadLetters = e.deadLetters.total()
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	res.checkpoint, err = sink.Checkpoint(fctx, pl)
	if err != nil {
		res.checkpoint = res.stats.LastCheckpoint
	}
	if runErr != nil {
		return runErr
	}
	if !once && ctx.Err() != nil {
		log.Info("pipeline sync stopped", "pipeline", p.name, "rows", res.stats.Rows, "batches", res.stats.Batches,
			"wall", res.wall.Round(time.Millisecond), "checkpoint", string(res.checkpoint))
		return nil
	}
	if once && w == nil && ctx.Err() != nil {
		return fmt.Errorf("--once: interrupted before the stream ended (checkpoint %s)", res.checkpoint)
	}
	if once && w != nil {
		done := w.reached()
		if !done && err == nil {
			// The stream may have ended (a finite source) at the end.
			done, _ = end.Covered(fctx, res.checkpoint)
		}
		if !done {
			if ctx.Err() != nil {
				return fmt.Errorf("--once: interrupted before the end %s (checkpoint %s)", end.Desc, res.checkpoint)
			}
			return fmt.Errorf("--once: the stream ended before the end %s (checkpoint %s)", end.Desc, res.checkpoint)
		}
	}
	logComplete(log, p, res)
	return nil
}

func logComplete(log *slog.Logger, p *pipelineConf, r syncResult) {
	log.Info("pipeline sync complete", "pipeline", p.name, "rows", r.stats.Rows, "batches", r.stats.Batches,
		"bytes", r.stats.Bytes, "wall", r.wall.Round(time.Millisecond), "restarts", r.stats.Restarts,
		"dead_letters", r.deadLetters, "checkpoint", string(r.checkpoint))
}

// pipelineStream is p's stream: the one it names (which the source must
// have) or the source's only one.
func pipelineStream(ctx context.Context, src flightsrc.Source, p *pipelineConf) (string, error) {
	if p.stream != "" {
		return p.stream, nil
	}
	return OnlyStream(ctx, src, p.source.ref(), "the pipeline's stream: key")
}

// OnlyStream is the name of src's only stream; several (or none) is an
// error listing them. what names the source in errors, how the way to
// choose a stream.
func OnlyStream(ctx context.Context, src flightsrc.Source, what, how string) (string, error) {
	streams, err := src.Streams(ctx)
	if err != nil {
		return "", fmt.Errorf("%s: the source's streams: %w", what, err)
	}
	if len(streams) == 1 {
		return streams[0].Name, nil
	}
	names := make([]string, len(streams))
	for i, s := range streams {
		names[i] = s.Name
	}
	sort.Strings(names)
	return "", fmt.Errorf("the source %s has %d streams (%s), so it has no default: choose one with %s", what, len(streams), strings.Join(names, ", "), how)
}

// endWatch stops a --once run when the checkpoints the sink has
// acknowledged, merged onto the one it held at the start, cover the end.
type endWatch struct {
	end    flightsrc.End
	merged []byte
	stop   context.CancelFunc

	mu   sync.Mutex
	done bool
}

// watchEvery is how often the watch looks at the acknowledged checkpoint.
const watchEvery = 200 * time.Millisecond

func (w *endWatch) run(ctx context.Context, co *coordinator.Coordinator, log *slog.Logger) {
	t := time.NewTicker(watchEvery)
	defer t.Stop()
	var last []byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cp := co.Stats().LastCheckpoint
		if cp == nil || bytes.Equal(cp, last) {
			continue
		}
		last = cp
		w.merged = checkpoint.Next(w.merged, cp)
		done, err := w.end.Covered(ctx, w.merged)
		if err != nil {
			log.Warn("sync --once: cannot compare the checkpoint with the end", "err", err)
			continue
		}
		if done {
			w.mu.Lock()
			w.done = true
			w.mu.Unlock()
			w.stop()
			return
		}
	}
}

func (w *endWatch) reached() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.done
}

// errorTap passes records to its handler and calls f with the message and
// err attribute of those at WARN and above: the status page's last error.
type errorTap struct {
	slog.Handler
	f func(msg, err string)
}

func (t errorTap) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var e string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "err" {
				e = a.Value.String()
			}
			return true
		})
		t.f(r.Message, e)
	}
	return t.Handler.Handle(ctx, r)
}

func (t errorTap) WithAttrs(as []slog.Attr) slog.Handler {
	return errorTap{Handler: t.Handler.WithAttrs(as), f: t.f}
}

func (t errorTap) WithGroup(name string) slog.Handler {
	return errorTap{Handler: t.Handler.WithGroup(name), f: t.f}
}

// A Sync runs pipelines of a file in this process (`flightline sync`),
// with a status page of their state (StatusRoutes).
type Sync struct {
	ps    []*pipelineConf
	board *statusBoard
}

// SyncOptions are how a Sync runs.
type SyncOptions struct {
	// Once stops each pipeline, without error, when its sink's checkpoint
	// covers the end its source reported at the start; otherwise each
	// runs until ctx ends.
	Once bool
	// Progress and Every are how a Once run shows its progress: a bar on
	// Out, or a log line every Every.
	Progress Progress
	Every    time.Duration
	Out      io.Writer
	Log      *slog.Logger
	Reg      prometheus.Registerer // nil: no metrics
}

// NewSync is a Sync of c's pipeline name, or of every pipeline of c for
// "", sorted by name; an unknown name is an error wrapping ErrNoPipeline.
// The status board reads the pipelines' metrics from reg.
func (c *File) NewSync(name string, reg prometheus.Gatherer) (*Sync, error) {
	var ps []*pipelineConf
	if name != "" {
		p, ok := c.pipelines[name]
		if !ok {
			return nil, fmt.Errorf("%w: %q in %s (it has: %s)", ErrNoPipeline, name, c.path, strings.Join(sortedKeys(c.pipelines), ", "))
		}
		ps = append(ps, p)
	} else {
		for _, n := range sortedKeys(c.pipelines) {
			ps = append(ps, c.pipelines[n])
		}
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%s names no pipelines", c.path)
	}
	s := &Sync{ps: ps, board: newStatusBoard(reg)}
	for _, p := range ps {
		s.board.add(p)
	}
	return s, nil
}

// StatusRoutes are the status page's handlers (/status, /status.json),
// for the metrics server; log receives the page's errors.
func (s *Sync) StatusRoutes(log *slog.Logger) map[string]http.Handler { return s.board.routes(log) }

// Run runs the pipelines, each in its own goroutine, until ctx ends or,
// with o.Once, each has reached its end. One pipeline's failure stops the
// others: the error joins every pipeline's, each naming its pipeline.
func (s *Sync) Run(ctx context.Context, o SyncOptions) error {
	pm := o.Progress.resolve(len(s.ps))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sampling, stopSampling := context.WithCancel(context.Background())
	defer stopSampling()
	go s.board.run(sampling)
	var wg sync.WaitGroup
	errs := make([]error, len(s.ps))
	for i, p := range s.ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := env{ctx: ctx, log: o.Log, reg: o.Reg}
			var pr *progress
			if o.Once && pm != ProgressNone {
				pr = &progress{mode: pm, every: o.Every, out: o.Out, log: o.Log, pipeline: p.name}
			}
			if errs[i] = syncPipeline(ctx, e, p, o.Once, pr, s.board); errs[i] != nil {
				s.board.setError(p.name, errs[i])
				s.board.setState(p.name, "failed")
				errs[i] = fmt.Errorf("pipeline %s: %w", p.name, errs[i])
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
