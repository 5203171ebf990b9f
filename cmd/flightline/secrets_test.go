package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flightline/flightline/config"
	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// An empty token, from a flag's file, the environment or the config file,
// is an error at start naming where it came from; so is an empty TLS file
// or a security flag given an empty value. None of them starts an endpoint
// without authentication.
func TestEmptySecretsFailClosed(t *testing.T) {
	ctx := context.Background()
	blank := writeFile(t, "token", " \n\t\n")
	emptyPEM := writeFile(t, "cert.pem", "")
	good := writeFile(t, "good-token", "s3cr3t\n")

	for _, tc := range []struct {
		name string
		env  map[string]string
		run  func() error
		want []string
	}{
		{"serve-sink --token-file blank", nil,
			func() error {
				return serveSink(ctx, []string{"--sink", "memory:", "--listen", "127.0.0.1:0", "--token-file", blank})
			},
			[]string{"--token-file " + blank + " is empty"}},
		{"serve-source FLIGHTLINE_TOKEN blank", map[string]string{"FLIGHTLINE_TOKEN": "  "},
			func() error {
				return serveSource(ctx, []string{"--source", "generator:?rows=1", "--listen", "127.0.0.1:0"})
			},
			[]string{"FLIGHTLINE_TOKEN is set but empty"}},
		{"serve-transform --token-file ''", nil,
			func() error {
				return serveTransform(ctx, []string{"--transform", "builtin:select?columns=id", "--listen", "127.0.0.1:0", "--token-file", ""})
			},
			[]string{"--token-file was given an empty value"}},
		{"serve-sink --tls-cert empty file", nil,
			func() error {
				return serveSink(ctx, []string{"--sink", "memory:", "--listen", "127.0.0.1:0", "--token-file", good, "--tls-cert", emptyPEM, "--tls-key", emptyPEM})
			},
			[]string{"--tls-cert " + emptyPEM + " is empty"}},
		{"run --sink-token-file blank", nil,
			func() error {
				return runPipeline(ctx, []string{"--source", "generator:?rows=1", "--sink", "grpc://127.0.0.1:1", "--pipeline", "p", "--sink-token-file", blank})
			},
			[]string{"--sink-token-file " + blank + " is empty"}},
		{"run --source-token-file blank", nil,
			func() error {
				return runPipeline(ctx, []string{"--source", "grpc://127.0.0.1:1", "--sink", "null:", "--pipeline", "p", "--source-token-file", blank})
			},
			[]string{"--source-token-file " + blank + " is empty"}},
		{"run FLIGHTLINE_SINK_TOKEN blank", map[string]string{"FLIGHTLINE_SINK_TOKEN": ""},
			func() error {
				return runPipeline(ctx, []string{"--source", "generator:?rows=1", "--sink", "grpc://127.0.0.1:1", "--pipeline", "p"})
			},
			[]string{"FLIGHTLINE_SINK_TOKEN is set but empty"}},
		{"run --transform-token-file blank", nil,
			func() error {
				return runPipeline(ctx, []string{"--source", "generator:?rows=1", "--sink", "null:", "--pipeline", "p",
					"--transform", "grpc://127.0.0.1:1", "--transform-token-file", blank})
			},
			[]string{"--transform-token-file " + blank + " is empty"}},
		{"run --sink-tls-ca empty file", nil,
			func() error {
				return runPipeline(ctx, []string{"--source", "generator:?rows=1", "--sink", "grpc+tls://127.0.0.1:1", "--pipeline", "p", "--sink-tls-ca", emptyPEM})
			},
			[]string{"--sink-tls-ca " + emptyPEM + " is empty"}},
		{"run --sink-tls-ca ''", nil,
			func() error {
				return runPipeline(ctx, []string{"--source", "generator:?rows=1", "--sink", "grpc+tls://127.0.0.1:1", "--pipeline", "p", "--sink-tls-ca", ""})
			},
			[]string{"--sink-tls-ca was given an empty value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			done := make(chan error, 1)
			go func() { done <- tc.run() }()
			select {
			case err := <-done:
				require.ErrorIs(t, err, config.ErrEmptySecret)
				for _, w := range tc.want {
					require.ErrorContains(t, err, w)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("started instead of failing")
			}
		})
	}
}

// In the config file, a token or TLS key that is empty, or a ${VAR} that
// expands to nothing, is an error naming the file, the line, the key and
// the variable; a token_file that is empty fails the command that reads it.
func TestConfigEmptySecretsFailClosed(t *testing.T) {
	env := envOf(map[string]string{"EMPTY": "", "BLANK": "  "})
	for _, tc := range []struct{ yml, want string }{
		{"sinks:\n  out: 'memory:'\nlisten:\n  sinks.out: {addr: '127.0.0.1:7402', token: \"${EMPTY}\"}\n",
			`f.yml:4: listen.sinks.out.token: ${EMPTY} expands to nothing: set EMPTY`},
		{"sinks:\n  remote:\n    grpc: {url: 'grpc://h:1', token: \"${BLANK}\"}\n",
			`f.yml:3: sinks.remote.grpc.token: ${BLANK} expands to nothing`},
		{"sources:\n  remote:\n    grpc: {url: 'grpc+tls://h:1', tls_ca: ''}\n",
			`f.yml:3: sources.remote.grpc.tls_ca is empty`},
		{"sinks:\n  out: 'memory:'\nlisten:\n  sinks.out: {addr: '127.0.0.1:7402', tls_cert: \"${EMPTY}\", tls_key: k.pem}\n",
			`listen.sinks.out.tls_cert: ${EMPTY} expands to nothing`},
	} {
		_, err := config.Parse("f.yml", []byte(tc.yml), env)
		require.ErrorContains(t, err, tc.want, tc.yml)
	}

	blank := writeFile(t, "token", "\n")
	logs := captureLogs(t)
	path := writeConfig(t, "sinks:\n  out: 'memory:'\nlisten:\n  sinks.out: {addr: '127.0.0.1:0', token_file: '"+blank+"'}\n")
	err := serveCommand(context.Background(), []string{"--config", path})
	require.ErrorIs(t, err, config.ErrEmptySecret)
	require.ErrorContains(t, err, "listen.sinks.out.token_file "+blank+" is empty")
	require.NotContains(t, logs.String(), "msg=listening")

	path = writeConfig(t, "sources:\n  gen: 'generator:?rows=10'\nsinks:\n  remote:\n    grpc: {url: 'grpc://127.0.0.1:1', token_file: '"+blank+"'}\npipelines:\n  p: {source: gen, sink: remote}\n")
	err = syncCommand(context.Background(), []string{"--config", path, "--once"})
	require.ErrorIs(t, err, config.ErrEmptySecret)
	require.ErrorContains(t, err, "sinks.remote token_file "+blank+" is empty")
}

// Without a token or mTLS, an endpoint serves only on loopback (with a
// warning) unless --insecure-no-auth says so on purpose; that, too, warns
// on every start.
func TestServingWithoutAuthIsExplicit(t *testing.T) {
	ctx := context.Background()
	err := serveSink(ctx, []string{"--sink", "memory:", "--listen", "0.0.0.0:0"})
	require.ErrorContains(t, err, "refusing to serve 0.0.0.0:0 without authentication")
	require.ErrorContains(t, err, "--insecure-no-auth")
	good := writeFile(t, "token", "s3cr3t")
	require.ErrorContains(t, serveSink(ctx, []string{"--sink", "memory:", "--listen", "0.0.0.0:0", "--token-file", good, "--insecure-no-auth"}),
		"choose one")

	for _, tc := range []struct {
		args []string
		warn string
	}{
		{[]string{"--sink", "memory:", "--listen", "0.0.0.0:0", "--insecure-no-auth"}, "serving WITHOUT authentication (--insecure-no-auth)"},
		{[]string{"--sink", "memory:", "--listen", "127.0.0.1:0"}, "serving without authentication on loopback"},
	} {
		logs := captureLogs(t)
		sctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- serveSink(sctx, tc.args) }()
		require.Eventually(t, func() bool { return strings.Contains(logs.String(), "msg=listening") }, 20*time.Second, 10*time.Millisecond)
		stop()
		require.NoError(t, <-done)
		require.Contains(t, logs.String(), "level=WARN msg=\""+tc.warn)
	}

	// The config file's serve: the same rule and the same flag.
	path := writeConfig(t, "sinks:\n  out: 'memory:'\nlisten:\n  sinks.out: '0.0.0.0:0'\n")
	require.ErrorContains(t, serveCommand(ctx, []string{"--config", path}), "refusing to serve 0.0.0.0:0 without authentication")
	logs := captureLogs(t)
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- serveCommand(sctx, []string{"--config", path, "--insecure-no-auth"}) }()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "msg=listening") }, 20*time.Second, 10*time.Millisecond)
	stop()
	require.NoError(t, <-done)
	require.Contains(t, logs.String(), "serving WITHOUT authentication")
}
