package gcs_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/objsink/gcs"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/testkit/objsinktest"
)

// readIDs lists every object under prefix/target with the JSON API (not
// the Backend), skips names with a component starting with _ or ., and
// reads the id column of each Parquet part file.
func readIDs(t *testing.T, endpoint, bucket, prefix string) []int64 {
	var ids []int64
	token := ""
	for {
		q := url.Values{"prefix": {prefix + "/"}}
		if token != "" {
			q.Set("pageToken", token)
		}
		resp, err := http.Get(endpoint + "/storage/v1/b/" + bucket + "/o?" + q.Encode())
		require.NoError(t, err)
		var page struct {
			Items []struct {
				Name string `json:"name"`
			} `json:"items"`
			NextPageToken string `json:"nextPageToken"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&page))
		resp.Body.Close()
	items:
		for _, it := range page.Items {
			for _, c := range strings.Split(strings.TrimPrefix(it.Name, prefix+"/"), "/") {
				if strings.HasPrefix(c, "_") || strings.HasPrefix(c, ".") {
					continue items
				}
			}
			resp, err := http.Get(endpoint + "/storage/v1/b/" + bucket + "/o/" + url.PathEscape(it.Name) + "?alt=media")
			require.NoError(t, err)
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			ids = append(ids, objsinktest.ParquetIDs(t, data)...)
		}
		if page.NextPageToken == "" {
			return ids
		}
		token = page.NextPageToken
	}
}

func TestIntegrationGCSConformance(t *testing.T) {
	endpoint := objsinktest.GCSEndpoint(t)
	bucket := objsinktest.NewBucket(t, endpoint)
	sinktest.Run(t, sinktest.Harness{
		Guarantee: flightsink.ExactlyOnce,
		Group:     true,
		NewSink: func(t *testing.T) flightsink.Sink {
			b, err := gcs.New(context.Background(), gcs.Config{Bucket: bucket, Prefix: "lake", Endpoint: endpoint})
			require.NoError(t, err)
			s, err := objsink.New(context.Background(), objsink.Config{Backend: b, Name: "gcs sink"})
			require.NoError(t, err)
			return s
		},
		IDs: func(t *testing.T, p flightsink.Pipeline) []int64 {
			target, err := objsink.Target(p)
			require.NoError(t, err)
			return readIDs(t, endpoint, bucket, "lake/"+target)
		},
	})
}

// The create-if-absent primitive as the emulator answers it, and the
// errors a user meets.
func TestIntegrationGCSBackend(t *testing.T) {
	endpoint := objsinktest.GCSEndpoint(t)
	ctx := context.Background()
	b, err := gcs.New(ctx, gcs.Config{Bucket: objsinktest.NewBucket(t, endpoint), Prefix: "x", Endpoint: endpoint})
	require.NoError(t, err)
	require.NoError(t, b.PutIfAbsent(ctx, "d/a", []byte("one")))
	require.ErrorIs(t, b.PutIfAbsent(ctx, "d/a", []byte("two")), objsink.ErrExists)
	got, err := b.Get(ctx, "d/a")
	require.NoError(t, err)
	require.Equal(t, "one", string(got), "the loser wrote nothing")
	require.NoError(t, b.Publish(ctx, "d/a", "d/b"))
	got, err = b.Get(ctx, "d/b")
	require.NoError(t, err)
	require.Equal(t, "one", string(got))
	// A second publication: GCS refuses it (412); fake-gcs-server v1.56.1
	// ignores ifGenerationMatch on copyTo and copies again, which the
	// protocol allows (the same bytes).
	if err := b.Publish(ctx, "d/a", "d/b"); err != nil {
		require.ErrorIs(t, err, objsink.ErrExists)
	}
	objs, err := b.List(ctx, "d")
	require.NoError(t, err)
	require.Len(t, objs, 2)
	require.NoError(t, b.Delete(ctx, "d/a"))
	require.NoError(t, b.Delete(ctx, "d/a"), "deleting a missing object is no error")
	ok, err := b.Exists(ctx, "d/a")
	require.NoError(t, err)
	require.False(t, ok)

	missing, err := gcs.New(ctx, gcs.Config{Bucket: "no-such-bucket-37", Prefix: "x", Endpoint: endpoint})
	require.NoError(t, err)
	require.ErrorIs(t, missing.PutIfAbsent(ctx, "k", []byte("v")), flightline.ErrNotFound)
	down, err := gcs.New(ctx, gcs.Config{Bucket: "b", Prefix: "x", Endpoint: "http://127.0.0.1:1"})
	require.NoError(t, err)
	require.ErrorIs(t, down.Put(ctx, "k", []byte("v")), flightline.ErrUnavailable)
}

// Without an emulator endpoint and without application default
// credentials, New fails with Unauthenticated, saying where credentials
// come from; a missing bucket is NotFound and an unreachable endpoint
// Unavailable at the Flight boundary.
func TestGCSErrorCodes(t *testing.T) {
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", filepath.Join(t.TempDir(), "no-such-credentials.json"))
	t.Setenv("HOME", t.TempDir()) // no gcloud application-default file
	_, err := gcs.New(context.Background(), gcs.Config{Bucket: "b", Prefix: "p"})
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
	require.Equal(t, codes.Unauthenticated, flighterr.Code(err))
	require.ErrorContains(t, err, "application default credentials")
	t.Logf("no credentials: %v", err)

	down, err := gcs.New(context.Background(), gcs.Config{Bucket: "b", Prefix: "x", Endpoint: "http://127.0.0.1:1"})
	require.NoError(t, err)
	err = down.PutIfAbsent(context.Background(), "k", []byte("v"))
	require.Equal(t, codes.Unavailable, flighterr.Code(err), "%v", err)
	_, err = gcs.New(context.Background(), gcs.Config{Bucket: "a/b", Prefix: "x", Endpoint: "http://127.0.0.1:1"})
	require.Equal(t, codes.InvalidArgument, flighterr.Code(err), "%v", err)
}

func TestIntegrationGCSMissingBucketCode(t *testing.T) {
	endpoint := objsinktest.GCSEndpoint(t)
	b, err := gcs.New(context.Background(), gcs.Config{Bucket: "no-such-bucket-37", Prefix: "x", Endpoint: endpoint})
	require.NoError(t, err)
	err = b.PutIfAbsent(context.Background(), "k", []byte("v"))
	require.Equal(t, codes.NotFound, flighterr.Code(err), "%v", err)
	require.ErrorContains(t, err, "no-such-bucket-37")
}
