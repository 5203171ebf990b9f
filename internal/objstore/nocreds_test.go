package objstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/objstore"
)

// Without credentials anywhere, an S3 call fails saying so and how to
// give them, as ErrUnauthenticated (not retried), before any request.
func TestS3WithoutCredentialsSaysSo(t *testing.T) {
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	s, err := objstore.NewS3(context.Background(), "bucket", "p", objstore.Options{objstore.EndpointURL: "http://127.0.0.1:1", objstore.AllowHTTP: "true"})
	require.NoError(t, err)
	_, err = s.Get(context.Background(), "k")
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
	require.ErrorContains(t, err, "no AWS credentials found")
	require.ErrorContains(t, err, "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	require.ErrorIs(t, s.HeadBucket(context.Background()), flightline.ErrUnauthenticated)
}
