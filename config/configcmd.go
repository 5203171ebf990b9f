package config

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/spec"
)

// checkProbe is the pipeline id check reads the checkpoint of on a sink
// no pipeline of the file uses.
const checkProbe = "flightline-check"

// CheckResult is one line of check's report: an endpoint, a pipeline, a
// remote transform or a schema sink, and what it answered.
type CheckResult struct {
	Ref    string // sources.NAME, sinks.NAME, pipelines.NAME, pipelines.NAME.transforms[I], schema_sinks.NAME (PIPELINE)
	Kind   string // the endpoint's kind, or pipeline, grpc (a transform), glue
	Detail string // what was asked and answered, when Err is nil
	Err    error
}

// Check opens each endpoint of c and asks it one read-only question: a
// source its streams (and whether the pipelines' streams are among
// them), a sink the checkpoint of each pipeline writing to it. That
// exercises reachability, the credentials, and the target: a sink that
// can answer Checkpoint has (or can create, for the kinds that create on
// first use) its checkpoint store. Then it checks each pipeline as sync
// would start it (with once, as sync --once: its source must tell where
// its stream ends), each remote transform's health service, and each
// schema sink. Check never opens a pipeline, which would fence a running
// one. Each question may take timeout; f receives each answer, in order
// (sources, sinks, dead-letter sinks, local tables, pipelines with their
// transforms, schema sinks, each sorted by name).
func (c *File) Check(ctx context.Context, timeout time.Duration, once bool, log *slog.Logger, f func(CheckResult)) {
	cfg := c
	report := func(e *endpointConf, detail string, err error) {
		f(CheckResult{Ref: e.ref(), Kind: e.kind, Detail: detail, Err: err})
	}
	for _, name := range sortedKeys(cfg.sources) {
		e := cfg.sources[name]
		var want []string
		for _, p := range cfg.pipelines {
			if p.source == e && p.stream != "" {
				want = append(want, p.stream)
			}
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		detail, err := checkSource(env{ctx: cctx, log: log}, e, want)
		cancel()
		report(e, detail, err)
	}
	for _, sec := range []map[string]*endpointConf{cfg.sinks, cfg.deadSinks} {
		for _, name := range sortedKeys(sec) {
			e := sec[name]
			var ps []flightsink.Pipeline
			for _, pname := range sortedKeys(cfg.pipelines) {
				p := cfg.pipelines[pname]
				if p.sink == e {
					ps = append(ps, flightsink.Pipeline{ID: p.id, Target: p.target})
				}
				if p.deadLetter == e {
					ps = append(ps, deadLetterPipeline(p))
				}
			}
			if len(ps) == 0 {
				ps = []flightsink.Pipeline{{ID: checkProbe}}
			}
			cctx, cancel := context.WithTimeout(ctx, timeout)
			detail, err := checkSink(env{ctx: cctx, log: log}, e, ps)
			cancel()
			report(e, detail, err)
		}
	}
	for _, pname := range sortedKeys(cfg.pipelines) { // the embedded local tables of pipelines without sink: (local.go)
		if p := cfg.pipelines[pname]; p.local {
			cctx, cancel := context.WithTimeout(ctx, timeout)
			detail, err := checkSink(env{ctx: cctx, log: log}, p.sink, []flightsink.Pipeline{{ID: p.id, Target: p.target}})
			cancel()
			report(p.sink, detail, err)
		}
	}
	for _, pname := range sortedKeys(cfg.pipelines) {
		p := cfg.pipelines[pname]
		cctx, cancel := context.WithTimeout(ctx, timeout)
		detail, err := checkPipeline(env{ctx: cctx, log: log}, p, once)
		cancel()
		ref := secPipelines + "." + p.name
		f(CheckResult{Ref: ref, Kind: "pipeline", Detail: detail, Err: err})
		for i, t := range p.transforms {
			if t.remote == nil {
				continue
			}
			tref := fmt.Sprintf("%s.transforms[%d]", ref, i)
			cctx, cancel := context.WithTimeout(ctx, timeout)
			err := checkTransform(cctx, t)
			cancel()
			f(CheckResult{Ref: tref, Kind: "grpc", Detail: "the service's gRPC health check answered SERVING", Err: err})
		}
	}
	for _, pname := range sortedKeys(cfg.pipelines) {
		p := cfg.pipelines[pname]
		if p.schemaSink == nil {
			continue
		}
		ref := fmt.Sprintf("%s.%s (%s)", secSchemaSinks, p.schemaSink.name, p.name)
		cctx, cancel := context.WithTimeout(ctx, timeout)
		detail, err := checkSchemaSink(cctx, p)
		cancel()
		f(CheckResult{Ref: ref, Kind: "glue", Detail: detail, Err: err})
	}
}

func checkSchemaSink(ctx context.Context, p *pipelineConf) (string, error) {
	reg, err := newRegistrar(ctx, p, nil)
	if err != nil {
		return "", err
	}
	return reg.Check(ctx)
}

func checkSource(e env, c *endpointConf, want []string) (string, error) {
	src, closeSrc, err := openConfSource(e, c)
	if err != nil {
		return "", err
	}
	defer closeSrc()
	streams, err := src.Streams(e.ctx)
	if err != nil {
		return "", err
	}
	if len(streams) == 0 {
		return "", fmt.Errorf("reachable, but the source has no streams (does its topic or table exist?)")
	}
	names := make([]string, len(streams))
	for i, s := range streams {
		names[i] = s.Name
	}
	for _, w := range want {
		if !slices.Contains(names, w) {
			return "", fmt.Errorf("stream %q is not among the source's streams (%s)", w, strings.Join(names, ", "))
		}
	}
	if len(names) > 5 {
		names = append(names[:5], "…")
	}
	what := "asked for its streams (read-only)"
	if c.remote() {
		what = "ListFlights answered"
	}
	// A source with more to say (the postgres-cdc slot and its lag).
	if d, ok := src.(interface {
		CheckDetail(context.Context) (string, error)
	}); ok {
		detail, err := d.CheckDetail(e.ctx)
		if err != nil {
			return "", err
		}
		what += "; " + detail
	}
	return fmt.Sprintf("%s; streams: %s", what, strings.Join(names, ", ")), nil
}

// checkPipeline runs the checks sync runs when it starts p, without
// writing anything: the source takes the pipeline's dead-letter setting,
// the stream resolves, and (with once, or as a note) the source can tell
// where its stream ends.
func checkPipeline(e env, p *pipelineConf, once bool) (string, error) {
	if p.deadLetter != nil || p.discard {
		e.deadLetters = newDeadLetterRouter(p, nil, e.log, nil)
	}
	src, closeSrc, err := openConfSource(e, p.source)
	if err != nil {
		return "", err
	}
	defer closeSrc()
	var parts []string
	if e.deadLetters != nil {
		if !e.deadLetters.used {
			return "", fmt.Errorf("the %s source %s does not hand over undecodable records: deadletter_sink and deadletter: discard need one that does (kafka); sync refuses this pipeline at start", p.source.kind, p.source.ref())
		}
		parts = append(parts, "the source takes its dead letters")
	}
	stream, err := pipelineStream(e.ctx, src, p)
	if err != nil {
		return "", err
	}
	parts = append(parts, "stream "+stream)
	ender, ok := src.(flightsrc.Ender)
	switch {
	case ok:
		end, err := ender.End(e.ctx, stream)
		if err != nil {
			if once {
				return "", fmt.Errorf("sync --once: %w", err)
			}
			parts = append(parts, fmt.Sprintf("sync --once would fail: %s", oneLine(err)))
		} else {
			parts = append(parts, "sync --once reads to "+end.Desc)
		}
	case p.source.remote():
		parts = append(parts, "sync --once reads until the remote source ends its stream")
	case once:
		return "", fmt.Errorf("sync --once: the %s source %s cannot tell where its stream ends", p.source.kind, p.source.ref())
	default:
		parts = append(parts, "sync --once is not possible with this source")
	}
	return strings.Join(parts, "; "), nil
}

// checkTransform probes a transform service's transport (endpoint.Probe),
// then asks its gRPC health service whether it serves: a call on its
// connection, with its TLS and token.
func checkTransform(ctx context.Context, t transformConf) error {
	cc, err := t.remote.clientConfig()
	if err != nil {
		return err
	}
	// The transport first, as sync probes it: a mismatch names the key to
	// fix; a service that does not answer fails the check (sync would
	// start, warn and retry).
	if err := endpoint.Probe(ctx, t.spec, cc, t.caKey()); err != nil {
		return err
	}
	conn, err := endpoint.Dial(t.spec, cc)
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return fmt.Errorf("%w", flighterr.FromStatus(t.spec+": health check", err))
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s: health check: %s", t.spec, resp.GetStatus())
	}
	return nil
}

