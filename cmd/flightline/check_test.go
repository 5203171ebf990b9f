package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/testkit/s3test"
)

// check contacts the S3 sink's bucket with the configured credentials
// (HEAD of the bucket; exactly-once: the If-None-Match probe too), says
// which guarantee the sink runs with, and fails, naming the cause, without credentials,
// against a closed port, for a missing bucket and for wrong credentials.
func TestIntegrationCheckS3(t *testing.T) {
	opts := s3test.Options(t)
	// No credentials anywhere but the file's keys.
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("S3_KEY", opts["AWS_ACCESS_KEY_ID"])
	t.Setenv("S3_SECRET", opts["AWS_SECRET_ACCESS_KEY"])
	ep := opts["AWS_ENDPOINT_URL"]
	keys := `, AWS_ACCESS_KEY_ID: "${S3_KEY}", AWS_SECRET_ACCESS_KEY: "${S3_SECRET}"`
	for _, tc := range []struct{ name, sink, want string }{
		{"ok", `s3: {prefix: ` + s3test.Bucket + `/check, AWS_ENDPOINT_URL: '` + ep + `', AWS_ALLOW_HTTP: 'true'` + keys + `}`,
			`ok    sinks.lake +s3 +exactly-once \(parquet part files, If-None-Match: \* commit records, server-side copies\); HEAD of the bucket with the configured credentials; If-None-Match: \* honoured \(a probe object created twice, then removed\)`},
		{"at-least-once", `s3: {prefix: ` + s3test.Bucket + `/check, commit: at-least-once, AWS_ENDPOINT_URL: '` + ep + `', AWS_ALLOW_HTTP: 'true'` + keys + `}`,
			`ok    sinks.lake +s3 +at-least-once \(commit=at-least-once: one Parquet object per batch at a key derived from its checkpoint; exactly once in effect only with deterministic source batches\); HEAD of the bucket with the configured credentials`},
		{"no credentials", `s3: {prefix: ` + s3test.Bucket + `/check, AWS_ENDPOINT_URL: '` + ep + `', AWS_ALLOW_HTTP: 'true'}`,
			`FAIL  sinks.lake +s3 +.*no AWS credentials found .*set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY`},
		{"closed port", `s3: {prefix: ` + s3test.Bucket + `/check, AWS_ENDPOINT_URL: 'http://127.0.0.1:1', AWS_ALLOW_HTTP: 'true'` + keys + `}`,
			`FAIL  sinks.lake +s3 +.*cannot reach the S3 endpoint .*connection refused`},
		{"missing bucket", `s3: {prefix: no-such-bucket-41a/check, AWS_ENDPOINT_URL: '` + ep + `', AWS_ALLOW_HTTP: 'true'` + keys + `}`,
			`FAIL  sinks.lake +s3 +.*bucket "no-such-bucket-41a" does not exist`},
		{"wrong secret", `s3: {prefix: ` + s3test.Bucket + `/check, AWS_ENDPOINT_URL: '` + ep + `', AWS_ALLOW_HTTP: 'true', AWS_ACCESS_KEY_ID: "${S3_KEY}", AWS_SECRET_ACCESS_KEY: wrong}`,
			`FAIL  sinks.lake +s3 +.*(refused|credentials)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, "sinks:\n  lake:\n    "+tc.sink+"\n")
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := checkCommand(ctx, []string{"--config", path, "--timeout", "15s"}, &out)
			if strings.HasPrefix(tc.want, "ok") {
				require.NoError(t, err, out.String())
			} else {
				require.Error(t, err, out.String())
			}
			require.Regexp(t, tc.want, out.String())
		})
	}
}

// check asks each remote transform's health service: a transform that is
// down fails the check, a served one passes.
func TestCheckTransforms(t *testing.T) {
	addr := freeAddr(t)
	logs := captureLogs(t)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serveTransform(ctx, []string{"--transform", "builtin:select?columns=id", "--listen", addr})
	}()
	defer func() { stop(); require.NoError(t, <-done) }()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "msg=listening") }, 20*time.Second, 10*time.Millisecond)
	dead := freeAddr(t)
	path := writeConfig(t, `
sources:
  gen: 'generator:?rows=10'
sinks:
  out: 'memory:'
pipelines:
  p:
    source: gen
    sink: out
    transforms: ['grpc://`+addr+`', 'builtin:select?columns=id', 'grpc://`+dead+`']
`)
	var out bytes.Buffer
	err := checkCommand(context.Background(), []string{"--config", path, "--timeout", "5s"}, &out)
	require.ErrorContains(t, err, "1 endpoint(s) failed")
	require.Regexp(t, `ok    pipelines.p.transforms\[0\] +grpc +the service's gRPC health check answered SERVING`, out.String())
	require.Regexp(t, `FAIL  pipelines.p.transforms\[2\] +grpc +endpoint: grpc://`+dead+` does not answer .*`, out.String())
	require.NotContains(t, out.String(), "transforms[1]")
}

// check of a Delta source whose table does not exist fails saying so,
// and creates nothing.
func TestCheckMissingDeltaTableCreatesNothing(t *testing.T) {
	table := filepath.Join(t.TempDir(), "nope", "orders")
	path := writeConfig(t, "sources:\n  lake:\n    delta: {uri: '"+table+"'}\n")
	var out bytes.Buffer
	require.Error(t, checkCommand(context.Background(), []string{"--config", path}, &out))
	require.Regexp(t, `FAIL  sources.lake +delta +.*no Delta table at`, out.String())
	_, err := os.Stat(filepath.Dir(table))
	require.True(t, os.IsNotExist(err), "check created %s", filepath.Dir(table))
}
