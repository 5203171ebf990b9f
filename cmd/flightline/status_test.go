package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/config"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// startStatusSync runs sync of an unbounded generator with --metrics-addr
// until the test ends and returns the metrics address.
func startStatusSync(t *testing.T) string {
	dir := t.TempDir()
	path := writeConfig(t, `
sources:
  gen: 'generator:?rows=0&batch_rows=50&interval=20ms'
sinks:
  out: 'dir:`+dir+`'
pipelines:
  p:
    source: gen
    sink: out
`)
	logs := captureLogs(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- syncCommand(ctx, []string{"--config", path, "--metrics-addr", "127.0.0.1:0"}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Fatal("sync did not stop")
		}
	})
	addrRe := regexp.MustCompile(`msg="metrics listening" addr=(\S+)`)
	var addr string
	require.Eventually(t, func() bool {
		m := addrRe.FindStringSubmatch(logs.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, time.Minute, 20*time.Millisecond)
	return addr
}

// --metrics-addr serves /status and /status.json; a running pipeline's
// rows increase between two reads.
func TestSyncStatusPage(t *testing.T) {
	addr := startStatusSync(t)
	get := func(p string) (string, string) {
		resp, err := http.Get("http://" + addr + p)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b), resp.Header.Get("Content-Type")
	}
	status := func() config.PipelineStatus {
		body, ct := get("/status.json")
		require.Equal(t, "application/json", ct)
		var doc struct{ Pipelines []config.PipelineStatus }
		require.NoError(t, json.Unmarshal([]byte(body), &doc), body)
		require.Len(t, doc.Pipelines, 1)
		return doc.Pipelines[0]
	}
	var first config.PipelineStatus
	require.Eventually(t, func() bool { first = status(); return first.State == "running" && first.Rows > 0 }, time.Minute, 50*time.Millisecond)
	require.Eventually(t, func() bool {
		s := status()
		return s.Rows > first.Rows && s.Checkpoint != "" && s.CheckpointAgeSecs != nil && s.RowsPerSecond > 0
	}, time.Minute, 100*time.Millisecond, "rows increase; the checkpoint and rate are shown")

	page, ct := get("/status")
	require.True(t, strings.HasPrefix(ct, "text/html"))
	require.Contains(t, page, `<tr data-pipeline="p">`)
	require.Contains(t, page, `<td class="state">running</td>`)
	_, _ = get("/metrics")
}

// The status page renders in a real headless browser (Chromium), and a
// running pipeline's rows increase between two renderings.
func TestSyncStatusPageInBrowser(t *testing.T) {
	chromium := servicetest.Need(t, "FLIGHTLINE_CHROMIUM", "Chromium (headless)")
	addr := startStatusSync(t)
	profile := t.TempDir()
	render := func() (state string, rows int64) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--user-data-dir="+profile, "--dump-dom", "http://"+addr+"/status")
		out, err := cmd.Output()
		require.NoError(t, err)
		dom := string(out)
		require.Contains(t, dom, "<h1>Flightline pipelines</h1>")
		m := regexp.MustCompile(`<tr data-pipeline="p"><td>p</td><td class="state">(\w+)</td><td class="rows">(\d+)</td>`).FindStringSubmatch(dom)
		require.NotNil(t, m, dom)
		n, err := strconv.ParseInt(m[2], 10, 64)
		require.NoError(t, err)
		return m[1], n
	}
	var first int64
	require.Eventually(t, func() bool {
		state, rows := render()
		first = rows
		return state == "running" && rows > 0
	}, 2*time.Minute, 100*time.Millisecond)
	require.Eventually(t, func() bool { _, rows := render(); return rows > first }, 2*time.Minute, 100*time.Millisecond)
}