func checkSink(e env, c *endpointConf, ps []flightsink.Pipeline) (string, error) {
	sink, closeSink, err := openConfSink(e, c)
	if err != nil {
		return "", err
	}
	defer closeSink()
	var parts []string
	if p, ok := sink.(interface{ Ping(context.Context) error }); ok {
		if err := p.Ping(e.ctx); err != nil {
			return "", err
		}
		if w, ok := sink.(interface{ pingWhat() string }); ok {
			parts = append(parts, w.pingWhat())
		} else {
			parts = append(parts, pingWhat(c.kind))
		}
	}
	for _, p := range ps {
		cp, err := sink.Checkpoint(e.ctx, p)
		if err != nil {
			return "", fmt.Errorf("checkpoint of pipeline %q: %w", p.ID, err)
		}
		if p.ID == checkProbe {
			continue
		}
		if cp == nil {
			parts = append(parts, fmt.Sprintf("%s: no checkpoint yet", p.ID))
		} else {
			parts = append(parts, fmt.Sprintf("%s: checkpoint %s", p.ID, cp))
		}
	}
	what := "checkpoint read"
	if c.remote() {
		what = "checkpoint action answered"
	}
	line := what + "; " + strings.Join(parts, "; ")
	if len(parts) == 0 || (len(parts) == 1 && len(ps) == 1 && ps[0].ID == checkProbe) {
		line = strings.Join(append(parts, what), "; ")
	}
	if d, ok := sink.(checkDetailer); ok {
		return d.checkDetail(line), nil
	}
	return line, nil
}

