package checkpoint_test

import (
	"testing"

	"github.com/flightline/flightline/checkpoint"
)

func TestReplayed(t *testing.T) {
	p := func(s string) []byte { return []byte(`{"positions":{` + s + `}}`) }
	for _, c := range []struct {
		name     string
		last, cp []byte
		want     bool
	}{
		{"nothing committed", nil, []byte("a"), false},
		{"nothing committed, positions", nil, p(`"t/0":1`), false},
		{"equal opaque", []byte("a"), []byte("a"), true},
		{"other opaque", []byte("a"), []byte("b"), false},
		{"covered", p(`"t/0":5,"t/1":3`), p(`"t/0":4`), true},
		{"equal positions", p(`"t/0":5`), p(`"t/0":5`), true},
		{"ahead", p(`"t/0":5`), p(`"t/0":6`), false},
		{"a key last lacks", p(`"t/0":5`), p(`"t/1":1`), false},
		{"opaque against positions", []byte("a"), p(`"t/0":1`), false},
	} {
		if got := checkpoint.Replayed(c.last, c.cp); got != c.want {
			t.Errorf("%s: Replayed(%s, %s) = %v, want %v", c.name, c.last, c.cp, got, c.want)
		}
	}
}

func TestNext(t *testing.T) {
	p := func(s string) []byte { return []byte(`{"positions":{` + s + `}}`) }
	for _, c := range []struct {
		name           string
		last, cp, want []byte
	}{
		{"first", nil, []byte("a"), []byte("a")},
		{"opaque replaces", []byte("a"), []byte("b"), []byte("b")},
		{"positions merge per key", p(`"t/0":5,"t/1":3`), p(`"t/1":7`), p(`"t/0":5,"t/1":7`)},
		{"never backwards", p(`"t/0":5`), p(`"t/0":2`), p(`"t/0":5`)},
		{"first positions, as sent", nil, []byte(`{"positions":{"t/1":1, "t/0":2}}`), []byte(`{"positions":{"t/1":1, "t/0":2}}`)},
		{"positions onto opaque", []byte("a"), p(`"t/0":1`), p(`"t/0":1`)},
	} {
		got := checkpoint.Next(c.last, c.cp)
		if string(got) != string(c.want) {
			t.Errorf("%s: Next(%s, %s) = %s, want %s", c.name, c.last, c.cp, got, c.want)
		}
		if len(got) > 0 && len(c.cp) > 0 && &got[0] == &c.cp[0] {
			t.Errorf("%s: Next returned cp itself, want a new slice", c.name)
		}
	}
}

func TestSame(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"a", "a", true},
		{"a", "b", false},
		{`{"positions":{"t/0":1,"t/1":2}}`, `{"positions":{"t/1":2,"t/0":1}}`, true},
		{`{"positions":{"t/0":1}}`, `{"positions":{"t/0":1,"t/1":2}}`, false},
		{`{"positions":{"t/0":1}}`, `{"positions":{"t/0":2}}`, false},
	} {
		if got := checkpoint.Same([]byte(c.a), []byte(c.b)); got != c.want {
			t.Errorf("Same(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
