package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of loggers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// captureLogs sends every command's logs to the returned buffer for the
// rest of the test.
func captureLogs(t *testing.T) *syncBuffer {
	var b syncBuffer
	old := logOutput
	logOutput = &b
	t.Cleanup(func() { logOutput = old })
	return &b
}

func sumPositions(t *testing.T, cp []byte) int64 {
	if cp == nil {
		return 0
	}
	p, err := checkpoint.Parse(cp)
	require.NoError(t, err)
	var n int64
	for _, v := range p {
		n += v
	}
	return n
}

// The demo's summary counts exactly the rows its table's checkpoint moved
// by, and a clean finish logs nothing at WARN or above.
func TestDemoSummaryMatchesCommitted(t *testing.T) {
	logs := captureLogs(t)
	dir := filepath.Join(t.TempDir(), "demo")
	wrote := regexp.MustCompile(`wrote (\d+) rows in (\d+) batches`)
	cpLine := regexp.MustCompile(`committed checkpoint: (\{.*\})`)
	var before int64
	for i, rows := range []string{"20000", "32000"} {
		var out bytes.Buffer
		require.NoError(t, demoCommand(context.Background(), []string{"--out", dir, "--rows", rows, "--batch-rows", "1000", "--partitions", "3"}, &out))
		m := wrote.FindStringSubmatch(out.String())
		require.NotNil(t, m, out.String())
		c := cpLine.FindStringSubmatch(out.String())
		require.NotNil(t, c, out.String())
		after := sumPositions(t, []byte(c[1]))
		n, _ := strconv.ParseInt(m[1], 10, 64)
		require.Equalf(t, after-before, n, "run %d: the summary counts what was committed", i)
		want, _ := strconv.ParseInt(rows, 10, 64)
		require.Equal(t, want, after)
		before = after
	}
	require.NotContains(t, logs.String(), "level=WARN")
	require.NotContains(t, logs.String(), "level=ERROR")
}

// serveInBackground runs a serve-* command until the test ends and returns
// its grpc:// URL, read from its "listening" log line.
func serveInBackground(t *testing.T, logs *syncBuffer, serve func(ctx context.Context) error) string {
	addr := regexp.MustCompile(`msg=listening addr=(\S+)`)
	before := len(addr.FindAllStringSubmatch(logs.String(), -1))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx) }()
	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
	})
	var url string
	require.Eventually(t, func() bool {
		m := addr.FindAllStringSubmatch(logs.String(), -1)
		if len(m) > before {
			url = "grpc://" + m[before][1]
		}
		return url != ""
	}, 10*time.Second, 10*time.Millisecond)
	return url
}

// serve-source, serve-sink and run across Flight: a run stopped
// mid-stream and a run to the end of its stream both finish cleanly (no
// WARN in any of the three), and each summary counts the rows the sink
// committed.
func TestRunSummaryOverFlight(t *testing.T) {
	logs := captureLogs(t)
	dir := t.TempDir()
	url := serveInBackground(t, logs, func(ctx context.Context) error {
		return serveSink(ctx, []string{"--sink", "delta:" + dir, "--listen", "127.0.0.1:0", "--log-level", "debug"})
	})
	srcURL := serveInBackground(t, logs, func(ctx context.Context) error {
		return serveSource(ctx, []string{"--source", "generator:?batch_rows=500&interval=20ms", "--listen", "127.0.0.1:0", "--log-level", "debug"})
	})

	finished := regexp.MustCompile(`msg="run finished" pipeline=(\S+) rows=(\d+) batches=(\d+)`)
	committedRows := func(pipeline string) int64 {
		c, err := flightsink.Dial(url, flightsink.ClientConfig{})
		require.NoError(t, err)
		defer c.Close()
		cp, err := c.Checkpoint(context.Background(), flightsink.Pipeline{ID: pipeline})
		require.NoError(t, err)
		return sumPositions(t, cp)
	}
	summary := func(pipeline string) int64 {
		for _, m := range finished.FindAllStringSubmatch(logs.String(), -1) {
			if m[1] == pipeline {
				n, _ := strconv.ParseInt(m[2], 10, 64)
				return n
			}
		}
		t.Fatalf("no summary for %s in\n%s", pipeline, logs.String())
		return 0
	}

	// To the end of a bounded stream.
	require.NoError(t, runPipeline(context.Background(), []string{"--source", "generator:?rows=25000&batch_rows=1000",
		"--sink", url, "--pipeline", "full", "--log-level", "debug"}))
	require.EqualValues(t, 25000, committedRows("full"))
	require.EqualValues(t, 25000, summary("full"))

	// Stopped mid-stream (SIGTERM), with commits under way, reading from
	// serve-source.
	for i := range 2 { // the second run resumes after the first
		ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		require.NoError(t, runPipeline(ctx, []string{"--source", srcURL, "--sink", url, "--pipeline", "stopped", "--log-level", "debug"}))
		cancel()
		n := committedRows("stopped")
		require.Positive(t, n)
		if i == 1 {
			n -= summary("stopped") // the first run's
			logs.mu.Lock()
			first := strings.Index(logs.b.String(), `msg="run finished" pipeline=stopped`)
			rest := logs.b.String()[first+1:]
			logs.mu.Unlock()
			m := finished.FindStringSubmatch(rest)
			require.NotNil(t, m)
			got, _ := strconv.ParseInt(m[2], 10, 64)
			require.Equal(t, n, got, "the second run's summary")
			continue
		}
		require.Equal(t, n, summary("stopped"))
	}
	require.Contains(t, logs.String(), "delta sink: pipeline opened", "serve-sink hands its logger to the sink")
	// Nothing at WARN or above but the endpoints' own note that they
	// serve loopback without authentication.
	var rest []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(l, "serving without authentication on loopback") {
			rest = append(rest, l)
		}
	}
	for _, lvl := range []string{"level=WARN", "level=ERROR"} {
		require.NotContains(t, strings.Join(rest, "\n"), lvl)
	}
}