// pingWhat says what a sink kind's Ping contacted.
func pingWhat(kind string) string {
	switch kind {
	case "s3":
		return "HEAD of the bucket with the configured credentials"
	case "postgres", "postgresql":
		return "connected and pinged the database"
	case "amqp", "amqps", "rabbitmq-stream":
		return "connected to the broker"
	}
	return "pinged"
}

// deadLetterPipeline is the pipeline a pipeline's dead letters are
// written as: its own id with a suffix, so the dead-letter sink keeps their
// checkpoint apart from any data the sink holds.
func deadLetterPipeline(p *pipelineConf) flightsink.Pipeline {
	return flightsink.Pipeline{ID: p.id + ".deadletters"}
}

// oneLine keeps an error on the line check prints it on.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Reference is docs/config.md: the file's form and every kind's
// keys, generated from the kinds' specs (`flightline config doc`).
func Reference() string {
	var b strings.Builder
	b.WriteString(`# The config file: flightline.yml

<!-- Generated by 'flightline config doc' from the kinds' specs; do not edit.
     TestConfigDocIsCurrent fails when this file is stale. -->

One YAML file (` + "`flightline.yml`" + `, or ` + "`--config FILE`" + `) names sources, sinks,
dead-letter sinks and the pipelines between them. It drives
` + "`flightline sync`, `flightline check`, `flightline config show` and `flightline serve`" + `.

` + "```yaml" + `
sources:
  orders_kafka:
    kafka: {brokers: [127.0.0.1:9092], topics: [orders], format: json, schema: orders.avsc}
sinks:
  warehouse:
    postgres: {dsn: postgres://loader@db/analytics, table: raw.orders, password: "${WAREHOUSE_PASSWORD}"}
  remote:
    grpc: {url: grpc+tls://sink.example:7402, tls_ca: /etc/flightline/ca.pem, token: "${SINK_TOKEN}"}
deadletter_sinks:
  rejects:
    s3: {prefix: acme-lake/deadletters/orders}
pipelines:
  orders:
    source: sources.orders_kafka
    sink: sinks.warehouse
    deadletter_sink: deadletter_sinks.rejects
` + "```" + `

## Rules

- **An endpoint** is either a string written exactly as on the command line
  (` + "`generator:?rows=100`, `grpc://host:7402`" + `) or a mapping with one key, the
  kind, whose value maps the kind's keys (below) to values. The keys are
  the kind's URL query keys, and their values are checked by the same
  parser; a list may be a YAML list or a comma-separated string. The
  location the URL form writes between ` + "`KIND:`" + ` and ` + "`?`" + ` has a key of its own
  (` + "`uri`, `dsn`, `path`, `prefix`" + `, or ` + "`location`" + ` for kinds that name none).
- **Unknown keys are errors** naming the file, the line and the nearest
  valid key. So are unknown kinds, values that do not parse, keys given
  twice, and references to entries that do not exist.
- **` + "`${VAR}`" + `** in any value is replaced by the environment variable VAR; a
  variable that is not set is an error naming it. ` + "`$$`" + ` is a literal ` + "`$`" + `.
  Inside a ` + "`{…}`" + ` mapping quote such a value (` + "`token: \"${TOKEN}\"`" + `): unquoted, YAML
  reads its ` + "`{`" + ` as the start of another mapping. A token or TLS key that is
  empty, or whose ` + "`${VAR}`" + ` expands to nothing, is an error: it would turn
  authentication or TLS off.
- **Secrets** (marked below) are never logged or echoed: ` + "`config show`" + `
  prints them as ` + "`********`" + `, errors withhold them, and a password in a
  DSN or URL is masked. Write them as ` + "`${VAR}`" + `.
- **Remote endpoints**: any source or sink may be a Flight URL, or the
  ` + "`grpc`" + ` kind with TLS and token keys.

## Pipelines

| key | meaning |
|---|---|
| ` + "`source`" + ` | ` + "`sources.NAME`" + ` (or just ` + "`NAME`" + `); required |
| ` + "`sink`" + ` | ` + "`sinks.NAME`" + ` (or just ` + "`NAME`" + `); without it the records land in the local table named after the pipeline (its target), in the DuckDB database flightline-data/flightline.duckdb beside the file ($FLIGHTLINE_DATA_DIR moves it; a local Delta table flightline-data/TABLE where DuckDB's library is not found), which ` + "`flightline query`" + ` reads |
| ` + "`deadletter_sink`" + ` | ` + "`deadletter_sinks.NAME`" + `: where records that cannot be decoded or stored go; must not be the data sink |
| ` + "`deadletter`" + ` | ` + "`fail`" + ` (the default: stop with an error naming the record's position and reason) or ` + "`discard`" + ` (counted, logged and exported as a metric) |
| ` + "`id`" + ` | the pipeline id, the key of the sink's checkpoint; default: the pipeline's name |
| ` + "`stream`" + ` | the source stream to read; default: the source's only stream |
| ` + "`target`" + ` | the target inside the sink (table, topic, directory); default: the sink's own |
| ` + "`window`" + ` | batches in flight between source and sink (default 4) |
| ` + "`max_attempts`" + ` | give up after this many failed attempts in a row (default 0: never) |
| ` + "`schema_sink`" + ` | ` + "`schema_sinks.NAME`" + `: the catalog the pipeline's schema is registered in (see Schema sinks) |
| ` + "`transforms`" + ` | a list of transforms run between source and sink, in order: ` + "`builtin:…`" + ` specs and ` + "`grpc://HOST:PORT`" + ` services as ` + "`run --transform`" + ` takes them, or ` + "`{grpc: {url: …, tls_ca: …, token_file: …}}`" + ` for a service with TLS or a token |
| ` + "`plain_views`" + ` | ` + "`true`" + `: copy binary_view and string_view columns (a Kafka source's key and value) into plain binary and string ones before the sink, for a sink whose type map has no view types (the PostgreSQL sink maps binary_view and utf8_view itself and does not need it); default ` + "`false`" + ` |


`)
	b.WriteString(strings.ReplaceAll(configDocProse, "§", "`"))
	table := func(d *decl) {
		b.WriteString("| key | type | default | description |\n|---|---|---|---|\n")
		if d.loc != "" {
			fmt.Fprintf(&b, "| `%s` | location | | %s |\n", d.loc, escapeCell(d.locDoc))
		}
		for _, f := range d.fields {
			typ := strings.ToLower(f.Type.String())
			switch f.Type {
			case spec.Enum:
				typ = strings.Join(f.Enum, " \\| ")
			case spec.Int:
				typ = "integer"
			}
			def := f.Default
			if def != "" {
				def = "`" + def + "`"
			}
			doc := escapeCell(f.Doc)
			if f.Secret {
				doc += " **(secret)**"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Name, typ, def, doc)
		}
		if d.extra != nil {
			keys := make([]string, len(d.extra.Keys))
			for i, k := range d.extra.Keys {
				keys[i] = "`" + k + "`"
				if slices.Contains(d.extra.Secret, k) {
					keys[i] += " (secret)"
				}
			}
			fmt.Fprintf(&b, "\nAlso %s: %s.\n", escapeCell(d.extra.Doc), strings.Join(keys, ", "))
		}
		b.WriteString("\n")
	}
	b.WriteString(`## Listen addresses (flightline serve)

` + "`flightline serve`" + ` serves each source and sink (and dead-letter sink) that the
` + "`listen`" + ` section gives an address, as ` + "`serve-source`" + ` and ` + "`serve-sink`" + ` would; ` + "`--only REF,…`" + `
serves a subset, so one file can describe a chain across hosts. An entry is
` + "`REF: HOST:PORT`" + ` or a mapping:

` + "```yaml" + `
sources:
  orders_kafka:
    kafka: {brokers: [127.0.0.1:9092], topics: [orders]}
sinks:
  lake:
    delta: {uri: /var/lib/flightline/orders}
listen:
  sources.orders_kafka: 127.0.0.1:7401
  sinks.lake: {addr: 0.0.0.0:7402, tls_cert: /etc/fl/cert.pem, tls_key: /etc/fl/key.pem, token: "${LAKE_TOKEN}"}
` + "```" + `

`)
	table(listenDecl)
	section := func(title, sec string) {
		fmt.Fprintf(&b, "## %s\n\n", title)
		kinds := kindsOf(sec)
		for _, name := range mainKinds(sec) {
			d := kinds[name]
			fmt.Fprintf(&b, "### `%s`\n\n%s. URL form: `%s`.\n\n", name, d.doc, d.form)
			table(d)
		}
	}
	b.WriteString(`## Schema sinks

A pipeline may name a schema sink (` + "`schema_sink: schema_sinks.NAME`" + `). Before the
first batch it writes, and whenever the Arrow schema it writes changes, the
table in the catalog is created or updated to match: columns and types
mapped from Arrow, the Parquet SerDe, the S3 location, partition keys. New
nullable columns are added; any other change stops the pipeline with an
error naming the column (the table is left as it was). The first kind is
` + "`glue`" + ` (the AWS Glue Data Catalog; credentials from the SDK's default chain).
The schema sink and the pipeline's sink must describe the same table, or the
pipeline refuses to start naming each difference: an ` + "`s3`" + ` sink's
` + "`partition_by`" + ` column (or ` + "`COLUMN_day`" + ` for ` + "`partition_by_day`" + `) must be
its ` + "`partition_keys`" + `, a ` + "`location`" + ` given must be where it writes, and an
existing table must have that location and those keys. The ` + "`athena`" + ` sink
kind registers its table, and its partitions, itself (docs/sinks/athena.md).
An ` + "`s3`" + ` sink with a ` + "`glue`" + ` schema sink:

` + "```yaml" + `
sources:
  orders_kafka:
    kafka: {brokers: [127.0.0.1:9092], topics: [orders]}
sinks:
  lake_s3:
    s3: {prefix: acme-lake/orders, AWS_REGION: us-east-1}
schema_sinks:
  catalog:
    glue: {database: lake, table: orders, region: us-east-1}
pipelines:
  orders:
    source: sources.orders_kafka
    sink: sinks.lake_s3
    schema_sink: schema_sinks.catalog
` + "```" + `

`)
	table(glueSchemaDecl)
	section("Sources", secSources)
	section("Sinks and dead-letter sinks", secSinks)
	return b.String()
}

