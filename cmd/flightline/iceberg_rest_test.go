package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// The YAML form on the Iceberg REST catalog (the services script's
// RESTCatalogServer): a generator synced with catalog: rest, check
// reports the checkpoint, and pyiceberg's RestCatalog reads every row
// once.
func TestIntegrationIcebergRESTYAML(t *testing.T) {
	uri := servicetest.Need(t, "FLIGHTLINE_ICEBERG_REST_URI", "the Iceberg REST catalog (services.sh up icebergrest)")
	py := servicetest.Need(t, "FLIGHTLINE_PYICEBERG_PYTHON", "pyiceberg 0.12")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ns := fmt.Sprintf("restyaml%d", time.Now().UnixNano()%1e9)
	path := writeConfig(t, `
sources:
  gen: 'generator:?rows=300&batch_rows=100'
sinks:
  lake:
    iceberg:
      catalog: rest
      uri: '`+uri+`'
      table: `+ns+`.orders
pipelines:
  p:
    source: gen
    sink: lake
`)
	logs := captureLogs(t)
	require.NoError(t, syncCommand(ctx, []string{"--config", path, "--once"}), logs.String())
	var out bytes.Buffer
	require.NoError(t, checkCommand(ctx, []string{"--config", path}, &out), out.String())
	require.Regexp(t, `ok    sinks.lake +iceberg .*p: checkpoint \{"positions":\{"orders/0":300\}\}`, out.String())

	raw, err := exec.CommandContext(ctx, py, "../../flightsink/iceberg/testdata/read_pyiceberg_rest.py", uri, ns+".orders").CombinedOutput()
	require.NoError(t, err, string(raw))
	var got struct{ IDs []int64 }
	require.NoError(t, json.Unmarshal(raw, &got), string(raw))
	require.Len(t, got.IDs, 300)
	for i, id := range got.IDs {
		require.Equal(t, int64(i), id, "every row once")
	}
}
