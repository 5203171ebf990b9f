package incsrc

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
)

func parse(s string) (string, error) {
	if s == "bad" {
		return "", errors.New("unparsable")
	}
	return "id:" + s, nil
}

func TestNew(t *testing.T) {
	o, err := New[string]("x source", []Option[string]{AddTable("t", "c", "k", parse, "two columns")})
	require.NoError(t, err)
	require.Equal(t, DefaultInterval, o.Interval)
	require.Equal(t, DefaultBatch, o.Batch)
	require.Equal(t, memory.DefaultAllocator, o.Mem)
	require.Equal(t, slog.Default(), o.Log)
	require.Equal(t, []Table[string]{{Name: "t", ID: "id:t", Cursor: "c", Tiebreak: "k"}}, o.Tables)

	tb, err := o.Table("t")
	require.NoError(t, err)
	require.Equal(t, "id:t", tb.ID)
	_, err = o.Table("u")
	require.ErrorIs(t, err, flightline.ErrNotFound)

	mem := memory.NewGoAllocator()
	l := slog.New(slog.DiscardHandler)
	o, err = New[string]("x source", []Option[string]{AddTable("t", "c", "k", parse, ""), PollInterval[string](time.Minute),
		BatchRows[string](7), Allocator[string](mem), Logger[string](l)})
	require.NoError(t, err)
	require.Equal(t, time.Minute, o.Interval)
	require.Equal(t, 7, o.Batch)
	require.Equal(t, mem, o.Mem)
	require.Equal(t, l, o.Log)
	o, err = New[string]("x source", []Option[string]{AddTable("t", "c", "k", parse, ""), Allocator[string](nil), Logger[string](nil)})
	require.NoError(t, err)
	require.Equal(t, memory.DefaultAllocator, o.Mem, "nil allocator: the default")
	require.Equal(t, slog.Default(), o.Log, "nil logger: the default")
}

func TestRefused(t *testing.T) {
	for name, opts := range map[string][]Option[string]{
		"no table":         nil,
		"unparsable table": {AddTable("bad", "c", "k", parse, "")},
		"no cursor":        {AddTable("t", "", "k", parse, "")},
		"no tiebreak":      {AddTable("t", "c", "", parse, "")},
		"table twice":      {AddTable("t", "c", "k", parse, ""), AddTable("t", "d", "k", parse, "")},
		"zero interval":    {AddTable("t", "c", "k", parse, ""), PollInterval[string](0)},
		"zero rows":        {AddTable("t", "c", "k", parse, ""), BatchRows[string](0)},
	} {
		_, err := New[string]("x source", opts)
		require.Error(t, err, name)
		if name != "unparsable table" {
			require.ErrorIs(t, err, flightline.ErrInvalidInput, name)
		}
	}
	_, err := New[string]("x source", []Option[string]{AddTable("t", "", "k", parse, "a cursor and a tiebreak column")})
	require.ErrorContains(t, err, `table "t" needs a cursor and a tiebreak column`)
	_, err = New[string, Option[string]]("x source", nil)
	require.ErrorContains(t, err, "x source needs at least one Table")
}

func TestCheckpoint(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, c := range []struct {
		in   string
		want *Checkpoint
	}{
		{"", &Checkpoint{}},
		{`{"cursor":"5","tiebreak":"a"}`, &Checkpoint{Cursor: s("5"), Tiebreak: s("a")}},
		{`{"cursor":null,"tiebreak":null}`, &Checkpoint{}},
		{`{"cursor":"5"}`, nil},
		{`{"cursor":"5","tiebreak":"a","x":1}`, nil},
		{`{"cursor":"5","tiebreak":"a"}{}`, nil},
		{`{"cursor":"5","tiebreak":"a"} trailing`, nil},
		{`[1]`, nil},
	} {
		got, err := ParseCheckpoint([]byte(c.in), "test source")
		if c.want == nil {
			if !errors.Is(err, flightline.ErrInvalidInput) || !strings.Contains(err.Error(), "test source") {
				t.Errorf("ParseCheckpoint(%s) = %v, want ErrInvalidInput naming the kind", c.in, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, *c.want) {
			t.Errorf("ParseCheckpoint(%s) = %+v, %v", c.in, got, err)
			continue
		}
		if back, err := ParseCheckpoint(got.Encode(), "test source"); err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("round trip of %s: %+v, %v", c.in, back, err)
		}
	}
}

func TestSleep(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v", err)
	}
}
