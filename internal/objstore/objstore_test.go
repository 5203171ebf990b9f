package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/s3test"
)

// race runs 16 concurrent PutIfAbsent of one key: exactly one wins.
func race(t *testing.T, st objstore.Store, key string, size int) {
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, losses := 0, 0
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := st.PutIfAbsent(ctx, key, bytes.Repeat([]byte{byte(i)}, size))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, objstore.ErrExists):
				losses++
			default:
				t.Errorf("writer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 1, wins)
	require.Equal(t, 15, losses)
	b, err := st.Get(ctx, key)
	require.NoError(t, err)
	require.Len(t, b, size)
	require.Equal(t, bytes.Repeat(b[:1], size), b, "the object is one writer's, whole")
}

func exercise(t *testing.T, st objstore.Store) {
	ctx := context.Background()
	_, err := st.Get(ctx, "nope")
	require.ErrorIs(t, err, objstore.ErrNotExist)
	require.ErrorIs(t, err, flightline.ErrNotFound)
	race(t, st, "_delta_log/00000000000000000000.json", 100)
	require.NoError(t, st.Put(ctx, "a/x", []byte("1")))
	require.NoError(t, st.Put(ctx, "a/x", []byte("2")), "Put overwrites")
	b, err := st.Get(ctx, "a/x")
	require.NoError(t, err)
	require.Equal(t, "2", string(b))
	require.NoError(t, st.Put(ctx, "a/y", nil))
	keys, err := st.List(ctx, "a/", "a/x")
	require.NoError(t, err)
	require.Equal(t, []string{"a/y"}, keys)
	require.NoError(t, st.Delete(ctx, "a/y"))
	require.NoError(t, st.Delete(ctx, "a/y"))
}

func TestLocal(t *testing.T) {
	st, err := objstore.Open(context.Background(), t.TempDir(), nil)
	require.NoError(t, err)
	exercise(t, st)
	_, err = objstore.Open(context.Background(), t.TempDir(), objstore.Options{"AWS_REGION": "x"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput, "storage options on a local path")
	_, err = objstore.Open(context.Background(), "s3://b/p", objstore.Options{"AWS_BOGUS": "x"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = objstore.Open(context.Background(), "s3://b/p", objstore.Options{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"})
	require.ErrorContains(t, err, "AWS_ALLOW_HTTP")
}

func TestIntegrationS3(t *testing.T) {
	opts := s3test.Options(t)
	ctx := context.Background()
	prefix := fmt.Sprintf("objstore-%d", time.Now().UnixNano())
	st, err := objstore.Open(ctx, "s3://"+s3test.Bucket+"/"+prefix, opts)
	require.NoError(t, err)
	exercise(t, st)

	// Multipart, conditional: racing large puts, one winner, whole object.
	s3, err := objstore.NewS3(ctx, s3test.Bucket, prefix, opts)
	require.NoError(t, err)
	s3.SetPartSize(5<<20, 6<<20)
	race(t, s3, "big", 11<<20)

	bad := objstore.Options{}
	for k, v := range opts {
		bad[k] = v
	}
	bad[objstore.SecretAccessKey] = "wrong"
	st, err = objstore.Open(ctx, "s3://"+s3test.Bucket+"/x", bad)
	require.NoError(t, err)
	_, err = st.Get(ctx, "k")
	require.ErrorIs(t, err, flightline.ErrUnauthenticated, "%v", err)

	st, err = objstore.Open(ctx, "s3://no-such-bucket-flightline/x", opts)
	require.NoError(t, err)
	err = st.Put(ctx, "k", []byte("v"))
	require.ErrorIs(t, err, flightline.ErrNotFound, "%v", err)
	require.ErrorContains(t, err, "does not exist")
}
