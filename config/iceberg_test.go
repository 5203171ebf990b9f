package config

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

func TestIcebergSinkSpec(t *testing.T) {
	require.Equal(t, icebergSinkConfig{Catalog: "sql", URI: "/c.db", CatalogName: "lake", Table: "a.b", SchemaEvolution: true, ExpireOlderThan: 72 * time.Hour, Partition: "day(ts),id",
		IO: map[string]string{"s3.endpoint": "http://127.0.0.1:7070", "s3.region": "eu-west-1"}},
		parseAs(t, icebergSinkSpec, "iceberg:s3://lake/wh?uri=/c.db&catalog_name=lake&table=a.b&schema_evolution=true&expire_snapshots_older_than=72h&partition=day(ts),id&s3.endpoint=http://127.0.0.1:7070&s3.region=eu-west-1"))
	require.Equal(t, icebergSinkConfig{Catalog: "sql", CatalogName: "flightline", Table: "flightline.events", IO: map[string]string{}},
		parseAs(t, icebergSinkSpec, "iceberg:/data/wh"), "defaults")
	require.Equal(t, icebergSinkConfig{Catalog: "rest", URI: "https://cat.example.com/api", CatalogName: "flightline", Table: "a.b",
		IO: map[string]string{"credential": "id:secret", "prefix": "p", "rest.sigv4-enabled": "false"}},
		parseAs(t, icebergSinkSpec, "iceberg:?catalog=rest&uri=https://cat.example.com/api&table=a.b&credential=id:secret&prefix=p&rest.sigv4-enabled=false"))
	for raw, want := range map[string]string{
		"iceberg:":                                     "want iceberg:PATH",
		"iceberg:/x?catalog=nessie":                    "catalog",
		"iceberg:?catalog=rest":                        "catalog=rest needs uri",
		"iceberg:/x?catalog=rest&uri=/c.db":            "want http(s)://HOST",
		"iceberg:/x?token=t&prefix=p":                  "the prefix, token keys are for catalog=rest",
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

// flightline check opens the sink: catalog: rest without uri is refused
// before any request, with a message naming the key; a credential is a
// secret, never echoed.
func TestIcebergRESTCheckRefusesMissingURI(t *testing.T) {
	f, err := Parse("flightline.yaml", []byte(`
sources:
  gen: 'generator:?rows=10'
sinks:
  lake:
    iceberg:
      catalog: rest
      table: analytics.orders
      credential: client:s3cr3t
pipelines:
  p: {source: gen, sink: lake}
`), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	var got []CheckResult
	f.Check(context.Background(), 10*time.Second, false, slog.New(slog.DiscardHandler), func(r CheckResult) { got = append(got, r) })
	var sink *CheckResult
	for i := range got {
		if got[i].Ref == "sinks.lake" {
			sink = &got[i]
		}
	}
	require.NotNil(t, sink, "%+v", got)
	require.ErrorContains(t, sink.Err, "catalog=rest needs uri")
	for _, r := range got {
		if r.Err != nil {
			require.NotContains(t, r.Err.Error(), "s3cr3t")
		}
	}
}

// flightline check on catalog: rest, against the REST catalog the
// services script starts: the sink opens (the server's config fetched,
// the credential exchanged for a token) and reads a checkpoint.
func TestIntegrationRESTCheck(t *testing.T) {
	uri := servicetest.Need(t, "FLIGHTLINE_ICEBERG_REST_URI", "the Iceberg REST catalog (services.sh up icebergrest)")
	f, err := Parse("flightline.yaml", []byte(`
sources:
  gen: 'generator:?rows=10'
sinks:
  lake:
    iceberg:
      catalog: rest
      uri: `+uri+`
      table: restcheck.orders
      credential: "${ICEBERG_CLIENT}"
pipelines:
  p: {source: gen, sink: lake}
`), func(k string) (string, bool) { return "flightline:s3cr3t", k == "ICEBERG_CLIENT" })
	require.NoError(t, err)
	var sink *CheckResult
	f.Check(context.Background(), 30*time.Second, false, slog.New(slog.DiscardHandler), func(r CheckResult) {
		if r.Ref == "sinks.lake" {
			sink = &r
		}
	})
	require.NotNil(t, sink)
	require.NoError(t, sink.Err)
	require.Contains(t, sink.Detail, "checkpoint read")
}
