package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/s3test"
)

func TestS3SinkSpec(t *testing.T) {
	_, _, err := openSink(testEnv, "s3://my-bucket/events", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "want s3:BUCKET/PREFIX (no //), e.g. s3:my-bucket/events")
	_, _, err = openSink(testEnv, "s3:", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "want s3:BUCKET/PREFIX")
	_, _, err = openSink(testEnv, "s3:my-bucket/events?colour=blue", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "unknown option(s) colour")
	_, _, err = openSink(testEnv, "s3:my-bucket/events?part_size=big", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "part_size")
	_, _, err = openSink(testEnv, "s3:my-bucket/events?commit=sometimes", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "commit")
	_, _, err = openSink(testEnv, "s3:my-bucket/events?commit=at-least-once&format=csv", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "commit=at-least-once writes Parquet objects without partitions")
	_, _, err = openSink(testEnv, "s3:my-bucket/events?commit=at-least-once&partition_by=region", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "commit=at-least-once writes Parquet objects without partitions")
	_, _, err = openSink(testEnv, "s3:my-bucket/events?partition_by=a&partition_by_day=b", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "partition_by and partition_by_day: give one")
	_, _, err = openSink(testEnv, "s3:x/events", endpoint.ClientConfig{})
	require.ErrorIs(t, err, flightline.ErrInvalidInput, "a bucket name too short")

	for raw, want := range map[string]flightsink.Guarantee{
		"s3:my-bucket/events?AWS_REGION=eu-west-1&AWS_ENDPOINT_URL=http://127.0.0.1:1&AWS_ALLOW_HTTP=true&part_size=5242880":                      flightsink.ExactlyOnce,
		"s3:my-bucket/events?format=jsonl&partition_by_day=ts&AWS_REGION=eu-west-1":                                                               flightsink.ExactlyOnce,
		"s3:my-bucket/events?commit=at-least-once&AWS_REGION=eu-west-1&AWS_ENDPOINT_URL=http://127.0.0.1:1&AWS_ALLOW_HTTP=true&part_size=5242880": flightsink.AtLeastOnce,
	} {
		s, closeFn, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.NoError(t, err, "opening contacts nothing: %s", raw)
		require.Equal(t, want, flightsink.GuaranteeOf(s), raw)
		if o, ok := s.(s3ObjSink); ok && strings.Contains(raw, "format=jsonl") {
			require.Equal(t, objsink.JSONL, o.Format())
		}
		closeFn()
	}
}

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
