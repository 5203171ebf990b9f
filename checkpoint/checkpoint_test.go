package checkpoint

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEncodeIsCanonical(t *testing.T) {
	p := Positions{"orders/1": 17, "orders/0": 42, `we"ird`: 0}
	require.Equal(t, `{"positions":{"orders/0":42,"orders/1":17,"we\"ird":0}}`, string(p.Encode()))
	require.Equal(t, `{"positions":{}}`, string(Positions{}.Encode()))
}

func TestParseRoundTrip(t *testing.T) {
	p := Positions{"a/0": 1, "a/1": 1 << 60}
	got, err := Parse(p.Encode())
	require.NoError(t, err)
	require.Equal(t, p, got)
}

func TestParseRejectsOpaque(t *testing.T) {
	for _, in := range []string{"", "opaque", `{"other":1}`, `{"positions":{"a":-1}}`,
		`{"positions":{"a":1.5}}`, `{"positions":{"a":"x"}}`, `{"positions":null}`, `[1]`} {
		_, err := Parse([]byte(in))
		require.Truef(t, errors.Is(err, ErrNotPositions), "input %q: %v", in, err)
	}
}

func TestMergeTakesMaxPerKey(t *testing.T) {
	a := Positions{"t/0": 10, "t/1": 5}
	b := Positions{"t/1": 7, "t/2": 1}
	require.Equal(t, Positions{"t/0": 10, "t/1": 7, "t/2": 1}, Merge(a, b))
	require.Equal(t, Positions{"t/0": 10, "t/1": 5}, a, "Merge must not mutate its inputs")
}

func TestCovers(t *testing.T) {
	c := Positions{"t/0": 10, "t/1": 5}
	require.True(t, Covers(c, Positions{"t/0": 10}))
	require.True(t, Covers(c, Positions{"t/0": 3, "t/1": 5}))
	require.False(t, Covers(c, Positions{"t/0": 11}))
	require.False(t, Covers(c, Positions{"t/2": 0}))
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"positions":{"a/0":1}}`))
	f.Add([]byte(`{"positions":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		again, err := Parse(p.Encode())
		require.NoError(t, err)
		require.Equal(t, p, again)
	})
}
