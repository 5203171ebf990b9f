package uctest

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

// Bucket is the bucket the tests' tables live in on moto.
const Bucket = "flightline-uc"

// Env is a fake catalog vending moto STS credentials, with its S3 proxy in
// front of moto.
type Env struct {
	*Server
	// Moto is moto's endpoint; Proxy the S3 proxy's, which the
	// endpoints under test must use.
	Moto, Proxy string
}

// NewMotoEnv starts a fake catalog on the moto server that
// integration/services/services.sh started (FLIGHTLINE_MOTO_ENDPOINT),
// skipping without it (failing under FLIGHTLINE_REQUIRE_SERVICES=1), and
// makes sure Bucket exists.
func NewMotoEnv(t testing.TB) *Env {
	t.Helper()
	moto := servicetest.Need(t, "FLIGHTLINE_MOTO_ENDPOINT", "moto (fake AWS STS and S3)")
	e := &Env{Moto: moto}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := objstore.NewS3(ctx, Bucket, "", e.DirectOptions())
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(Bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		t.Fatalf("create bucket %s on moto: %v", Bucket, err)
	}
	e.Server = New(t, MotoSTS(moto))
	e.Proxy = e.S3Proxy(t, moto)
	return e
}

// StorageOptions are the storage options of an endpoint under test:
// through the proxy, no keys (the catalog vends them).
func (e *Env) StorageOptions() map[string]string {
	return map[string]string{objstore.EndpointURL: e.Proxy, objstore.AllowHTTP: "true", objstore.Region: "us-east-1"}
}

// DirectOptions reach moto directly with fixed keys, for reading results
// back independently of the catalog.
func (e *Env) DirectOptions() objstore.Options {
	return objstore.Options{objstore.EndpointURL: e.Moto, objstore.AllowHTTP: "true", objstore.Region: "us-east-1",
		objstore.AccessKeyID: "testing", objstore.SecretAccessKey: "testing"}
}
