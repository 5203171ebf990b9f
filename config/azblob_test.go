package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/servicetest"
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

// The YAML form against Azurite, the key from the environment as ${VAR},
// and check's line: the guarantee and the checkpoints; a missing container
// is a clear failure.
func TestIntegrationAzblobSinkCheck(t *testing.T) {
	ep := servicetest.Need(t, "FLIGHTLINE_AZURITE_ENDPOINT", "Azurite")
	account, key := os.Getenv("FLIGHTLINE_AZURITE_ACCOUNT"), os.Getenv("FLIGHTLINE_AZURITE_KEY")
	name := fmt.Sprintf("check-%06d", rand.IntN(1e6))
	cred, err := container.NewSharedKeyCredential(account, key)
	require.NoError(t, err)
	c, err := container.NewClientWithSharedKeyCredential(ep+"/"+name, cred, nil)
	require.NoError(t, err)
	_, err = c.Create(context.Background(), nil)
	require.NoError(t, err)

	yml := func(cont string) string {
		return writeConfig(t, `
sources:
  gen: 'generator:?rows=10'
sinks:
  blobs:
    azblob: {prefix: `+cont+`/lake, format: csv, account: `+account+`, key: '${FLIGHTLINE_AZURITE_KEY}', endpoint: '`+ep+`'}
pipelines:
  p:
    source: gen
    sink: blobs
`)
	}
	var out bytes.Buffer
	require.NoError(t, checkCommand(context.Background(), []string{"--config", yml(name)}, &out), out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4, out.String())
	require.Contains(t, lines[2], "ok    sinks.blobs")
	require.Contains(t, lines[2], "exactly-once (csv part files, If-None-Match: * commit records")
	require.Contains(t, lines[2], "p: no checkpoint yet")
	require.NotContains(t, out.String(), key)

	out.Reset()
	err = checkCommand(context.Background(), []string{"--config", yml("no-such-container-37")}, &out)
	require.Error(t, err)
	require.Contains(t, out.String(), `container "no-such-container-37" does not exist`, out.String())
	require.NotContains(t, out.String(), key)
}
