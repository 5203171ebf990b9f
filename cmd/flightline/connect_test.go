package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/config"
	"github.com/flightline/flightline/internal/configedit"
)

const connectBase = `# staging
sources:
  # the staging cluster
  orders: {kafka: {brokers: [127.0.0.1:9092], topics: [orders], format: json, schema: orders.avsc}}
pipelines:
  orders:
    source: sources.orders # from Kafka
`

func connect(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := connectCommand(args, &out)
	return out.String(), err
}

// showOf is `config show` of the file at path.
func showOf(t *testing.T, path string) string {
	t.Helper()
	c, err := config.Load(path, os.LookupEnv)
	require.NoError(t, err)
	b, err := c.Show()
	require.NoError(t, err)
	// The header names the file; the rest must agree.
	_, body, _ := strings.Cut(string(b), "\n")
	return body
}

func TestConnectRoundTrip(t *testing.T) {
	t.Setenv("WAREHOUSE_PASSWORD", "hunter2")
	path := writeConfig(t, connectBase)
	out, err := connect(t, "sink", "postgres", "--config", path, "--pipeline", "orders", "--name", "warehouse",
		"--dsn", "postgres://loader@db/analytics", "--table", "raw.orders", "--password", "${WAREHOUSE_PASSWORD}")
	require.NoError(t, err)
	require.Contains(t, out, "wrote sinks.warehouse (postgres), linked to pipelines.orders")
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, c := range []string{"# staging", "# the staging cluster", "# from Kafka"} {
		require.Contains(t, string(b), c)
	}
	// A second sink kind under a new pipeline, one end at a time: the
	// half-built pipeline is reported, the file is still written.
	out, err = connect(t, "source", "generator", "--config", path, "--pipeline", "gen", "--name", "gen", "--rows", "100", "--batch-rows", "10")
	require.NoError(t, err)
	require.Contains(t, out, "note: pipelines.gen needs a source and a sink")
	_, err = connect(t, "sink", "dir", "--config", path, "--pipeline", "gen", "--name", "out", "--path", "/tmp/out")
	require.NoError(t, err)
	// Updating an entry sets the keys given and keeps the rest.
	_, err = connect(t, "source", "kafka", "--config", path, "--name", "orders", "--topics", "orders", "--topics", "returns")
	require.NoError(t, err)

	byHand := writeConfig(t, `sources:
  orders:
    kafka: {brokers: 127.0.0.1:9092, topics: [orders, returns], format: json, schema: orders.avsc}
  gen: generator:?rows=100&batch_rows=10
sinks:
  warehouse:
    postgres: {dsn: postgres://loader@db/analytics, table: raw.orders, password: '${WAREHOUSE_PASSWORD}'}
  out: dir:/tmp/out
pipelines:
  orders: {source: orders, sink: warehouse}
  gen: {source: sources.gen, sink: sinks.out}
`)
	require.Equal(t, showOf(t, byHand), showOf(t, path), "connect and a hand-written file resolve alike")

	// Connecting the same again writes nothing.
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	out, err = connect(t, "sink", "dir", "--config", path, "--pipeline", "gen", "--name", "out", "--path", "/tmp/out")
	require.NoError(t, err)
	require.Contains(t, out, "unchanged")
	after, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

func TestConnectRefusalsLeaveTheFile(t *testing.T) {
	path := writeConfig(t, connectBase+"    sink: sinks.lake\nsinks:\n  lake: {dir: {path: /x}}\n")
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sink", "postgres", "--name", "w", "--dsn", "postgres://db/a", "--password", "hunter2"}, "${VAR}"},
		{[]string{"source", "generator", "--name", "orders"}, "is a kafka, not a generator"},
		{[]string{"source", "kafka", "--name", "orders", "--batch-rows", "many"}, "batch_rows"},
		{[]string{"source", "kafka", "--name", "orders", "--isolation", "dirty"}, "isolation"},
		{[]string{"source", "kafka", "--name", "orders", "--topcs", "x"}, "did you mean --topics"},
		{[]string{"sink", "oracle", "--name", "x"}, "unknown kind"},
		{[]string{"sinks", "dir", "--name", "x"}, "want source, sink"},
		{[]string{"sink", "dir", "--path", "/x"}, "--name is required"},
		// The result must load: a dead-letter sink that is the data sink.
		{[]string{"deadletter-sink", "dir", "--name", "rej", "--path", "/x", "--pipeline", "orders"}, "would not load"},
	} {
		_, err := connect(t, append(tc.args, "--config", path)...)
		require.Error(t, err, "%v", tc.args)
		require.Contains(t, err.Error(), tc.want)
		require.NotContains(t, err.Error(), "hunter2")
		after, rerr := os.ReadFile(path)
		require.NoError(t, rerr)
		require.Equal(t, string(before), string(after), "%v left the file as it was", tc.args)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left behind")
}

func TestConfigApplyJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "flightline.yml")
	req := `{"config": "` + path + `", "entries": [
	  {"section": "sources", "name": "gen", "kind": "generator", "fields": {"rows": 100, "batch_rows": 10, "interval": null}, "pipeline": "p"},
	  {"section": "sinks", "name": "lake", "kind": "delta", "fields": {"uri": "/data/orders", "AWS_SECRET_ACCESS_KEY": "${AWS_SECRET}"}, "replace": true, "pipeline": "p"}],
	 "pipelines": [{"name": "p", "keys": {"id": "gen-to-lake", "window": 8}}]}`
	var out bytes.Buffer
	require.NoError(t, configApplyCommand([]string{"--json"}, strings.NewReader(req), &out))
	var res config.ApplyResult
	require.NoError(t, json.Unmarshal(out.Bytes(), &res))
	require.True(t, res.Written)
	require.Empty(t, res.Incomplete)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), st.Mode().Perm())
	t.Setenv("AWS_SECRET", "s3cr3t")
	c, err := config.Load(path, os.LookupEnv)
	require.NoError(t, err)
	shown, err := c.Show()
	require.NoError(t, err)
	require.Contains(t, string(shown), "id: gen-to-lake")
	require.Contains(t, string(shown), "window: 8")

	// A refusal answers JSON naming the reason.
	out.Reset()
	err = configApplyCommand([]string{"--json"}, strings.NewReader(`{"config": "`+path+`", "entries": [{"section": "sinks", "name": "lake", "kind": "postgres", "fields": {}}]}`), &out)
	require.ErrorIs(t, err, configedit.ErrKindChange)
	var refusal map[string]string
	require.NoError(t, json.Unmarshal(out.Bytes(), &refusal))
	require.Equal(t, "kind_change", refusal["reason"])

	out.Reset()
	err = configApplyCommand([]string{"--json"}, strings.NewReader(`{"entries": [], "bogus": 1}`), &out)
	require.ErrorContains(t, err, "bogus")
}
