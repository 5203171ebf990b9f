package delta

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckpointEvery(t *testing.T) {
	for _, tc := range []struct {
		n     int64
		files int
		want  int64
	}{
		{0, 1e6, 0}, {10, 0, 10}, {10, 9_999, 10}, {10, 10_000, 10}, {10, 19_999, 10}, {10, 20_000, 20},
		{10, 50_000, 50}, {10, 1_000_000, 1000}, {1, 5_500, 5}, {100, 50_000, 100}, {100, 250_000, 200},
	} {
		require.Equal(t, tc.want, checkpointEvery(tc.n, int64(tc.files)), "n=%d files=%d", tc.n, tc.files)
	}
}