func escapeCell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// configDocProse is the part of docs/config.md about commands and dead
// letters; § stands for a backtick.
const configDocProse = `
## Commands

- §flightline check§ validates the file, then opens each endpoint and asks it one
  read-only question: a source its streams (and whether the pipelines'
  streams are among them), a sink the checkpoint of each pipeline writing to
  it, a schema sink whether its table exists. One line per endpoint, §ok§ or
  §FAIL§ with the reason; non-zero exit on any failure. It never opens a writer, which would fence a running pipeline.
- §flightline config show§ prints the resolved file (variables expanded,
  defaults filled in and marked, secrets masked).
- §flightline sync [--pipeline NAME] [--once]§ runs the pipelines (one, or all)
  in this process. §--once§ reads the source's end when it starts (Kafka end
  offsets, the Delta table version, the PostgreSQL table's greatest
  (watermark, key)), stops when the sink's checkpoint covers it, exits 0 and
  logs one §pipeline sync complete§ line with rows, batches, bytes, wall time and
  the final checkpoint. Without it, sync runs until SIGINT or SIGTERM and
  stops cleanly, logging §pipeline sync stopped§ (not complete). A source
  that cannot tell its end: a remote (grpc) one is read until it ends its
  stream; any other is refused with §--once§. One pipeline's failure stops the others. With §--once§ it shows
  progress: a bar (rows and rate; rows to go and an ETA where the source
  can count what is left: Kafka, PostgreSQL, the generator) when standard error is
  a terminal, otherwise a §sync progress§ log line every §--progress-every§ (5 s)
  (§--progress auto|bar|plain|none§). With §--metrics-addr§ it also serves
  §/status§ (an HTML page refreshing every 2 s) and §/status.json§: for each
  pipeline its state, rows, rows/s over the last minute, last committed
  checkpoint and its age, lag (Kafka: the acknowledged-lag gauges), last
  error, restarts and dead letters.
- §flightline serve [--only REF,…]§ serves the entries of the §listen§ section.

Every command takes §--memory-limit auto|off|SIZE§ (default §auto§), the Go
runtime's soft memory limit: §auto§ sets it, in a process that runs a Kafka
source, to 64 MiB plus twice the fetched bytes its Kafka sources may hold
(§fetch_max_bytes§ + §max_buffered_bytes§ each: 96 MiB for one source at
defaults), and leaves it alone otherwise or when §GOMEMLIMIT§ is set; a size
(§512MiB§, §2GiB§) sets it whatever §GOMEMLIMIT§ says; §off§ removes it. The
collector then works harder as the heap nears the limit, so the process's
peak no longer depends on how long it runs; it never fails an allocation
for it (see docs/sources/kafka.md, Memory).

Every command takes §--pprof§ (off by default): with §--metrics-addr§ it also
serves the Go runtime's profiles (net/http/pprof) under §/debug/pprof/§ on that
server, e.g. §go tool pprof http://ADDR/debug/pprof/heap?gc=1§ for the live
heap; without §--metrics-addr§ it is an error. Profiles show stacks, call
sites and the command line: keep the address private.

## Dead letters

A record the Kafka source cannot decode (bad JSON, a bad Avro payload, an
unknown schema id) or whose value is over §max_value_bytes§ is a dead letter.

- Default (§deadletter: fail§): the pipeline stops with an error naming the
  record's partition, offset and reason. Nothing is dropped silently.
- §deadletter_sink: deadletter_sinks.NAME§: written to that sink (any kind; not
  the data sink) as rows of §pipeline, stage (decode|load), reason, dead_at,
  topic, partition, offset, record_time, key, value§, under the pipeline id
  §ID.deadletters§. The source hands them over before it returns the batch
  holding the neighbouring rows, and the write returns once the sink has
  committed them, so the batch that skipped a record cannot commit before
  its dead letter: a crash can repeat a dead letter, never lose one. Each
  write carries a Positions checkpoint (partition → last dead offset + 1), so
  an exactly-once sink (PostgreSQL, Delta, Kafka, dir) skips a repeat its
  checkpoint covers; an at-least-once sink (s3) rewrites the same object for
  the same checkpoint, and a repeat grouped differently after a restart may
  appear twice there, identified by topic, partition and offset.
- §deadletter: discard§: dropped, logged (§dead letters discarded§ with the count
  and the first offset and reason) and counted in
  §flightline_deadletters_total{pipeline,stage,outcome="discarded"}§ (written ones
  count with §outcome="written"§).

Sources other than Kafka do not hand over dead letters yet: a pipeline that
asks for a dead-letter sink or discard with one is refused at start.

`
