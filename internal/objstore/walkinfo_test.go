package objstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/s3test"
)

// exerciseWalk checks WalkInfo on st against ListInfo: the same keys,
// sizes and times, under a prefix and for the whole store, across more
// entries than one directory read returns.
func exerciseWalk(t *testing.T, st objstore.Store, files int) {
	ctx := context.Background()
	for i := range files {
		require.NoError(t, st.Put(ctx, fmt.Sprintf("part-%05d.parquet", i), make([]byte, i%7)))
	}
	require.NoError(t, st.Put(ctx, "_delta_log/00000000000000000000.json", []byte("{}")))
	require.NoError(t, st.Put(ctx, "d/e/deep.parquet", []byte("xyz")))
	for _, prefix := range []string{"", "d/", "part-0000"} {
		want, ok, err := objstore.ListInfo(ctx, st, prefix, "")
		require.NoError(t, err)
		require.True(t, ok)
		var got []objstore.ObjectInfo
		ok, err = objstore.WalkInfo(ctx, st, prefix, func(in objstore.ObjectInfo) error {
			got = append(got, in)
			return nil
		})
		require.NoError(t, err)
		require.True(t, ok)
		slices.SortFunc(got, func(a, b objstore.ObjectInfo) int {
			if a.Key < b.Key {
				return -1
			}
			return 1
		})
		require.Equal(t, len(want), len(got), "prefix %q", prefix)
		for i := range want {
			require.Equal(t, want[i].Key, got[i].Key)
			require.Equal(t, want[i].Size, got[i].Size)
			require.True(t, want[i].ModTime.Equal(got[i].ModTime))
		}
	}
	stop := fmt.Errorf("stop")
	n := 0
	_, err := objstore.WalkInfo(ctx, st, "", func(objstore.ObjectInfo) error {
		n++
		return stop
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, n, "an error from fn stops the walk")
}

func TestLocalWalkInfo(t *testing.T) {
	st, err := objstore.NewLocal(t.TempDir())
	require.NoError(t, err)
	exerciseWalk(t, st, 2500)
	exerciseWalk(t, objstore.Sub(st, "sub"), 30)
}

func TestIntegrationS3WalkInfo(t *testing.T) {
	opts := s3test.Options(t)
	st, err := objstore.NewS3(context.Background(), s3test.Bucket, fmt.Sprintf("objstore-walk-%d", time.Now().UnixNano()), opts)
	require.NoError(t, err)
	exerciseWalk(t, st, 1100) // more than a page of 1,000
}
