package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/metrics"
)

// get fetches url and returns its status and body.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, body
}

// startMetrics parses args as a command's common flags and starts its
// metrics server.
func startMetrics(t *testing.T, args ...string) (string, error) {
	t.Helper()
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var c common
	c.register(fs)
	require.NoError(t, fs.Parse(args))
	stop, err := c.serveMetrics(metrics.New(), slog.New(slog.DiscardHandler))
	if err != nil {
		return "", err
	}
	t.Cleanup(stop)
	return "http://" + c.metricsAddr, nil
}

func TestPprofServedOnlyWithTheFlag(t *testing.T) {
	base, err := startMetrics(t, "--metrics-addr", freeAddr(t), "--pprof")
	require.NoError(t, err)
	code, body := get(t, base+"/debug/pprof/heap?gc=1")
	require.Equal(t, http.StatusOK, code, "%s", body)
	// A heap profile is a gzipped profile.proto.
	zr, err := gzip.NewReader(bytes.NewReader(body))
	require.NoError(t, err, "the heap profile is not gzipped")
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.NotEmpty(t, raw)
	code, body = get(t, base+"/debug/pprof/goroutine?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(body), "goroutine profile: total")
	code, body = get(t, base+"/debug/pprof/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(body), "heap")
	code, _ = get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)

	// Off (the default): the same server has no profiles.
	base, err = startMetrics(t, "--metrics-addr", freeAddr(t))
	require.NoError(t, err)
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?gc=1", "/debug/pprof/profile?seconds=1", "/debug/pprof/cmdline"} {
		code, _ = get(t, base+path)
		require.Equal(t, http.StatusNotFound, code, path)
	}
	code, body = get(t, base+"/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(body), "go_gc_heap_live_bytes")
}

func TestPprofNeedsMetricsAddr(t *testing.T) {
	_, err := startMetrics(t, "--pprof")
	require.ErrorContains(t, err, "--pprof serves on the --metrics-addr server")
	_, err = startMetrics(t) // neither: no server, no error
	require.NoError(t, err)
}
