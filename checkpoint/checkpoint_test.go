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

func TestMoved(t *testing.T) {
	base := Positions{"t/0": 10, "t/1": 5}
	// Nothing moved: others at or behind base, or on keys p does not name.
	for _, others := range []Positions{nil, {"t/0": 10}, {"t/0": 3, "t/2": 9}} {
		_, _, _, ok := Moved(base, others, Positions{"t/0": 25})
		require.False(t, ok, "others %v", others)
	}
	k, at, was, ok := Moved(base, Positions{"t/0": 20, "t/1": 7}, Positions{"t/0": 25, "t/1": 9})
	require.True(t, ok)
	require.Equal(t, "t/0", k, "the first key in byte order")
	require.Equal(t, int64(20), at)
	require.Equal(t, int64(10), was)
	k, at, was, ok = Moved(base, Positions{"t/2": 4}, Positions{"t/2": 9})
	require.True(t, ok, "a key absent from base that another instance has moved")
	require.Equal(t, "t/2", k)
	require.Equal(t, int64(4), at)
	require.Equal(t, int64(0), was)
	_, _, _, ok = Moved(nil, nil, Positions{"t/0": 1})
	require.False(t, ok)
}

func TestMergeAll(t *testing.T) {
	a := Positions{"t/0": 5, "t/1": 9}.Encode()
	b := Positions{"t/0": 7, "t/2": 1}.Encode()
	got, err := MergeAll()
	require.NoError(t, err)
	require.Nil(t, got)
	got, err = MergeAll(nil, []byte("opaque"), nil)
	require.NoError(t, err)
	require.Equal(t, "opaque", string(got), "one checkpoint is kept as it is, opaque or not")
	got, err = MergeAll(a, nil, b)
	require.NoError(t, err)
	require.Equal(t, string(Positions{"t/0": 7, "t/1": 9, "t/2": 1}.Encode()), string(got))
	_, err = MergeAll(a, []byte("opaque"))
	require.Error(t, err, "several checkpoints merge only as Positions")
}
