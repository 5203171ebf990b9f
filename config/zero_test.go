package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/endpoint"
)

// TestZeroValuesRefused: a key whose zero the connector's Config reads as
// "the default" is refused when a user writes 0, as before the connectors
// took Configs: writing 0 never silently means the default.
func TestZeroValuesRefused(t *testing.T) {
	for _, c := range []struct{ url, want string }{
		{"stdout:?format=table&max_width=0", "max_width 0: want at least 4"},
		{"stdout:?format=table&max_width=3", "max_width 3: want at least 4"},
		{"kafka:?brokers=127.0.0.1:1&topic=t&value_format=raw&transaction_timeout=0s", "transaction timeout 0s <= 0"},
		{"s3:my-bucket/events?part_size=0", "part_size 0 and multipart_threshold"},
		{"s3:my-bucket/events?multipart_threshold=0", "must be positive"},
		{"adbc:flightsql?uri=grpc://127.0.0.1:1&table=t&checkpoint_table=", "empty table name"},
		{"snowflake://U@acct/DB?warehouse=WH&table=T&max_conns=0", "max_conns 0 < 2"},
		{"snowflake://U@acct/DB?warehouse=WH&table=T&stage=", "empty name"},
		{"snowflake://U@acct/DB?warehouse=WH&table=T&checkpoint_table=", "empty name"},
		{"snowflake://U@acct/DB?warehouse=WH&table=T&match=", "match"},
	} {
		_, _, err := openSink(testEnv, c.url, endpoint.ClientConfig{})
		require.ErrorIs(t, err, flightline.ErrInvalidInput, c.url)
		require.ErrorContains(t, err, c.want, c.url)
	}
	// The delta kind's mode and key: an empty mode is not the default,
	// and neither goes without the other.
	dir := t.TempDir()
	for _, c := range []struct{ query, want string }{
		{"?mode=", `mode="": want append or merge`},
		{"?mode=merge", "mode merge needs key columns"},
		{"?mode=merge&key=", "mode merge needs key columns"},
		{"?key=id", "key is for mode merge"},
		{"?mode=append&key=id", "key is for mode merge"},
		{"?mode=upsert&key=id", `"upsert"`},
	} {
		url := "delta:" + dir + c.query
		_, _, err := openSink(testEnv, url, endpoint.ClientConfig{})
		require.ErrorIs(t, err, flightline.ErrInvalidInput, url)
		require.ErrorContains(t, err, c.want, url)
	}
	for _, c := range []struct{ url, want string }{
		{"adbc:flightsql?uri=grpc://127.0.0.1:1&table=t&cursor=c&tiebreak=c&poll=0s", "poll 0s: want a positive duration"},
		{"adbc:flightsql?uri=grpc://127.0.0.1:1&table=t&cursor=c&tiebreak=c&batch_rows=0", "batch_rows 0: want at least 1"},
		{"snowflake://U@acct/DB?warehouse=WH&table=T&cursor=ID&tiebreak=ID&poll=0s", "poll 0s: want a positive duration"},
		{"snowflake://U@acct/DB?warehouse=WH&table=T&cursor=ID&tiebreak=ID&batch_rows=0", "batch_rows 0: want at least 1"},
	} {
		_, _, err := openSource(testEnv, c.url, endpoint.ClientConfig{})
		require.ErrorIs(t, err, flightline.ErrInvalidInput, c.url)
		require.ErrorContains(t, err, c.want, c.url)
	}
}
