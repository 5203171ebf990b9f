package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// --metrics-addr serves /status and /status.json; a running pipeline's
// rows increase between two reads. (Read over HTTP here; no browser.)
func TestSyncStatusPage(t *testing.T) {
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
	defer func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Fatal("sync did not stop")
		}
	}()
	addrRe := regexp.MustCompile(`msg="metrics listening" addr=(\S+)`)
	var addr string
	require.Eventually(t, func() bool {
		m := addrRe.FindStringSubmatch(logs.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, time.Minute, 20*time.Millisecond)

	get := func(p string) (string, string) {
		resp, err := http.Get("http://" + addr + p)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b), resp.Header.Get("Content-Type")
	}
	status := func() PipelineStatus {
		body, ct := get("/status.json")
		require.Equal(t, "application/json", ct)
		var doc struct{ Pipelines []PipelineStatus }
		require.NoError(t, json.Unmarshal([]byte(body), &doc), body)
		require.Len(t, doc.Pipelines, 1)
		return doc.Pipelines[0]
	}
	var first PipelineStatus
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
