package config

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
)

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

const sampleConfig = `# a comment
sources:
  orders_kafka:
    kafka: {brokers: [127.0.0.1:9092, h2:9092], topics: [orders], format: json, schema: orders.avsc, batch_wait: 250ms}
  gen: generator:?rows=100&batch_rows=10
sinks:
  lake:
    delta: {uri: s3://lake/orders, AWS_REGION: us-east-1, AWS_SECRET_ACCESS_KEY: "${AWS_SECRET}"}
  warehouse:
    postgres:
      dsn: postgres://loader:${PGPASS}@db:5432/analytics?sslmode=disable
      table: raw.orders
      password: ${WAREHOUSE_PASSWORD}
  remote:
    grpc: {url: grpc+tls://sink.example:7402, tls_ca: /ca.pem, token: "${TOKEN}"}
  plain_remote: grpc://127.0.0.1:7402
deadletter_sinks:
  rejects:
    s3: {prefix: acme-lake/deadletters/orders}
pipelines:
  orders:
    source: sources.orders_kafka
    sink: sinks.warehouse
    deadletter_sink: deadletter_sinks.rejects
    window: 8
  demo:
    source: gen
    sink: sinks.lake
    deadletter: discard
    stream: orders
`

var sampleEnv = map[string]string{"AWS_SECRET": "s3cr3t-aws", "PGPASS": "s3cr3t-dsn", "WAREHOUSE_PASSWORD": "s3cr3t-pw", "TOKEN": "s3cr3t-tok"}

func TestConfigLoads(t *testing.T) {
	c, err := Parse("flightline.yml", []byte(sampleConfig), envOf(sampleEnv))
	require.NoError(t, err)

	k := c.sources["orders_kafka"]
	require.Equal(t, "kafka", k.kind)
	require.Equal(t, url.Values{"brokers": {"127.0.0.1:9092,h2:9092"}, "topics": {"orders"}, "format": {"json"},
		"schema": {"orders.avsc"}, "batch_wait": {"250ms"}}, k.q)
	cfg, err := kafkaSourceSpec.Parse(k.q)
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:9092", "h2:9092"}, cfg.Brokers, "the YAML list is the URL's comma list")

	g := c.sources["gen"]
	require.Equal(t, "generator", g.kind, "a URL string is the command line's form")
	require.Equal(t, "100", g.q.Get("rows"))

	w := c.sinks["warehouse"]
	u, q := w.kindURL()
	require.Equal(t, "postgres://loader:s3cr3t-dsn@db:5432/analytics", u.String())
	require.Equal(t, url.Values{"table": {"raw.orders"}, "password": {"s3cr3t-pw"}, "sslmode": {"disable"}}, q,
		"the DSN's own query keys join the options")

	d := c.sinks["lake"]
	u, q = d.kindURL()
	require.Equal(t, "s3://lake/orders", location(u))
	require.Equal(t, "us-east-1", q.Get("AWS_REGION"))

	r := c.sinks["remote"]
	require.True(t, r.remote())
	cc, err := r.clientConfig()
	require.NoError(t, err)
	require.Equal(t, flightline.ClientConfig{CAFile: "/ca.pem", Token: "s3cr3t-tok"}, cc)
	require.True(t, c.sinks["plain_remote"].remote())

	p := c.pipelines["orders"]
	require.Same(t, k, p.source)
	require.Same(t, w, p.sink)
	require.Same(t, c.deadSinks["rejects"], p.deadLetter)
	require.Equal(t, 8, p.window)
	require.Equal(t, "orders", p.id)
	require.False(t, p.discard)
	require.True(t, c.pipelines["demo"].discard)
	require.Same(t, g, c.pipelines["demo"].source, "a bare name refers to the section's entry")
}

