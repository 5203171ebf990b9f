package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/s3test"
	"github.com/stretchr/testify/require"
)

// The YAML form on versitygw: a generator pipeline synced into the
// exactly-once mode (JSON lines, partitioned by day, a target) lands its
// part files under PREFIX/<target>/ts_day=…/, and check says the guarantee
// and the checkpoint; the same file with commit: at-least-once says so.
func TestIntegrationS3SinkYAML(t *testing.T) {
	opts := s3test.Options(t)
	t.Setenv("S3_SECRET", opts[objstore.SecretAccessKey])
	prefix := fmt.Sprintf("yaml-%d", time.Now().UnixNano())
	yml := func(extra string) string {
		return writeConfig(t, `
sources:
  gen: 'generator:?rows=300&batch_rows=100'
sinks:
  lake:
    s3: {prefix: `+s3test.Bucket+`/`+prefix+`, format: jsonl, partition_by_day: ts`+extra+`, AWS_ENDPOINT_URL: '`+opts[objstore.EndpointURL]+`', AWS_ALLOW_HTTP: 'true', AWS_REGION: us-east-1, AWS_ACCESS_KEY_ID: '`+opts[objstore.AccessKeyID]+`', AWS_SECRET_ACCESS_KEY: '${S3_SECRET}'}
pipelines:
  p:
    source: gen
    sink: lake
    target: orders
`)
	}
	path := yml("")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logs := captureLogs(t)
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--once"}), logs.String())

	st, err := objstore.NewS3(ctx, s3test.Bucket, "", opts)
	require.NoError(t, err)
	keys, err := st.List(ctx, prefix+"/orders/", "")
	require.NoError(t, err)
	parts := 0
	for _, k := range keys {
		if strings.Contains(k, "/ts_day=") && strings.HasSuffix(k, ".jsonl") && !strings.Contains(k, "/_") {
			parts++
		}
	}
	require.Positive(t, parts, "part files under PREFIX/<target>/ts_day=…/: %v", keys)

	var out bytes.Buffer
	require.NoError(t, checkCommand(ctx, []string{"--config", path}, &out), out.String())
	require.Regexp(t, `ok    sinks.lake +s3 +exactly-once \(jsonl part files, If-None-Match: \* commit records, server-side copies\); .*HEAD of the bucket .*If-None-Match: \* honoured .*; p: checkpoint \{"positions":\{"orders/0":300\}\}`, out.String())
	require.NotContains(t, out.String(), opts[objstore.SecretAccessKey])

	out.Reset()
	err = checkCommand(ctx, []string{"--config", yml(", commit: at-least-once")}, &out)
	require.Error(t, err, "at-least-once writes Parquet without partitions")
	require.Contains(t, out.String(), "commit=at-least-once writes Parquet objects without partitions", out.String())
}
