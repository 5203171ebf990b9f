package config

import (
	"context"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/endpoint"
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
