package postgrescdc

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
)

func TestSnapshotVisibility(t *testing.T) {
	f, err := parseSnapshot("100:110:103,107")
	require.NoError(t, err)
	for xid, seen := range map[uint32]bool{5: true, 99: true, 100: true, 103: false, 105: true, 107: false, 109: true, 110: false, 200: false} {
		require.Equalf(t, seen, f.sees(xid), "xid %d", xid)
	}
	// Across the 2^32 wrap of the 32-bit ids pgoutput sends.
	f, err = parseSnapshot("4294967290:4294967306:")
	require.NoError(t, err)
	require.True(t, f.sees(4294967289))
	require.True(t, f.sees(4294967295))
	require.True(t, f.sees(5)) // 2^32 + 5
	require.False(t, f.sees(10))
	_, err = parseSnapshot("1:2")
	require.Error(t, err)
}

func TestCheckpointRoundTrip(t *testing.T) {
	for _, cp := range []string{
		`{"lsn":"0/1A2B3C8"}`,
		`{"lsn":"0/1A2B3C8","tx":"0/1A2C000","skip":5000}`,
		`{"lsn":"0/1A2B3C7","snapshot":{"after":["42"]}}`,
		`{"lsn":"0/10","snapshot":{"after":["7"]},"filters":[{"from":["3"],"xmin":5,"xmax":9,"xip":[6],"until":"0/20"}]}`,
	} {
		st, err := parseState([]byte(cp))
		require.NoError(t, err, cp)
		require.JSONEq(t, cp, string(st.encode()))
	}
	for _, bad := range []string{``, `{}`, `{"lsn":"x"}`, `{"lsn":"0/1","tx":"0/2","skip":-1}`, `{"lsn":"0/1","extra":1}`} {
		_, err := parseState([]byte(bad))
		require.ErrorIs(t, err, flightline.ErrInvalidInput, bad)
	}
	// Filters the stream has passed are dropped.
	st, err := parseState([]byte(`{"lsn":"0/30","filters":[{"from":null,"xmin":5,"xmax":9,"until":"0/20"},{"from":["3"],"xmin":5,"xmax":9,"until":"0/40"}]}`))
	require.NoError(t, err)
	st.prune()
	require.Len(t, st.filters, 1)
	require.Equal(t, []string{"3"}, st.filters[0].From)
}
