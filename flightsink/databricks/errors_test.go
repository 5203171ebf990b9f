package databricks_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/databricks"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/testkit/flighttest"
	"github.com/flightline/flightline/internal/testkit/uctest"
	"github.com/flightline/flightline/internal/unitycatalog"
)

// Every refusal of the catalog step, in process and as a gRPC code: none
// of them needs S3.
func TestCatalogErrors(t *testing.T) {
	ctx := context.Background()
	s := uctest.New(t, uctest.Static())
	s.AddExternal("main.sales.orders", "s3://lake/orders")
	s.AddTable(unitycatalog.Table{FullName: "main.sales.managed", TableType: "MANAGED", DataSourceFormat: "DELTA", StorageLocation: "s3://lake/__unitystorage/m"})
	s.AddTable(unitycatalog.Table{FullName: "main.sales.view", TableType: "VIEW"})
	s.AddTable(unitycatalog.Table{FullName: "main.sales.pq", TableType: "EXTERNAL", DataSourceFormat: "PARQUET", StorageLocation: "s3://lake/pq"})
	s.AddTable(unitycatalog.Table{FullName: "main.sales.gcs", TableType: "EXTERNAL", DataSourceFormat: "DELTA", StorageLocation: "gs://lake/gcs"})
	s.AddExternal("main.sales.secret", "s3://lake/secret")
	s.DenyVend("main.sales.secret", true)
	good := unitycatalog.Config{Host: s.URL, Token: s.Token}
	region := map[string]string{"AWS_REGION": "us-east-1"}

	for _, tc := range []struct {
		name, table string
		cfg         unitycatalog.Config
		want        error
		code        codes.Code
		msg         string
	}{
		{"missing", "main.sales.nope", good, flightline.ErrNotFound, codes.NotFound, "main.sales.nope"},
		{"managed", "main.sales.managed", good, flightline.ErrFailedPrecondition, codes.FailedPrecondition, "only EXTERNAL tables can be written"},
		{"view", "main.sales.view", good, flightline.ErrFailedPrecondition, codes.FailedPrecondition, "VIEW, not a table"},
		{"parquet", "main.sales.pq", good, flightline.ErrFailedPrecondition, codes.FailedPrecondition, "PARQUET, not DELTA"},
		{"gcs", "main.sales.gcs", good, flightline.ErrFailedPrecondition, codes.FailedPrecondition, "not on S3"},
		{"vend refused", "main.sales.secret", good, flightline.ErrPermissionDenied, codes.PermissionDenied, "EXTERNAL USE SCHEMA"},
		{"wrong token", "main.sales.orders", unitycatalog.Config{Host: s.URL, Token: "dapi-nope"}, flightline.ErrUnauthenticated, codes.Unauthenticated, "Invalid access token"},
		{"wrong client secret", "main.sales.orders", unitycatalog.Config{Host: s.URL, ClientID: s.ClientID, ClientSecret: "nope"}, flightline.ErrUnauthenticated, codes.Unauthenticated, "invalid_client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := databricks.New(ctx, databricks.Config{Table: tc.table, Workspace: tc.cfg, Storage: region})
			require.ErrorIs(t, err, tc.want)
			require.ErrorContains(t, err, tc.msg)
			require.Equal(t, tc.code, flighterr.Code(err))
		})
	}

	// The same refusals for a target, through Flight.
	sink, err := databricks.New(ctx, databricks.Config{Table: "main.sales.orders", Workspace: good, Storage: region})
	require.NoError(t, err)
	defer sink.Close()
	url := flighttest.Serve(t, flightsink.NewServer(sink), endpoint.ServerConfig{})
	c, err := flightsink.Dial(url, flightsink.ClientConfig{})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Checkpoint(ctx, flightsink.Pipeline{ID: "p", Target: "managed"})
	require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
	require.Equal(t, codes.FailedPrecondition, status.Code(err))
	require.ErrorContains(t, err, "only EXTERNAL tables")
	_, err = c.Checkpoint(ctx, flightsink.Pipeline{ID: "p", Target: "nope"})
	require.ErrorIs(t, err, flightline.ErrNotFound)
	_, err = c.Checkpoint(ctx, flightsink.Pipeline{ID: "p", Target: "secret"})
	require.ErrorIs(t, err, flightline.ErrPermissionDenied)
}

func TestTargets(t *testing.T) {
	s := uctest.New(t, uctest.Static())
	s.AddExternal("main.sales.orders", "s3://lake/orders")
	sink, err := databricks.New(context.Background(), databricks.Config{Table: "main.sales.orders", Workspace: unitycatalog.Config{Host: s.URL, Token: s.Token},
		Storage: map[string]string{"AWS_REGION": "us-east-1"}})
	require.NoError(t, err)
	defer sink.Close()
	for target, want := range map[string]string{"": "main.sales.orders", "eu": "main.sales.eu", "other.x.y": "other.x.y"} {
		got, err := sink.TableName(target)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	for _, bad := range []string{"a.b", "../x", "a/b", "a.b.c.d"} {
		_, err := sink.TableName(bad)
		require.ErrorIs(t, err, flightline.ErrInvalidInput, bad)
	}
	_, err = databricks.New(context.Background(), databricks.Config{Table: "main.sales.orders", Workspace: unitycatalog.Config{Host: s.URL, Token: s.Token},
		Storage: map[string]string{"AWS_ACCESS_KEY_ID": "k"}})
	require.ErrorIs(t, err, flightline.ErrInvalidInput, "keys are vended, not given")
}
