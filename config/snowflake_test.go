package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/endpoint"
)

func TestSnowflakeSpecs(t *testing.T) {
	t.Setenv("SNOWFLAKE_PASSWORD", "Sup3r-S3cret")
	// New does not connect, so these need no account.
	s, closeSink, err := openSink(testEnv, "snowflake://loader@myorg-acct/DB/PUBLIC?warehouse=WH&table=sales.orders&role=LOADER&timeout=20s&retries=1", endpoint.ClientConfig{})
	require.NoError(t, err)
	require.NotNil(t, s)
	closeSink()

	_, _, err = openSink(testEnv, "snowflake://loader@acct/DB?table=t&colour=blue", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "unknown option(s) colour")
	_, _, err = openSink(testEnv, "snowflake://loader:pw@acct/DB?table=t", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "password in the URL is refused")
	require.NotContains(t, err.Error(), ":pw")
	_, _, err = openSink(testEnv, "snowflake://loader@acct/DB/S/X?table=t", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "/DATABASE/SCHEMA")
	_, _, err = openSink(testEnv, "snowflake://loader@acct/DB?table=t&match=sometimes", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "match")
	_, _, err = openSink(testEnv, "snowflake://loader@acct/DB?table=t&auth=keypair", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "without a private key")
	t.Setenv("SNOWFLAKE_PASSWORD", "")
	_, _, err = openSink(testEnv, "snowflake://loader@acct/DB?table=t", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "without a password")

	t.Setenv("SNOWFLAKE_PASSWORD", "Sup3r-S3cret")
	src, closeSrc, err := openSource(testEnv, "snowflake://reader@acct/DB/S?warehouse=WH&table=events&cursor=INGESTED_AT&tiebreak=ID&poll=5s&batch_rows=500", endpoint.ClientConfig{})
	require.NoError(t, err)
	require.NotNil(t, src)
	closeSrc()
	_, _, err = openSource(testEnv, "snowflake://reader@acct/DB?table=events&cursor=ID", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "tiebreak")
}
