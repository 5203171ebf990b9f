// Package s3test connects tests to the S3-compatible server that
// integration/services/services.sh starts (versitygw), creating buckets on
// demand.
package s3test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// Bucket is the bucket tests use.
const Bucket = "flightline-test"

// Options returns the storage options reaching the test server, skipping
// (failing under FLIGHTLINE_REQUIRE_SERVICES=1) when it is not configured,
// and makes sure Bucket exists.
func Options(t testing.TB) objstore.Options {
	t.Helper()
	endpoint := servicetest.Need(t, "FLIGHTLINE_S3_ENDPOINT", "S3 server (versitygw)")
	opts := objstore.Options{
		objstore.EndpointURL:     endpoint,
		objstore.AccessKeyID:     servicetest.Need(t, "FLIGHTLINE_S3_ACCESS_KEY", "S3 access key"),
		objstore.SecretAccessKey: servicetest.Need(t, "FLIGHTLINE_S3_SECRET_KEY", "S3 secret key"),
		objstore.Region:          "us-east-1",
		objstore.AllowHTTP:       "true",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := objstore.NewS3(ctx, Bucket, "", opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(Bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		t.Fatalf("create bucket %s: %v", Bucket, err)
	}
	return opts
}
