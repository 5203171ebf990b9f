package objstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/s3test"
)

// exerciseObject checks OpenObject on st: the size, reads at offsets (a
// whole range, one running past the end with io.EOF, one at the end), and
// ErrNotExist for a missing key.
func exerciseObject(t *testing.T, st objstore.Store) {
	ctx := context.Background()
	want := make([]byte, 100_003)
	for i := range want {
		want[i] = byte(i * 13)
	}
	require.NoError(t, st.Put(ctx, "r/obj", want))
	o, err := objstore.OpenObject(ctx, st, "r/obj")
	require.NoError(t, err)
	defer o.Close()
	require.Equal(t, int64(len(want)), o.Size())
	for _, off := range []int{0, 1, 4095, 77_777} {
		p := make([]byte, 10_000)
		n, err := o.ReadAt(p, int64(off))
		require.NoError(t, err)
		require.Equal(t, len(p), n)
		require.True(t, bytes.Equal(want[off:off+len(p)], p), "bytes at %d", off)
	}
	p := make([]byte, 10)
	n, err := o.ReadAt(p, int64(len(want)-4))
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, 4, n)
	require.Equal(t, want[len(want)-4:], p[:4])
	n, err = o.ReadAt(p, int64(len(want)))
	require.ErrorIs(t, err, io.EOF)
	require.Zero(t, n)
	// A section reader over it reads the whole object (what the Parquet
	// reader does with it).
	all, err := io.ReadAll(io.NewSectionReader(o, 0, o.Size()))
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, all))
	_, err = objstore.OpenObject(ctx, st, "r/missing")
	require.ErrorIs(t, err, objstore.ErrNotExist)
}

func TestLocalObject(t *testing.T) {
	st, err := objstore.NewLocal(t.TempDir())
	require.NoError(t, err)
	exerciseObject(t, st)
	exerciseObject(t, objstore.Sub(st, "sub/dir"))
}

// noOpener hides a store's Opener: OpenObject reads the object with Get.
type noOpener struct{ objstore.Store }

func TestBufferedObject(t *testing.T) {
	st, err := objstore.NewLocal(t.TempDir())
	require.NoError(t, err)
	exerciseObject(t, noOpener{st})
}

func TestIntegrationS3Object(t *testing.T) {
	opts := s3test.Options(t)
	ctx := context.Background()
	st, err := objstore.NewS3(ctx, s3test.Bucket, fmt.Sprintf("objstore-object-%d", time.Now().UnixNano()), opts)
	require.NoError(t, err)
	// An object of one block: read whole at Open, a consistent copy.
	exerciseObject(t, st)
	o, err := objstore.OpenObject(ctx, st, "r/obj")
	require.NoError(t, err)
	require.NoError(t, st.Put(ctx, "r/obj", []byte("another object")))
	b := make([]byte, 4)
	_, err = o.ReadAt(b, 0)
	require.NoError(t, err)
	require.Equal(t, []byte{0, 13, 26, 39}, b, "the object as opened")

	// Objects of many blocks: fetched a block at a time.
	defer objstore.SetS3ReadBlock(4096)()
	exerciseObject(t, st)
	empty := "r/empty"
	require.NoError(t, st.Put(ctx, empty, nil))
	o, err = objstore.OpenObject(ctx, st, empty)
	require.NoError(t, err)
	require.Zero(t, o.Size())
	// Replaced after Open: the next fetch fails rather than mix versions.
	o, err = objstore.OpenObject(ctx, st, "r/obj")
	require.NoError(t, err)
	require.NoError(t, st.Put(ctx, "r/obj", make([]byte, 100_003)))
	_, err = o.ReadAt(make([]byte, 4), 50_000)
	require.Error(t, err)
}
