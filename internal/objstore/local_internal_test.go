package objstore

import (
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
)

// A full file system or quota is ErrUnavailable (retried from the
// checkpoint once space returns); other write errors stay unclassified.
// TestIntegrationDiskFull exercises it on a real full tmpfs.
func TestPutErrDiskFull(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT} {
		err := putErr("/x/y", &fs.PathError{Op: "write", Path: "/x/.y.tmp", Err: errno})
		require.ErrorIs(t, err, flightline.ErrUnavailable)
		require.ErrorIs(t, err, errno)
		require.Contains(t, err.Error(), "/x/y")
	}
	err := putErr("/x/y", fmt.Errorf("wrapped: %w", syscall.EACCES))
	require.NotErrorIs(t, err, flightline.ErrUnavailable)
	require.ErrorIs(t, err, syscall.EACCES)
}
