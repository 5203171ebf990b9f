package main

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsglue "github.com/aws/aws-sdk-go-v2/service/glue"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/servicetest"
	"github.com/flightline/flightline/schemasink/glue"
)

func TestAthenaSinkSpec(t *testing.T) {
	for raw, want := range map[string]string{
		"athena://b/p?database=d":                                    "want athena:BUCKET/PREFIX (no //)",
		"athena:b/p":                                                 `database ""`,
		"athena:b/p?database=d&colour=blue":                          "unknown option(s) colour",
		"athena:b/p?database=d&partitions=sometimes":                 "partitions",
		"athena:b/p?database=d&partition_by=a&partitions=projection": "needs partition_by_day",
		"athena:b/p?database=d&table=Orders":                         `table "Orders"`,
	} {
		_, _, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.ErrorContains(t, err, want, raw)
	}
	s, closeFn, err := openSink(testEnv, "athena:my-bucket/lake?database=analytics&partition_by_day=ts&partitions=projection&AWS_REGION=eu-west-1&glue_endpoint=http://127.0.0.1:1", endpoint.ClientConfig{})
	require.NoError(t, err, "opening contacts nothing")
	defer closeFn()
	require.Equal(t, flightsink.ExactlyOnce, flightsink.GuaranteeOf(s))
	c := s.(athenaSink).GlueConfig("orders")
	require.Equal(t, "s3://my-bucket/lake/orders/data/", c.Location)
	require.Equal(t, "ts", c.DayPartition)
	require.Equal(t, "true", c.Parameters["projection.enabled"])
}

// The YAML form on moto (S3 and Glue): a generator pipeline synced into
// a table partitioned by day lands its part files under the table's
// LOCATION, which Glue has, with a partition per day; check says the
// guarantee and the checkpoint. A glue schema sink beside it that
// disagrees (partition keys) refuses the pipeline, naming the difference.
func TestIntegrationAthenaSinkYAML(t *testing.T) {
	moto := servicetest.Need(t, "FLIGHTLINE_MOTO_ENDPOINT", "moto (fake AWS S3 and Glue)")
	opts := objstore.Options{objstore.EndpointURL: moto, objstore.AccessKeyID: "testing", objstore.SecretAccessKey: "testing",
		objstore.Region: "us-east-1", objstore.AllowHTTP: "true"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := objstore.NewS3(ctx, "flightline-athena", "", opts)
	require.NoError(t, err)
	_, _ = st.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("flightline-athena")})
	id := fmt.Sprintf("yaml%d", time.Now().UnixNano()%1e9)
	yml := func(extra string) string {
		return writeConfig(t, `
sources:
  gen: 'generator:?rows=300&batch_rows=100'
sinks:
  lake:
    athena:
      prefix: flightline-athena/`+id+`
      database: `+id+`
      partition_by_day: ts
      region: us-east-1
      glue_endpoint: '`+moto+`'
      AWS_ENDPOINT_URL: '`+moto+`'
      AWS_ALLOW_HTTP: 'true'
      AWS_ACCESS_KEY_ID: testing
      AWS_SECRET_ACCESS_KEY: testing
pipelines:
  p:
    source: gen
    sink: lake
    target: orders
`+extra)
	}
	path := yml("")
	logs := captureLogs(t)
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--once"}), logs.String())

	cl := awsglue.New(awsglue.Options{Region: "us-east-1", BaseEndpoint: aws.String(moto),
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")})
	got, err := cl.GetTable(ctx, &awsglue.GetTableInput{DatabaseName: aws.String(id), Name: aws.String("orders")})
	require.NoError(t, err)
	require.Equal(t, "s3://flightline-athena/"+id+"/orders/data/", *got.Table.StorageDescriptor.Location)
	require.Len(t, got.Table.PartitionKeys, 1)
	require.Equal(t, "ts_day", *got.Table.PartitionKeys[0].Name)
	parts, err := cl.GetPartitions(ctx, &awsglue.GetPartitionsInput{DatabaseName: aws.String(id), TableName: aws.String("orders")})
	require.NoError(t, err)
	require.NotEmpty(t, parts.Partitions)
	list, err := st.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("flightline-athena"), Prefix: aws.String(id + "/orders/data/")})
	require.NoError(t, err)
	require.NotEmpty(t, list.Contents)
	for _, o := range list.Contents {
		require.Regexp(t, `/data/ts_day=[^/]+/part-[0-9-]+\.parquet$`, *o.Key)
	}

	var out bytes.Buffer
	require.NoError(t, checkCommand(ctx, []string{"--config", path}, &out), out.String())
	require.Regexp(t, `ok    sinks.lake +athena +exactly-once \(Parquet part files under each table's LOCATION.*\); .*the Glue table reachable.*; p: checkpoint \{"positions":\{"orders/0":300\}\}`, out.String())

	paired := yml(`    schema_sink: schema_sinks.catalog
schema_sinks:
  catalog:
    glue: {database: ` + id + `, table: orders, region: us-east-1, endpoint: '` + moto + `', partition_keys: [customer]}
`)
	out.Reset()
	require.Error(t, checkCommand(ctx, []string{"--config", paired}, &out))
	require.Contains(t, out.String(), `schema sink catalog and sink lake (athena) do not describe the same table: partition keys: "[ts_day]", "[customer]"`, out.String())
	err = syncCommand(ctx, []string{"--config", paired, "--once"})
	require.ErrorContains(t, err, "do not describe the same table")
}

