package objstore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/s3test"
)

// stream writes size bytes to key through w in uneven pieces and returns
// what it wrote.
func stream(t *testing.T, w objstore.Writer, size int) []byte {
	t.Helper()
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i * 7)
	}
	for off, step := 0, 1; off < size; off, step = off+step, step*3+1 {
		end := min(off+step, size)
		n, err := w.Write(want[off:end])
		require.NoError(t, err)
		require.Equal(t, end-off, n)
	}
	return want
}

// exerciseWriter checks a store's streaming writer: nothing is visible
// before Commit, the whole object after it, an aborted object never, and a
// writer is done after either.
func exerciseWriter(t *testing.T, st objstore.Store, size int) {
	ctx := context.Background()
	dir := fmt.Sprintf("d%d/", size)
	w, err := objstore.NewWriter(ctx, st, dir+"obj")
	require.NoError(t, err)
	want := stream(t, w, size)
	_, err = st.Get(ctx, dir+"obj")
	require.ErrorIs(t, err, objstore.ErrNotExist, "visible before Commit")
	require.NoError(t, w.Commit(ctx))
	w.Abort() // after Commit: nothing
	got, err := st.Get(ctx, dir+"obj")
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "the object is what was written (%d bytes, got %d)", len(want), len(got))
	_, err = w.Write([]byte("x"))
	require.Error(t, err, "a committed writer takes no more")
	require.Error(t, w.Commit(ctx), "a second Commit")

	w, err = objstore.NewWriter(ctx, st, dir+"aborted")
	require.NoError(t, err)
	stream(t, w, size)
	w.Abort()
	w.Abort()
	_, err = st.Get(ctx, dir+"aborted")
	require.ErrorIs(t, err, objstore.ErrNotExist)
	keys, err := st.List(ctx, dir, "")
	require.NoError(t, err)
	require.Equal(t, []string{dir + "obj"}, keys, "an aborted writer leaves nothing, no temporary file either")
}

func TestLocalWriter(t *testing.T) {
	root := t.TempDir()
	st, err := objstore.NewLocal(root)
	require.NoError(t, err)
	for _, size := range []int{3<<20 + 17, 0} {
		exerciseWriter(t, st, size)
		// List hides dot files: look for the temporary files directly.
		ents, err := os.ReadDir(filepath.Join(root, fmt.Sprintf("d%d", size)))
		require.NoError(t, err)
		require.Len(t, ents, 1, "only the committed object, no temporary file: %v", ents)
	}
}

// noCreator hides a store's Creator: NewWriter buffers and Puts.
type noCreator struct{ objstore.Store }

func TestBufferedWriter(t *testing.T) {
	st, err := objstore.NewLocal(t.TempDir())
	require.NoError(t, err)
	exerciseWriter(t, noCreator{st}, 100_003)
}

func TestIntegrationS3Writer(t *testing.T) {
	opts := s3test.Options(t)
	ctx := context.Background()
	prefix := fmt.Sprintf("objstore-writer-%d", time.Now().UnixNano())
	st, err := objstore.NewS3(ctx, s3test.Bucket, prefix, opts)
	require.NoError(t, err)
	st.SetPartSize(5<<20, 6<<20)
	exerciseWriter(t, st, 100)        // one PutObject
	exerciseWriter(t, st, 5<<20)      // exactly one part
	exerciseWriter(t, st, 11<<20+333) // three parts, the last short
	// No multipart upload is left open (an aborted one would keep its
	// parts, and bill them, until a lifecycle rule removes them).
	out, err := st.Client().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(s3test.Bucket),
		Prefix: aws.String(prefix + "/")})
	require.NoError(t, err)
	require.Empty(t, out.Uploads)
}
