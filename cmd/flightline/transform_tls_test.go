package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
)

// Remote transforms are probed at start like remote sources and sinks: a
// transport mismatch is a configuration error naming the flag or key to
// fix, at once; a service that is down at start is a warning, then
// retried until it answers (run, sync) or a failure (check).
func TestTransformTransportMistakesSayWhatToDo(t *testing.T) {
	logs := captureLogs(t)
	dir := t.TempDir()
	caFile, _, ca, caKey := writeCert(t, dir, "ca", 1, nil, nil)
	srvCert, srvKey, _, _ := writeCert(t, dir, "server", 2, ca, caKey)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var served []chan error
	serve := func(addr string, extra ...string) {
		done := make(chan error, 1)
		served = append(served, done)
		n := strings.Count(logs.String(), "msg=listening")
		go func() {
			done <- serveTransform(ctx, append([]string{"--transform", "builtin:select?columns=id", "--listen", addr}, extra...))
		}()
		require.Eventually(t, func() bool { return strings.Count(logs.String(), "msg=listening") > n }, 20*time.Second, 10*time.Millisecond)
	}
	defer func() {
		stop()
		for _, d := range served {
			require.NoError(t, <-d)
		}
	}()
	tlsAddr, plainAddr := freeAddr(t), freeAddr(t)
	serve(tlsAddr, "--tls-cert", srvCert, "--tls-key", srvKey)
	serve(plainAddr)

	t.Run("run", func(t *testing.T) {
		run := func(args ...string) error {
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			err := runPipeline(rctx, append([]string{"--source", "generator:?rows=100", "--sink", "null:", "--pipeline", "p", "--max-attempts", "2"}, args...))
			require.Less(t, time.Since(start), 15*time.Second, "no retrying")
			return err
		}
		err := run("--transform", "grpc://"+tlsAddr)
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
		require.ErrorContains(t, err, "--transform grpc://"+tlsAddr+": ")
		require.ErrorContains(t, err, "speaks TLS: write grpc+tls://"+tlsAddr+" (with --transform-tls-ca")
		err = run("--transform", "grpc+tls://"+tlsAddr)
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
		require.ErrorContains(t, err, "signed by an unknown authority: give the CA that signed it with --transform-tls-ca")
		err = run("--transform", "grpc+tls://"+plainAddr, "--transform-tls-ca", caFile)
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
		require.ErrorContains(t, err, "does not speak TLS: write grpc://"+plainAddr)
		require.NoError(t, run("--transform", "grpc+tls://"+tlsAddr, "--transform-tls-ca", caFile))
		require.NoError(t, run("--transform", "grpc://"+plainAddr))

		// Down at start: a warning, then retried until the service is up.
		down := freeAddr(t)
		rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			done <- runPipeline(rctx, []string{"--source", "generator:?rows=100", "--sink", "null:", "--pipeline", "late", "--transform", "grpc://" + down})
		}()
		require.Eventually(t, func() bool {
			return strings.Contains(logs.String(), `msg="--transform grpc://`+down+` does not answer at start; retrying until it does"`)
		}, 20*time.Second, 10*time.Millisecond)
		serve(down)
		require.NoError(t, <-done)
		require.Contains(t, logs.String(), `msg="run finished" pipeline=late rows=100`)
	})

	conf := func(transform string) string {
		return writeConfig(t, `
sources:
  gen: 'generator:?rows=100'
sinks:
  out: 'null:'
pipelines:
  p:
    source: gen
    sink: out
    max_attempts: 2
    transforms:
      - `+transform+`
`)
	}
	t.Run("sync", func(t *testing.T) {
		sync := func(transform string) error {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			err := syncCommand(sctx, []string{"--config", conf(transform)})
			require.Less(t, time.Since(start), 15*time.Second, "no retrying")
			return err
		}
		err := sync("'grpc://" + tlsAddr + "'")
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
		require.ErrorContains(t, err, "pipelines.p.transforms[0]: ")
		require.ErrorContains(t, err, "speaks TLS: write grpc+tls://"+tlsAddr+" (with a tls_ca key (write pipelines.p.transforms[0] as {grpc: {url: …, tls_ca: FILE}})")
		err = sync("{grpc: {url: 'grpc+tls://" + tlsAddr + "'}}")
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
		require.ErrorContains(t, err, "signed by an unknown authority: give the CA that signed it with pipelines.p.transforms[0] tls_ca")
		err = sync("{grpc: {url: 'grpc+tls://" + plainAddr + "', tls_ca: '" + caFile + "'}}")
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
		require.ErrorContains(t, err, "does not speak TLS: write grpc://"+plainAddr)
		require.NoError(t, sync("{grpc: {url: 'grpc+tls://"+tlsAddr+"', tls_ca: '"+caFile+"'}}"))

		down := freeAddr(t)
		path := writeConfig(t, `
sources:
  gen: 'generator:?rows=100'
sinks:
  out: 'null:'
pipelines:
  late:
    source: gen
    sink: out
    transforms: ['grpc://`+down+`']
`)
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- syncCommand(sctx, []string{"--config", path}) }()
		require.Eventually(t, func() bool {
			return strings.Contains(logs.String(), `msg="pipelines.late.transforms[0] does not answer at start; retrying until it does"`)
		}, 20*time.Second, 10*time.Millisecond)
		serve(down)
		require.NoError(t, <-done)
		require.Contains(t, logs.String(), `msg="pipeline sync complete" pipeline=late rows=100 `)
	})

	t.Run("check", func(t *testing.T) {
		check := func(transform string) string {
			var out bytes.Buffer
			err := checkCommand(context.Background(), []string{"--config", conf(transform), "--timeout", "5s"}, &out)
			require.ErrorContains(t, err, "1 endpoint(s) failed", out.String())
			return out.String()
		}
		require.Regexp(t, `FAIL  pipelines.p.transforms\[0\] +grpc +endpoint: grpc://`+tlsAddr+` speaks TLS: write grpc\+tls://`,
			check("'grpc://"+tlsAddr+"'"))
		require.Regexp(t, `FAIL  pipelines.p.transforms\[0\] +grpc +.*signed by an unknown authority: give the CA that signed it with pipelines.p.transforms\[0\] tls_ca`,
			check("{grpc: {url: 'grpc+tls://"+tlsAddr+"'}}"))
		require.Regexp(t, `FAIL  pipelines.p.transforms\[0\] +grpc +.*does not speak TLS: write grpc://`+plainAddr,
			check("{grpc: {url: 'grpc+tls://"+plainAddr+"', tls_ca: '"+caFile+"'}}"))
		down := freeAddr(t)
		require.Regexp(t, `FAIL  pipelines.p.transforms\[0\] +grpc +endpoint: grpc://`+down+` does not answer`,
			check("'grpc://"+down+"'"))

		var out bytes.Buffer
		require.NoError(t, checkCommand(context.Background(), []string{"--config", conf("{grpc: {url: 'grpc+tls://" + tlsAddr + "', tls_ca: '" + filepath.Clean(caFile) + "'}}"), "--timeout", "5s"}, &out), out.String())
		require.Regexp(t, `ok    pipelines.p.transforms\[0\] +grpc +the service's gRPC health check answered SERVING`, out.String())
	})
}
