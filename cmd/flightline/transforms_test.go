package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
)

// serve-transform serves built-ins behind a bearer token; run chains a
// built-in in-process and the remote service between a generator and a
// sink.
func TestRunThroughTransforms(t *testing.T) {
	logs := captureLogs(t)
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tok, []byte("s3cret\n"), 0o600))
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveTransform(sctx, []string{"--transform", "builtin:filter?column=id&op=lt&value=500",
			"--transform", "builtin:rename?amount=total", "--listen", "127.0.0.1:0", "--token-file", tok})
	}()
	defer func() {
		stop()
		require.NoError(t, <-done)
	}()
	addr := regexp.MustCompile(`msg=listening addr=(\S+)`)
	var url string
	require.Eventually(t, func() bool {
		if m := addr.FindStringSubmatch(logs.String()); m != nil {
			url = "grpc://" + m[1]
		}
		return url != ""
	}, 10*time.Second, 10*time.Millisecond)

	run := func(extra ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return runPipeline(ctx, append([]string{"--source", "generator:?rows=2000&batch_rows=300", "--sink", "dir:" + filepath.Join(dir, "out"),
			"--pipeline", "tp", "--transform", "builtin:select?columns=id,amount", "--transform", url}, extra...))
	}
	require.ErrorIs(t, run(), flightline.ErrUnauthenticated, "no token")
	require.NoError(t, run("--transform-token-file", tok))
	require.Contains(t, logs.String(), `msg="run finished" pipeline=tp rows=500 batches=7`)
	require.Contains(t, logs.String(), `checkpoint="{\"positions\":{\"orders/0\":2000}}"`)
}

// A pipeline of the config file runs its transforms list: a built-in in
// process, then a service with a token; config show lists them, the token
// masked.
func TestSyncThroughConfigTransforms(t *testing.T) {
	logs := captureLogs(t)
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(tok, []byte("s3cret\n"), 0o600))
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveTransform(sctx, []string{"--transform", "builtin:filter?column=id&op=lt&value=500",
			"--listen", "127.0.0.1:0", "--token-file", tok})
	}()
	defer func() {
		stop()
		require.NoError(t, <-done)
	}()
	addr := regexp.MustCompile(`msg=listening addr=(\S+)`)
	var url string
	require.Eventually(t, func() bool {
		if m := addr.FindStringSubmatch(logs.String()); m != nil {
			url = "grpc://" + m[1]
		}
		return url != ""
	}, 10*time.Second, 10*time.Millisecond)

	cfg := func(token string) string {
		return writeConfig(t, `
sources:
  gen: 'generator:?rows=2000&batch_rows=300'
sinks:
  out:
    dir: {path: '`+filepath.Join(dir, "out")+`'}
pipelines:
  tp:
    source: gen
    sink: out
    transforms:
      - builtin:select?columns=id,amount
      - grpc: {url: '`+url+`'`+token+`}
`)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.ErrorIs(t, syncCommand(ctx, []string{"--config", cfg("")}), flightline.ErrUnauthenticated, "no token")
	path := cfg(", token: s3cret")
	require.NoError(t, syncCommand(ctx, []string{"--config", path}), logs.String())
	require.Contains(t, logs.String(), `msg="pipeline sync complete" pipeline=tp rows=500 `)

	var out strings.Builder
	require.NoError(t, configCommand([]string{"show", "--config", path}, &out))
	require.Contains(t, out.String(), "- builtin:select?columns=id,amount")
	require.Contains(t, out.String(), url)
	require.NotContains(t, out.String(), "s3cret")
}

func TestTransformSpecs(t *testing.T) {
	for _, bad := range []string{
		"builtin:nope", "builtin:select", "builtin:select?cols=a", "builtin:filter?op=gt&value=1",
		"builtin:filter?column=a&op=like&value=1", "builtin:rename", "builtin:flatten", "builtin:flatten?col=v", "grpc://127.0.0.1:1?x=1", "select?columns=a",
	} {
		tf := transformFlags{specs: transformList{bad}}
		_, _, err := tf.open(context.Background(), nil, "p", "s")
		require.Error(t, err, bad)
	}
	tf := transformFlags{specs: transformList{"builtin:select?columns=a,b", "builtin:rename?a=x", "builtin:filter?column=a&op=is_null", "builtin:flatten?column=value", "grpc://127.0.0.1:1"}}
	chain, closeChain, err := tf.open(context.Background(), nil, "p", "s")
	require.NoError(t, err)
	require.Len(t, chain, 5)
	closeChain()
	require.True(t, errors.Is(serveTransform(context.Background(), []string{"--help"}), flag.ErrHelp))
	require.ErrorContains(t, serveTransform(context.Background(), []string{"--transform", "grpc://127.0.0.1:1"}), "serves built-ins")
	require.ErrorContains(t, serveTransform(context.Background(), nil), "--transform is required")
}
