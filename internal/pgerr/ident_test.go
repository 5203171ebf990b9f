package pgerr

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
)

func TestParseIdent(t *testing.T) {
	for in, want := range map[string]pgx.Identifier{
		"orders":               {"orders"},
		"Sales.Orders":         {"sales", "orders"},
		`"My Schema"."Tab.le"`: {"My Schema", "Tab.le"},
		`s."a""b"`:             {"s", `a"b`},
		` public . t `:         {"public", "t"},
		`x; DROP TABLE y`:      nil,
		`a.b.c`:                nil,
		`"open`:                nil,
		``:                     nil,
		`a..b`:                 nil,
	} {
		got, err := ParseIdent(in)
		if want == nil {
			require.Truef(t, errors.Is(err, flightline.ErrInvalidInput), "%q: %v", in, err)
			continue
		}
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	id, _ := ParseIdent(`"x""; drop table t; --"`)
	require.Equal(t, `"x""; drop table t; --"`, id.Sanitize())
}

func TestRedact(t *testing.T) {
	require.Equal(t, "pw=xxxxx", Redact("pw=s3cret", "s3cret"))
	require.Equal(t, "abc", Redact("abc", ""))
}
