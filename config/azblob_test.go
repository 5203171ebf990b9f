package config

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/internal/endpoint"
)

func TestAzblobSinkSpec(t *testing.T) {
	t.Setenv("AZURE_STORAGE_ACCOUNT", "")
	t.Setenv("AZURE_STORAGE_KEY", "")
	t.Setenv("AZURE_STORAGE_SAS_TOKEN", "")
	const ep = "endpoint=http://127.0.0.1:1/devstoreaccount1&account=devstoreaccount1&key=a2V5"
	for raw, want := range map[string]string{
		"azblob://c/p?" + ep:                 "want azblob:CONTAINER/PREFIX",
		"azblob:":                            "want azblob:CONTAINER/PREFIX",
		"azblob:c/p?" + ep + "&colour=green": "unknown option(s) colour",
		"azblob:c/p?" + ep + "&format=orc":   "format",
		"azblob:c/p?" + ep + "&partition_by=a&partition_by_day=b": "give one",
		"azblob:c/p?account=a": "no credentials",
		"azblob:c/p?key=a2V5":  "account",
		"azblob:c/p?account=a&key=%25%25secretvalue&endpoint=http://x": "not valid base64",
		"azblob:c/p?account=a&key=a2V5&sas=sv%3Dsecretvalue":           "not both",
	} {
		_, _, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.ErrorContains(t, err, want, raw)
		require.NotContains(t, err.Error(), "secretvalue", raw)
	}
	s, closeFn, err := openSink(testEnv, "azblob:c/p?"+ep+"&format=jsonl&partition_by_day=ts", endpoint.ClientConfig{})
	require.NoError(t, err, "opening contacts nothing")
	closeFn()
	require.Equal(t, objsink.JSONL, s.(objSink).Format())
	require.Equal(t, flightsink.ExactlyOnce, flightsink.GuaranteeOf(s))

	// The credentials from the environment.
	t.Setenv("AZURE_STORAGE_ACCOUNT", "acct")
	t.Setenv("AZURE_STORAGE_SAS_TOKEN", "sv=1&sig=x")
	_, closeFn, err = openSink(testEnv, "azblob:c/p", endpoint.ClientConfig{})
	require.NoError(t, err)
	closeFn()
}
