package config

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	sinkdbx "github.com/flightline/flightline/flightsink/databricks"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/testkit/uctest"
	"github.com/flightline/flightline/internal/unitycatalog"
)

func TestDatabricksSpecs(t *testing.T) {
	require.Equal(t, databricksSinkConfig{ucConn: ucConn{Host: ptr("https://h"), TokenEnv: ptr("TOK"), VendMargin: ptr(time.Minute)},
		Instance: "a", CheckpointInterval: 3, Storage: map[string]string{"AWS_REGION": "eu-west-1"}},
		parseAs(t, databricksSinkSpec, "databricks:main.s.t?host=https://h&token_env=TOK&vend_margin=1m&instance=a&checkpoint_interval=3&AWS_REGION=eu-west-1"))
	require.Equal(t, databricksSourceConfig{ucConn: ucConn{ClientID: ptr("id"), ClientSecretEnv: ptr("SEC")}, Once: true, Stream: ptr("s"), Storage: map[string]string{}},
		parseAs(t, databricksSourceSpec, "databricks:main.s.t?client_id=id&client_secret_env=SEC&once=true&stream=s"))
	_, err := databricksSinkSpec.Parse(mustQuery(t, "AWS_ACCESS_KEY_ID=k"))
	require.Error(t, err, "keys are vended, not options")
}

func mustQuery(t *testing.T, q string) map[string][]string {
	t.Helper()
	m := map[string][]string{}
	for _, kv := range strings.Split(q, "&") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = append(m[k], v)
	}
	return m
}

// Both kinds and both schemes open against the fake catalog, with a token
// or OAuth M2M from the environment; the refusals name their reason, and
// no secret reaches the log.
func TestDatabricksKinds(t *testing.T) {
	s := uctest.New(t, uctest.Static())
	s.AddExternal("main.sales.orders", "s3://lake/orders")
	s.AddTable(unitycatalog.Table{FullName: "main.sales.managed", TableType: "MANAGED", DataSourceFormat: "DELTA", StorageLocation: "s3://lake/m"})
	var logs bytes.Buffer
	e := testEnv
	e.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Setenv("DATABRICKS_HOST", s.URL)
	t.Setenv("DATABRICKS_TOKEN", s.Token)
	t.Setenv("DATABRICKS_CLIENT_ID", "")
	t.Setenv("DATABRICKS_CLIENT_SECRET", "")
	t.Setenv("MY_SECRET", s.ClientSecret)
	for _, scheme := range []string{"databricks", "unity"} {
		sink, closeSink, err := openSink(e, scheme+":main.sales.orders?AWS_REGION=us-east-1", flightsink.ClientConfig{})
		require.NoError(t, err)
		require.IsType(t, &sinkdbx.Sink{}, sink)
		closeSink()
		src, closeSrc, err := openSource(e, scheme+":main.sales.orders?client_id="+s.ClientID+"&client_secret_env=MY_SECRET&AWS_REGION=us-east-1", flightsrc.ClientConfig{})
		require.NoError(t, err)
		require.NotNil(t, src) // the table is not on a reachable S3: only opening is checked here
		closeSrc()
	}
	require.Equal(t, 2, s.Stats().TokenGrants, "OAuth M2M from client_id and the named variable, once per source")

	_, _, err := openSink(e, "databricks:main.sales.managed?AWS_REGION=us-east-1", flightsink.ClientConfig{})
	require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
	require.ErrorContains(t, err, "only EXTERNAL tables")
	_, _, err = openSink(e, "databricks:orders", flightsink.ClientConfig{})
	require.ErrorContains(t, err, "CATALOG.SCHEMA.TABLE")
	_, _, err = openSink(e, "databricks:main.sales.orders?token_env=NOT_SET_ANYWHERE", flightsink.ClientConfig{})
	require.ErrorContains(t, err, "NOT_SET_ANYWHERE")
	t.Setenv("DATABRICKS_TOKEN", "dapi-wrong")
	_, _, err = openSink(e, "databricks:main.sales.orders?AWS_REGION=us-east-1", flightsink.ClientConfig{})
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)

	require.NotContains(t, logs.String(), s.Token)
	require.NotContains(t, logs.String(), s.ClientSecret)
	require.NotContains(t, err.Error(), "dapi-wrong")
}
