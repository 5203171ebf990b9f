package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/config"
	"github.com/flightline/flightline/internal/endpoint"
)

func TestEveryCommandHasHelp(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	for name, f := range map[string]func() error{
		"serve-source": func() error { return serveSource(ctx, []string{"--help"}) },
		"serve-sink":   func() error { return serveSink(ctx, []string{"--help"}) },
		"run":          func() error { return runPipeline(ctx, []string{"--help"}) },
		"demo":         func() error { return demoCommand(ctx, []string{"--help"}, &out) },
		"sync":         func() error { return syncCommand(ctx, []string{"--help"}) },
		"serve":        func() error { return serveCommand(ctx, []string{"--help"}) },
		"check":        func() error { return checkCommand(ctx, []string{"--help"}, &out) },
		"config show":  func() error { return configCommand([]string{"show", "--help"}, &out) },
	} {
		require.Truef(t, errors.Is(f(), flag.ErrHelp), "%s --help", name)
	}
}

func TestSpecsRejectUnknownThings(t *testing.T) {
	_, _, err := config.OpenSink(context.Background(), testLog, nil, "dir:"+t.TempDir()+"?bogus=1", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "unknown option(s) bogus")
	_, _, err = config.OpenSink(context.Background(), testLog, nil, "delta-lake:/x", endpoint.ClientConfig{})
	require.ErrorContains(t, err, `unknown sink kind "delta-lake"`)
	_, _, err = config.OpenSource(context.Background(), testLog, nil, "generator:?rows=many", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "rows")
	_, _, err = config.OpenSource(context.Background(), testLog, nil, "generator:?rows=5&colour=blue", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "unknown option(s) colour")
	_, _, err = config.OpenSource(context.Background(), testLog, nil, "no-scheme", endpoint.ClientConfig{})
	require.Error(t, err)
	require.Error(t, runPipeline(context.Background(), []string{"--source", "generator:", "--sink", "null:"}), "--pipeline is required")
	require.ErrorContains(t, runPipeline(context.Background(), []string{"--pipeline", "p", "--source", "generator:", "--sink", "null:", "extra"}), "unexpected arguments")
}

func TestDemoWritesAndResumes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	var out bytes.Buffer
	require.NoError(t, demoCommand(context.Background(), []string{"--out", dir, "--rows", "25000", "--batch-rows", "1000", "--partitions", "2"}, &out))
	require.Contains(t, out.String(), "wrote 25000 rows in ")
	require.Contains(t, out.String(), `{"positions":{"orders/0":12500,"orders/1":12500}}`)
	require.Contains(t, out.String(), "import deltalake")

	// A restart re-seeds the same topic; the table's checkpoint skips what
	// is committed.
	out.Reset()
	require.NoError(t, demoCommand(context.Background(), []string{"--out", dir, "--rows", "30000", "--batch-rows", "1000", "--partitions", "2"}, &out))
	require.Contains(t, out.String(), `resuming pipeline "demo" after checkpoint {"positions":{"orders/0":12500,"orders/1":12500}}`)
	require.Contains(t, out.String(), "wrote 5000 rows in ")
	require.Contains(t, out.String(), `{"positions":{"orders/0":15000,"orders/1":15000}}`)
	logs, _ := filepath.Glob(filepath.Join(dir, "orders", "_delta_log", "*.json"))
	require.NotEmpty(t, logs, "a Delta log")

	// An empty topic ends at once; an interrupted demo says how to resume.
	out.Reset()
	require.NoError(t, demoCommand(context.Background(), []string{"--out", filepath.Join(t.TempDir(), "empty"), "--rows", "0"}, &out))
	require.Contains(t, out.String(), "wrote 0 rows")
	out.Reset()
	// Interrupt a second after the pipeline starts (its first line is
	// printed then), however long seeding took.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := &onFirstWrite{w: &out, f: func() { time.AfterFunc(time.Second, cancel) }}
	require.NoError(t, demoCommand(ctx, []string{"--out", filepath.Join(t.TempDir(), "slow"), "--rows", "20000", "--batch-rows", "500", "--interval", "100ms"}, started))
	require.Contains(t, out.String(), "interrupted before the end of the topic")
}

// onFirstWrite calls f before the first write to w.
type onFirstWrite struct {
	w    io.Writer
	f    func()
	once sync.Once
}

func (o *onFirstWrite) Write(p []byte) (int, error) {
	o.once.Do(o.f)
	return o.w.Write(p)
}

// testLog is the logger of endpoints the tests open directly.
var testLog = slog.New(slog.DiscardHandler)

// envOf is a lookup of the variables in m, for config.Parse.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestMain keeps the commands the tests run in-process from setting this
// test binary's memory limit: --memory-limit auto leaves the runtime alone
// when GOMEMLIMIT is set (config's tests of the limiter use their own).
func TestMain(m *testing.M) {
	os.Setenv("GOMEMLIMIT", "off")
	os.Exit(m.Run())
}
