package main

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsglue "github.com/aws/aws-sdk-go-v2/service/glue"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

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
