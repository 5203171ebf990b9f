package spec

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
)

type conn struct {
	User     string `spec:"user" doc:"the user"`
	Password string `spec:"password" secret:"true" doc:"the password"`
	PIN      *int   `spec:"pin" secret:"true" doc:"a secret number"`
}

type testConfig struct {
	conn
	Name     string            `spec:"name" default:"orders" doc:"a name"`
	Brokers  []string          `spec:"brokers" doc:"brokers"`
	Rows     *int64            `spec:"rows" doc:"rows"`
	Parts    int32             `spec:"parts" doc:"partitions"`
	On       *bool             `spec:"on" default:"true" doc:"a switch"`
	Wait     time.Duration     `spec:"wait" default:"500ms" doc:"a wait"`
	Bytes    *Size             `spec:"bytes" doc:"bytes"`
	Reset    string            `spec:"reset" enum:"earliest,latest" doc:"where to start"`
	Ignored  string            // no tag: not an option
	Storage  map[string]string `spec:",extra"`
	Internal int               `spec:"-"`
}

var testSpec = New[testConfig]("test", "test:?KEY=VALUE", "a test kind",
	&Extra{Doc: "storage options", Keys: []string{"AWS_REGION", "AWS_SECRET_ACCESS_KEY"}, Secret: []string{"AWS_SECRET_ACCESS_KEY"}})

func parse(t *testing.T, query string) (testConfig, error) {
	t.Helper()
	q, err := url.ParseQuery(query)
	require.NoError(t, err)
	return testSpec.Parse(q)
}

func ptr[T any](v T) *T { return &v }

func TestParseValues(t *testing.T) {
	got, err := parse(t, "user=u&password=p&brokers=a:1,%20b:2,&rows=7&parts=3&on=false&wait=2s&bytes=16MiB&reset=LATEST&AWS_REGION=eu&name=x&name=y")
	require.NoError(t, err)
	require.Equal(t, testConfig{
		conn:    conn{User: "u", Password: "p"},
		Name:    "y", // the last value wins
		Brokers: []string{"a:1", "b:2"},
		Rows:    ptr[int64](7),
		Parts:   3,
		On:      ptr(false),
		Wait:    2 * time.Second,
		Bytes:   ptr(Size(16 << 20)),
		Reset:   "latest",
		Storage: map[string]string{"AWS_REGION": "eu"},
	}, got)
}

func TestDefaults(t *testing.T) {
	got, err := parse(t, "")
	require.NoError(t, err)
	require.Equal(t, testConfig{Name: "orders", On: ptr(true), Wait: 500 * time.Millisecond, Storage: map[string]string{}}, got,
		"defaults filled in, pointers without a default left nil")
}

func TestErrors(t *testing.T) {
	for query, want := range map[string]string{
		"colour=blue&size=9": "test: unknown option(s) colour, size",
		"Ignored=x":          "unknown option(s) Ignored",
		"Internal=1":         "unknown option(s) Internal",
		"rows=many":          `test: rows="many"`,
		"parts=3000000000":   "out of range",
		"on=maybe":           `on="maybe"`,
		"wait=soon":          `wait="soon"`,
		"bytes=lots":         "want a byte count",
		"reset=middle":       "want earliest or latest",
	} {
		_, err := parse(t, query)
		require.ErrorContains(t, err, want, query)
		require.ErrorIs(t, err, flightline.ErrInvalidInput, query)
	}
	_, err := parse(t, "rows=many")
	require.ErrorIs(t, err, strconv.ErrSyntax, "the parser's error stays wrapped")
	_, err = parse(t, "bytes=lots")
	require.ErrorIs(t, err, ErrSize)
}

func TestSecretsAreNotEchoed(t *testing.T) {
	err := Bad("test", testSpec.Field("password"), "hunter2", errors.New("too short"))
	require.NotContains(t, err.Error(), "hunter2")
	require.Contains(t, err.Error(), "password=<secret>")
	err = Bad("test", testSpec.Field("user"), "bob", errors.New("unknown"))
	require.Contains(t, err.Error(), `user="bob"`)

	err = Bad("test", testSpec.Field("password"), "hunter2", fmt.Errorf("parsing %q: %w", "hunter2", strconv.ErrSyntax))
	require.NotContains(t, err.Error(), "hunter2", "even when the cause quotes it")
	require.ErrorIs(t, err, strconv.ErrSyntax)
	_, err = parse(t, "pin=12ab")
	require.ErrorIs(t, err, strconv.ErrSyntax)
	require.NotContains(t, err.Error(), "12ab")

	u := testSpec.Usage()
	require.Contains(t, u, "password=STRING")
	require.Contains(t, u, "the password (secret)")
	require.Contains(t, u, "AWS_SECRET_ACCESS_KEY (secret)")
	require.NotContains(t, u, "AWS_REGION (secret)")
}

func TestUsage(t *testing.T) {
	u := testSpec.Usage()
	for _, want := range []string{"test:?KEY=VALUE", "a test kind", "name=STRING", "(default orders)", "brokers=LIST",
		"rows=N", "on=BOOL", "(default true)", "wait=DURATION", "(default 500ms)", "bytes=SIZE", "reset=earliest|latest",
		"storage options: AWS_REGION"} {
		require.Contains(t, u, want)
	}
	require.NotContains(t, u, "Ignored")
	require.NotContains(t, u, "Internal")
	// One line per option, in declaration order.
	require.Less(t, strings.Index(u, "user="), strings.Index(u, "reset="))
}

func TestParseSize(t *testing.T) {
	for raw, want := range map[string]Size{"0": 0, "1048576": 1 << 20, "512KiB": 512 << 10, "16MiB": 16 << 20, "1GiB": 1 << 30,
		"1GB": 1e9, "5MB": 5e6, "2KB": 2000, "10B": 10, "3 MiB": 3 << 20} {
		got, err := ParseSize(raw)
		require.NoError(t, err, raw)
		require.Equal(t, want, got, raw)
	}
	for _, raw := range []string{"", "-1", "1.5MiB", "MiB", "1TB", "99999999999GiB"} {
		_, err := ParseSize(raw)
		require.ErrorIs(t, err, ErrSize, raw)
	}
}

func TestMalformedDeclarationsPanic(t *testing.T) {
	type badType struct {
		F float64 `spec:"f"`
	}
	require.Panics(t, func() { New[badType]("k", "k:", "", nil) })
	type twice struct {
		A string `spec:"a"`
		B string `spec:"a"`
	}
	require.Panics(t, func() { New[twice]("k", "k:", "", nil) })
	type badDefault struct {
		N int `spec:"n" default:"many"`
	}
	require.Panics(t, func() { New[badDefault]("k", "k:", "", nil) })
	type noExtraField struct{}
	require.Panics(t, func() { New[noExtraField]("k", "k:", "", &Extra{Keys: []string{"X"}}) })
}
