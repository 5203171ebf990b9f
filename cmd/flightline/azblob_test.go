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
	"github.com/flightline/flightline/internal/testkit/servicetest"
	"github.com/stretchr/testify/require"
)

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
