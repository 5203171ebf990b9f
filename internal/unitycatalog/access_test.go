package unitycatalog_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/unitycatalog"
)

func TestCheckTable(t *testing.T) {
	ext := unitycatalog.Table{FullName: "c.s.t", TableType: "EXTERNAL", DataSourceFormat: "DELTA", StorageLocation: "s3://b/p"}
	require.NoError(t, unitycatalog.CheckTable(&ext, unitycatalog.ReadWrite))
	managed := ext
	managed.TableType = "MANAGED"
	require.ErrorIs(t, unitycatalog.CheckTable(&managed, unitycatalog.ReadWrite), flightline.ErrFailedPrecondition)
	require.NoError(t, unitycatalog.CheckTable(&managed, unitycatalog.Read), "managed tables can be read")
	for _, bad := range []unitycatalog.Table{
		{FullName: "c.s.v", TableType: "VIEW"},
		{FullName: "c.s.t", TableType: "EXTERNAL", DataSourceFormat: "ICEBERG", StorageLocation: "s3://b/p"},
		{FullName: "c.s.t", TableType: "EXTERNAL", DataSourceFormat: "DELTA", StorageLocation: "abfss://c@a.dfs.core.windows.net/p"},
	} {
		require.ErrorIs(t, unitycatalog.CheckTable(&bad, unitycatalog.Read), flightline.ErrFailedPrecondition, bad)
	}
}

func TestBucketRegion(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, http.MethodHead, r.Method)
		if r.URL.Path == "/lake" {
			w.Header().Set("X-Amz-Bucket-Region", "eu-central-1")
		}
		w.WriteHeader(http.StatusForbidden) // S3 refuses the anonymous caller and still says where
	}))
	defer srv.Close()
	ctx := context.Background()
	r, err := unitycatalog.BucketRegion(ctx, nil, srv.URL, "lake")
	require.NoError(t, err)
	require.Equal(t, "eu-central-1", r)
	_, err = unitycatalog.BucketRegion(ctx, nil, srv.URL, "other")
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.ErrorContains(t, err, "AWS_REGION")
}

func TestS3Options(t *testing.T) {
	ctx := context.Background()
	got, err := unitycatalog.S3Options(ctx, "s3://b/p", objstore.Options{objstore.Region: "eu-west-1"})
	require.NoError(t, err)
	require.Equal(t, objstore.Options{objstore.Region: "eu-west-1"}, got)
	_, err = unitycatalog.S3Options(ctx, "s3://b/p", objstore.Options{objstore.SecretAccessKey: "x"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = unitycatalog.S3Options(ctx, "s3://b/p", objstore.Options{"AWS_NOPE": "x"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}