// Every wrong thing is an error naming the file, the line and, for an
// unknown key, the nearest valid one.
func TestConfigErrors(t *testing.T) {
	const pipe = "sources:\n  gen: 'generator:'\nsinks:\n  n: 'null:'\npipelines:\n  p:\n    source: gen\n    sink: n\n"
	for _, tc := range []struct{ name, yml, want string }{
		{"top-level key", "sorces: {}\n", `f.yml:1: the file: unknown key "sorces"; did you mean "sources"?`},
		{"kind field", "sources:\n  a:\n    kafka:\n      brokers: [h:1]\n      topcs: [t]\n",
			`f.yml:5: sources.a.kafka: unknown key "topcs"; did you mean "topics"?`},
		{"far-off key lists the valid ones", "sinks:\n  a:\n    dir: {path: /x, zzzzzzzzzz: 1}\n",
			`f.yml:3: sinks.a.dir: unknown key "zzzzzzzzzz"; valid keys: path`},
		{"kind", "sinks:\n  a:\n    detla: {uri: /x}\n", `f.yml:3: sinks.a: unknown kind "detla"; did you mean "delta"?`},
		{"value checked by the kind's parser", "sources:\n  a:\n    generator:\n      rows: many\n", `f.yml:4: sources.a.generator: `},
		{"enum", "sources:\n  a:\n    kafka: {brokers: [h:1], format: xml}\n", `format="xml": want raw, json or avro`},
		{"missing variable", "sinks:\n  a:\n    postgres: {dsn: 'postgres://h/db', password: '${NOPE}'}\n",
			`f.yml:3: sinks.a.postgres.password: environment variable NOPE is not set`},
		{"pipeline key", "pipelines:\n  p:\n    sorce: x\n", `f.yml:3: pipelines.p: unknown key "sorce"; did you mean "source"?`},
		{"pipeline ref", "sources:\n  gen: 'generator:'\nsinks:\n  n: 'null:'\npipelines:\n  p:\n    source: sources.gen\n    sink: sinks.nul\n",
			`f.yml:8: pipelines.p.sink: sinks has no "nul"; did you mean "n"?`},
		{"ref into the wrong section", "sources:\n  gen: 'generator:'\nsinks:\n  n: 'null:'\npipelines:\n  p:\n    source: sinks.n\n    sink: sinks.n\n",
			`f.yml:7: pipelines.p.source: "sinks.n": want an entry of sources`},
		{"dead letters into the data sink", "sources:\n  gen: 'generator:'\nsinks:\n  n: 'dir:/x'\ndeadletter_sinks:\n  d: 'dir:/x'\npipelines:\n  p:\n    source: gen\n    sink: n\n    deadletter_sink: d\n",
			`f.yml:11: pipelines.p: the dead-letter sink deadletter_sinks.d is the data sink sinks.n`},
		{"deadletter mode", "sources:\n  gen: 'generator:'\nsinks:\n  n: 'null:'\npipelines:\n  p:\n    source: gen\n    sink: n\n    deadletter: drop\n",
			`f.yml:9: pipelines.p.deadletter: "drop": want fail`},
		{"duplicate", "sinks:\n  a: 'null:'\n  a: 'null:'\n", `f.yml:3: sinks: "a" is given twice`},
		{"URL string with unknown option", "sources:\n  a: 'generator:?colour=blue'\n", `f.yml:2: sources.a: generator: unknown option(s) colour`},
		{"DSN query key", "sinks:\n  a:\n    postgres: {dsn: 'postgres://h/db?sslmod=disable'}\n", `did you mean "sslmode"?`},
		{"remote without url", "sinks:\n  a:\n    grpc: {tls_ca: /x}\n", `f.yml:3: sinks.a.grpc: url is required`},
		{"transforms not a list", pipe + "    transforms: builtin:select?columns=a\n", `f.yml:9: pipelines.p.transforms: want a list`},
		{"bad built-in", pipe + "    transforms:\n      - builtin:select?columns=a\n      - builtin:filter?column=a&op=like&value=1\n",
			`f.yml:11: pipelines.p.transforms[1]: `},
		{"transform of a sink kind", pipe + "    transforms:\n      - dir: {path: /x}\n", `f.yml:10: pipelines.p.transforms[0]: unknown kind "dir" (known: grpc)`},
		{"transform service key", pipe + "    transforms:\n      - grpc: {url: 'grpc://h:1', tls_cax: /x}\n",
			`f.yml:10: pipelines.p.transforms[0].grpc: unknown key "tls_cax"; did you mean "tls_ca"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yml", []byte(tc.yml), envOf(nil))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.True(t, errors.Is(err, flightline.ErrInvalidInput))
		})
	}
}

// A secret never appears in an error or in config show, wherever it
// came from.
func TestConfigHidesSecrets(t *testing.T) {
	c, err := Parse("flightline.yml", []byte(sampleConfig), envOf(sampleEnv))
	require.NoError(t, err)
	out, err := c.Show()
	require.NoError(t, err)
	for _, s := range sampleEnv {
		require.NotContains(t, string(out), s)
	}
	require.Contains(t, string(out), "password: '********'")
	require.Contains(t, string(out), "dsn: postgres://loader:xxxxx@db:5432/analytics")
	require.Contains(t, string(out), "checkpoint_table: __flightline_checkpoints # default")

	// A bad secret value is refused without being quoted.
	_, err = Parse("f.yml", []byte("sinks:\n  a:\n    grpc: {url: 'grpc://h:1?token=${T}'}\n"), envOf(map[string]string{"T": "s3cr3t"}))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cr3t")
	_, err = Parse("f.yml", []byte("sinks:\n  a:\n    delta: {uri: /x, AWS_SECRET_ACCESS_KEY: [a, b]}\n"), envOf(nil))
	require.Error(t, err)
	require.NotContains(t, err.Error(), "a, b")

	// The shown file loads again (masked values stay masked).
	_, err = Parse("shown.yml", out, envOf(nil))
	require.NoError(t, err)
}

// A kind registered with sourceOf or sinkOf is in the config file with
// no code of its own: its declared fields are its keys.
func TestConfigDerivesKindsFromSpecs(t *testing.T) {
	for _, sec := range []string{secSources, secSinks} {
		for name, d := range kindsOf(sec) {
			require.NotNil(t, d.check, name)
			for _, f := range d.fields {
				require.Truef(t, d.known(f.Name), "%s.%s", name, f.Name)
			}
		}
	}
	require.Contains(t, mainKinds(secSinks), "postgres")
	require.NotContains(t, mainKinds(secSinks), "postgresql", "aliases are for URLs")
	c, err := Parse("f.yml", []byte("sinks:\n  a: 'postgresql://u@h/db?table=t'\n"), envOf(nil))
	require.NoError(t, err, "the alias URL still works")
	require.Equal(t, "t", c.sinks["a"].q.Get("table"))
	require.True(t, strings.HasPrefix(c.sinks["a"].loc, "postgresql://"))
}

// The bigquery: source in the config file: the mapping form gives the
// command line's URL and options.
func TestConfigBigQuerySource(t *testing.T) {
	c, err := Parse("f.yml", []byte("sources:\n  bq:\n    bigquery: {location: my-project/analytics, table: orders, cursor: seq, tiebreak: id, batch_rows: 500}\n"), envOf(nil))
	require.NoError(t, err)
	s := c.sources["bq"]
	require.Equal(t, "bigquery", s.kind)
	u, q := s.kindURL()
	require.Equal(t, "bigquery:my-project/analytics", u.String())
	cfg, err := bqSourceSpec.Parse(q)
	require.NoError(t, err)
	require.Equal(t, bqSourceConfig{Table: "orders", Cursor: "seq", Tiebreak: "id", BatchRows: ptr(500)}, cfg)
	_, err = Parse("f.yml", []byte("sources:\n  bq:\n    bigquery: {location: p/d, table: t, cursor: c, tie_break: k}\n"), envOf(nil))
	require.ErrorContains(t, err, "tiebreak")
}
