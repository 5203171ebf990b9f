package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	awsglue "github.com/aws/aws-sdk-go-v2/service/glue"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/s3test"
	"github.com/flightline/flightline/internal/testkit/servicetest"
	"github.com/stretchr/testify/require"
)

// A pipeline landing Parquet on S3 registers its table in Glue (moto):
// the columns are the generator's, the location where the s3 sink wrote.
func TestSyncRegistersGlueTable(t *testing.T) {
	moto := servicetest.Need(t, "FLIGHTLINE_MOTO_ENDPOINT", "moto (fake AWS Glue)")
	opts := s3test.Options(t)
	id := fmt.Sprintf("glue_%d", time.Now().UnixNano())
	var s3entry strings.Builder
	fmt.Fprintf(&s3entry, "    s3:\n      prefix: %s/lake-%s\n", s3test.Bucket, id)
	for k, v := range opts {
		fmt.Fprintf(&s3entry, "      %s: '%s'\n", k, v)
	}
	path := writeConfig(t, `
sources:
  gen: 'generator:?rows=300&batch_rows=100'
sinks:
  lake:
`+s3entry.String()+`
schema_sinks:
  catalog:
    glue: {database: flightline_sync, table: `+id+`, region: us-east-1, endpoint: '`+moto+`'}
pipelines:
  orders:
    id: `+id+`
    source: gen
    sink: lake
    schema_sink: schema_sinks.catalog
`)
	// moto takes any credentials; the S3 keys are in the sink's options.
	t.Setenv("AWS_ACCESS_KEY_ID", "testing")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "testing")
	logs := captureLogs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, syncCommand(ctx, []string{"--config", path}), logs.String())
	require.Contains(t, logs.String(), `msg="pipeline sync complete" pipeline=orders rows=300 `)

	ac, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion("us-east-1"))
	require.NoError(t, err)
	cl := awsglue.NewFromConfig(ac, func(o *awsglue.Options) { o.BaseEndpoint = aws.String(moto) })
	got, err := cl.GetTable(ctx, &awsglue.GetTableInput{DatabaseName: aws.String("flightline_sync"), Name: aws.String(id)})
	require.NoError(t, err)
	var cols []string
	for _, c := range got.Table.StorageDescriptor.Columns {
		cols = append(cols, *c.Name+" "+*c.Type)
	}
	require.Equal(t, []string{"id bigint", "customer string", "amount double", "quantity int", "ts timestamp"}, cols)
	require.Equal(t, "s3://"+s3test.Bucket+"/lake-"+id+"/default/", *got.Table.StorageDescriptor.Location, "the exactly-once layout: PREFIX/<target>/")
	// The location is where the Parquet objects are.
	st, err := objstore.NewS3(ctx, s3test.Bucket, "", opts)
	require.NoError(t, err)
	list, err := st.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s3test.Bucket), Prefix: aws.String("lake-" + id + "/default/")})
	require.NoError(t, err)
	parquet := 0
	for _, o := range list.Contents {
		if strings.HasSuffix(*o.Key, ".parquet") {
			parquet++
		}
	}
	require.Positive(t, parquet, "Parquet objects under the table's location")

	var out bytes.Buffer
	require.NoError(t, checkCommand(ctx, []string{"--config", path}, &out), out.String())
	require.Regexp(t, `ok    schema_sinks.catalog \(orders\) +glue +reachable; table flightline_sync.`+id+` has 5 columns`, out.String())
}
