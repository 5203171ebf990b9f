package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close())
	return addr
}

// One file describes a chain: serve serves its source and sink as Flight
// endpoints (the sink behind a token), and a pipeline of the same file
// reaches them as grpc endpoints.
func TestServeFromConfig(t *testing.T) {
	t.Setenv("SINK_TOKEN", "tok-123")
	srcAddr, sinkAddr := freeAddr(t), freeAddr(t)
	dir := t.TempDir()
	path := writeConfig(t, `
sources:
  gen: 'generator:?rows=1500&batch_rows=100'
  remote_gen: grpc://`+srcAddr+`
sinks:
  out:
    dir: {path: `+dir+`}
  remote_out:
    grpc: {url: 'grpc://`+sinkAddr+`', token: '${SINK_TOKEN}'}
listen:
  sources.gen: `+srcAddr+`
  sinks.out: {addr: '`+sinkAddr+`', token: '${SINK_TOKEN}'}
pipelines:
  chain:
    source: remote_gen
    sink: remote_out
    stream: orders
`)
	logs := captureLogs(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveCommand(ctx, []string{"--config", path}) }()
	require.Eventually(t, func() bool { return strings.Count(logs.String(), `msg=listening`) == 2 }, time.Minute, 20*time.Millisecond, logs.String())

	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer scancel()
	// --once with a remote source: it reads until the served generator
	// (rows=1500) ends its stream.
	require.NoError(t, syncCommand(sctx, []string{"--config", path, "--pipeline", "chain", "--once"}), logs.String())
	require.Contains(t, logs.String(), "a remote source cannot tell where its stream ends")
	require.Contains(t, logs.String(), `msg="pipeline sync complete" pipeline=chain rows=1500 `)
	require.True(t, dirHasFiles(dir))

	// Without the token the served sink refuses the pipeline.
	noToken := writeConfig(t, `
sources:
  remote_gen: grpc://`+srcAddr+`
sinks:
  remote_out: grpc://`+sinkAddr+`
pipelines:
  chain:
    source: remote_gen
    sink: remote_out
    stream: orders
    max_attempts: 1
`)
	err := syncCommand(sctx, []string{"--config", noToken})
	require.Error(t, err)
	require.ErrorContains(t, err, "missing bearer token: this endpoint requires one: give the client the endpoint's token (flightline run: --sink-token-file")

	cancel()
	select {
	case err := <-served:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}

	path2 := writeConfig(t, `
sinks:
  out:
    dir: {path: `+dir+`}
  listen_only: 'memory:'
listen:
  sinks.out: {addr: '`+sinkAddr+`', token: x}
  sinks.nope: 127.0.0.1:1
`)
	require.ErrorContains(t, serveCommand(context.Background(), []string{"--config", path2}), `listen.sinks.nope: sinks has no "nope"`)
	require.ErrorContains(t, serveCommand(context.Background(), []string{"--config", writeConfig(t, "sinks:\n  a: 'memory:'\n")}), "nothing to serve")
}
