package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/endpoint"
)

func TestIcebergSinkSpec(t *testing.T) {
	require.Equal(t, icebergSinkConfig{Catalog: "sql", URI: "/c.db", CatalogName: "lake", Table: "a.b", SchemaEvolution: true, ExpireOlderThan: 72 * time.Hour, Partition: "day(ts),id",
		IO: map[string]string{"s3.endpoint": "http://127.0.0.1:7070", "s3.region": "eu-west-1"}},
		parseAs(t, icebergSinkSpec, "iceberg:s3://lake/wh?uri=/c.db&catalog_name=lake&table=a.b&schema_evolution=true&expire_snapshots_older_than=72h&partition=day(ts),id&s3.endpoint=http://127.0.0.1:7070&s3.region=eu-west-1"))
	require.Equal(t, icebergSinkConfig{Catalog: "sql", CatalogName: "flightline", Table: "flightline.events", IO: map[string]string{}},
		parseAs(t, icebergSinkSpec, "iceberg:/data/wh"), "defaults")
	for raw, want := range map[string]string{
		"iceberg:":                                     "want iceberg:PATH",
		"iceberg:/x?catalog=rest":                      "catalog",
		"iceberg:/x?table=plain":                       "want namespace.table",
		"iceberg:s3://lake/wh":                         "needs the SQLite catalog's path",
		"iceberg:/x?colour=green":                      "unknown option(s) colour",
		"iceberg:ftp://host/x?uri=/tmp/c":              "scheme",
		"iceberg:/x?partition=week(ts)":                "unknown transform week",
		"iceberg:/x?catalog=glue":                      "the Glue catalog needs an s3:// warehouse",
		"iceberg:s3://lake/wh?uri=/c.db&glue.region=x": "the glue.* keys are for catalog=glue",
	} {
		_, _, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.ErrorContains(t, err, want, raw)
	}
}
