package incsrc

import (
	"errors"
	"log/slog"
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