// A glue schema sink paired with an s3 sink must name the sink's
// partitions as its partition keys (COLUMN_day for partition_by_day), and
// a location it gives must be where the sink writes.
func TestSchemaSinkPairing(t *testing.T) {
	ctx := context.Background()
	pipe := func(kind string, q url.Values, keys []string, loc string) (*pipelineConf, glue.Config) {
		return &pipelineConf{name: "orders", id: "orders", sink: &endpointConf{name: "lake", kind: kind, loc: "b/lake", q: q},
				schemaSink: &schemaSinkConf{name: "catalog"}},
			glue.Config{Database: "d", Table: "t", PartitionKeys: keys, Location: loc}
	}
	p, c := pipe("s3", url.Values{"partition_by_day": {"ts"}}, nil, "")
	_, err := pairedGlueConfig(ctx, p, c)
	require.ErrorContains(t, err, "schema sink catalog and sink lake (s3) do not describe the same table: the schema sink's partition_keys are [], the sink partitions by [ts_day]")
	p, c = pipe("s3", url.Values{"partition_by_day": {"ts"}}, []string{"ts_day"}, "")
	got, err := pairedGlueConfig(ctx, p, c)
	require.NoError(t, err)
	require.Equal(t, "ts", got.DayPartition)
	require.Empty(t, got.PartitionKeys)
	p, c = pipe("s3", url.Values{"partition_by": {"kind"}}, []string{"kind"}, "s3://b/elsewhere/")
	_, err = pairedGlueConfig(ctx, p, c)
	require.ErrorContains(t, err, `the schema sink's location is "s3://b/elsewhere/", the sink writes to "s3://b/lake/default/"`)
	p, c = pipe("s3", nil, nil, "s3://b/lake/default")
	_, err = pairedGlueConfig(ctx, p, c)
	require.NoError(t, err)

	p, c = pipe("athena", url.Values{"database": {"d"}, "table": {"t"}}, nil, "")
	got, err = pairedGlueConfig(ctx, p, c)
	require.NoError(t, err, "the same table")
	require.Equal(t, "s3://b/lake/t/data/", got.Location)
	p, c = pipe("athena", url.Values{"database": {"d"}, "table": {"t"}}, nil, "s3://b/lake/t/")
	_, err = pairedGlueConfig(ctx, p, c)
	require.ErrorContains(t, err, `location: "s3://b/lake/t/data/", "s3://b/lake/t/"`)
}

// Athena Iceberg, the YAML form on moto: the iceberg kind with catalog:
// glue syncs a generator into a table in Glue (its metadata on moto's
// S3), and check reports its checkpoint.
func TestIntegrationAthenaIcebergYAML(t *testing.T) {
	moto := servicetest.Need(t, "FLIGHTLINE_MOTO_ENDPOINT", "moto (fake AWS S3 and Glue)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := objstore.NewS3(ctx, "flightline-athena", "", objstore.Options{objstore.EndpointURL: moto, objstore.AccessKeyID: "testing",
		objstore.SecretAccessKey: "testing", objstore.Region: "us-east-1", objstore.AllowHTTP: "true"})
	require.NoError(t, err)
	_, _ = st.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("flightline-athena")})
	ns := fmt.Sprintf("ice%d", time.Now().UnixNano()%1e9)
	path := writeConfig(t, `
sources:
  gen: 'generator:?rows=300&batch_rows=100'
sinks:
  lake:
    iceberg:
      warehouse: s3://flightline-athena/`+ns+`
      catalog: glue
      table: `+ns+`.orders
      glue.region: us-east-1
      glue.endpoint: '`+moto+`'
      glue.access-key-id: testing
      glue.secret-access-key: testing
      s3.endpoint: '`+moto+`'
      s3.region: us-east-1
      s3.access-key-id: testing
      s3.secret-access-key: testing
pipelines:
  p:
    source: gen
    sink: lake
`)
	logs := captureLogs(t)
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--once"}), logs.String())
	cl := awsglue.New(awsglue.Options{Region: "us-east-1", BaseEndpoint: aws.String(moto),
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")})
	got, err := cl.GetTable(ctx, &awsglue.GetTableInput{DatabaseName: aws.String(ns), Name: aws.String("orders")})
	require.NoError(t, err)
	require.Equal(t, "ICEBERG", got.Table.Parameters["table_type"], "an Iceberg table in Glue")
	var out bytes.Buffer
	require.NoError(t, checkCommand(ctx, []string{"--config", path}, &out), out.String())
	require.Regexp(t, `ok    sinks.lake +iceberg .*p: checkpoint \{"positions":\{"orders/0":300\}\}`, out.String())
}
