package config

import (
	"fmt"
	"net/url"
	"os"

	"golang.org/x/term"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/stdout"
	"github.com/flightline/flightline/internal/spec"
)

// stdoutConfig is the stdout: sink kind.
type stdoutConfig struct {
	Format   string `spec:"format" enum:"auto,table,jsonl,csv" default:"auto" doc:"auto: table on a terminal, jsonl otherwise"`
	MaxWidth int    `spec:"max_width" default:"40" doc:"table: the widest a cell gets, in characters; longer values end in …"`
}

var stdoutSpec = spec.New[stdoutConfig]("stdout", "stdout:?format=table|jsonl|csv",
	"no guarantee: prints rows for a person to read (logs stay on stderr); keeps checkpoints in memory only", nil)

func init() {
	sinkKinds["stdout"] = sinkOf(stdoutSpec, openStdout)
}

// stdoutIsTerminal says whether the process's stdout is a terminal; tests
// replace it.
var stdoutIsTerminal = func() bool { return term.IsTerminal(int(os.Stdout.Fd())) }

func openStdout(e env, u *url.URL, c stdoutConfig) (flightsink.Sink, func(), error) {
	if loc := location(u); loc != "" {
		return nil, nil, fmt.Errorf("stdout: %q: want stdout: with options only, e.g. stdout:?format=table", loc)
	}
	f := stdout.Format(c.Format)
	if c.Format == "auto" {
		f = stdout.JSONL
		if stdoutIsTerminal() {
			f = stdout.Table
		}
	}
	if c.MaxWidth < 4 { // the sink reads 0 as its default
		return nil, nil, fmt.Errorf("%w: stdout: max_width %d: want at least 4", flightline.ErrInvalidInput, c.MaxWidth)
	}
	s, err := stdout.New(e.ctx, stdout.Config{Format: f, MaxWidth: c.MaxWidth})
	if err != nil {
		return nil, nil, err
	}
	return stdoutSink{s}, func() { _ = s.Close() }, nil
}

// stdoutSink is the stdout sink as `flightline check` describes it.
type stdoutSink struct{ *stdout.Sink }

func (s stdoutSink) checkDetail(string) string {
	return fmt.Sprintf("no guarantee: prints %s to stdout, keeps no checkpoint across runs (a restart prints again from the source's own position)", s.Format())
}

// checkDetailer is a sink whose `flightline check` line is its own: it
// says which guarantee the sink runs with, around what check found of the
// pipelines' checkpoints (which a sink that keeps none leaves out).
type checkDetailer interface {
	checkDetail(checkpoints string) string
}
