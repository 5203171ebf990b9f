package objstore_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/objstore"
)

// countingProvider hands out a new access key on every Retrieve.
type countingProvider struct{ n atomic.Int64 }

func (p *countingProvider) Retrieve(context.Context) (aws.Credentials, error) {
	n := p.n.Add(1)
	return aws.Credentials{AccessKeyID: "AK" + string(rune('A'+n-1)), SecretAccessKey: "s", SessionToken: "t", Source: "test"}, nil
}

// The provider is asked for every request, not cached by the SDK: a
// provider that renewed its credentials is obeyed at once.
func TestCredentialsProviderUsedPerRequest(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	re := regexp.MustCompile(`Credential=([^/]+)/`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if m := re.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
			keys = append(keys, m[1]+"/"+r.Header.Get("X-Amz-Security-Token"))
		}
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	ctx := context.Background()
	p := &countingProvider{}
	st, err := objstore.OpenWithCredentials(ctx, "s3://b/p", objstore.Options{objstore.EndpointURL: srv.URL, objstore.AllowHTTP: "true"}, p)
	require.NoError(t, err)
	require.NoError(t, st.Put(ctx, "a", []byte("x")))
	require.NoError(t, st.Put(ctx, "b", []byte("y")))
	require.Equal(t, []string{"AKA/t", "AKB/t"}, keys)
}

func TestCredentialsProviderRefusals(t *testing.T) {
	ctx := context.Background()
	p := &countingProvider{}
	_, err := objstore.OpenWithCredentials(ctx, "s3://b/p", objstore.Options{objstore.AccessKeyID: "k", objstore.SecretAccessKey: "s"}, p)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = objstore.OpenWithCredentials(ctx, t.TempDir(), nil, p)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = objstore.OpenWithCredentials(ctx, "file://"+t.TempDir(), nil, p)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}

// A request cut short by the caller's context reports the context's error
// (the Delta source's readers test for it), not an outage.
func TestContextEndIsNotUnavailable(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	st, err := objstore.Open(context.Background(), "s3://b/p", objstore.Options{objstore.EndpointURL: srv.URL, objstore.AllowHTTP: "true",
		objstore.AccessKeyID: "k", objstore.SecretAccessKey: "s"})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = st.Get(ctx, "k")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotErrorIs(t, err, flightline.ErrUnavailable)
}

// S3's ExpiredToken is an outage when a provider renews the credentials
// (retrying uses renewed ones), and a refusal with fixed keys.
func TestExpiredTokenWithRenewingProvider(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>`))
	}))
	defer srv.Close()
	ctx := context.Background()
	opts := objstore.Options{objstore.EndpointURL: srv.URL, objstore.AllowHTTP: "true"}
	st, err := objstore.OpenWithCredentials(ctx, "s3://b/p", opts, &countingProvider{})
	require.NoError(t, err)
	err = st.Put(ctx, "k", []byte("x"))
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	opts[objstore.AccessKeyID], opts[objstore.SecretAccessKey], opts[objstore.SessionToken] = "k", "s", "t"
	st, err = objstore.Open(ctx, "s3://b/p", opts)
	require.NoError(t, err)
	err = st.Put(ctx, "k", []byte("x"))
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
}
