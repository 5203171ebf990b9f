package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/spec"
)

// An endpoint spec names a source or sink: a Flight URL (grpc://host:port,
// grpc+tls://host:port) for a remote endpoint, or kind:options for one that
// runs in this process, e.g.
//
//	generator:?rows=1000000&batch_rows=10000
//	dir:/var/lib/flightline/out
//
// Each kind declares its options once, as a config struct whose fields
// carry spec tags (see internal/spec); the query parser and the usage text
// derive from it. Unknown kinds and unknown options are errors.

// env is what an in-process kind may use from the command that opens it.
type env struct {
	// ctx bounds the opening (a Delta table's first read, …), not the
	// life of the endpoint.
	ctx context.Context
	log *slog.Logger
	reg prometheus.Registerer // nil: no metrics
	// deadLetters, when set, is where a source kind that can hand over
	// undecodable records sends them (a config-file pipeline's
	// deadletter_sink or deadletter: discard); nil: such records fail the
	// pipeline, or go where the kind's own options say.
	deadLetters *deadLetterRouter
}

// usager is a kind's declaration, as usage needs it.
type usager interface{ Usage() string }

type sourceKind struct {
	spec usager
	decl *decl // nil for an alias: the config file knows only the main name
	open func(e env, u *url.URL, q url.Values) (flightsrc.Source, func(), error)
}

type sinkKind struct {
	spec usager
	decl *decl
	open func(e env, u *url.URL, q url.Values) (flightsink.Sink, func(), error)
}

// decl is a kind's declaration as the config file needs it, independent
// of the kind's config type: its fields, its pass-through keys, where its
// location goes, and a check of option values with the kind's own parser.
type decl struct {
	kind   string // the spec's Kind (the URL scheme is the registry key)
	form   string
	doc    string
	fields []spec.Field
	extra  *spec.Extra
	// loc is the config-file key that holds what the URL form writes
	// between "kind:" and "?" (a path, a table URI, a DSN); locDoc says
	// what it is. Kinds that declare none get "location".
	loc, locDoc string
	// check parses q with the kind's spec, applying the same checks as
	// the URL form; errors name the option and withhold secret values.
	check func(q url.Values) error
}

func declOf[T any](s *spec.Spec[T]) *decl {
	return &decl{kind: s.Kind, form: s.Form, doc: s.Doc, fields: s.Fields, extra: s.Extra,
		loc: "location", locDoc: "what the URL form writes between KIND: and ?",
		check: func(q url.Values) error { _, err := s.Parse(q); return err }}
}

// at names the config-file key of a source kind's location.
func (k sourceKind) at(key, doc string) sourceKind {
	if k.decl != nil {
		d := *k.decl
		d.loc, d.locDoc = key, doc
		k.decl = &d
	}
	return k
}

// at names the config-file key of a sink kind's location.
func (k sinkKind) at(key, doc string) sinkKind {
	if k.decl != nil {
		d := *k.decl
		d.loc, d.locDoc = key, doc
		k.decl = &d
	}
	return k
}

// sourceOf registers a source kind: its options parse into a T by s, and
// open builds the source from them.
func sourceOf[T any](s *spec.Spec[T], open func(e env, u *url.URL, cfg T) (flightsrc.Source, func(), error)) sourceKind {
	return sourceKind{spec: s, decl: declOf(s), open: func(e env, u *url.URL, q url.Values) (flightsrc.Source, func(), error) {
		cfg, err := s.Parse(q)
		if err != nil {
			return nil, nil, err
		}
		return open(e, u, cfg)
	}}
}

// sinkOf registers a sink kind, like sourceOf.
func sinkOf[T any](s *spec.Spec[T], open func(e env, u *url.URL, cfg T) (flightsink.Sink, func(), error)) sinkKind {
	return sinkKind{spec: s, decl: declOf(s), open: func(e env, u *url.URL, q url.Values) (flightsink.Sink, func(), error) {
		cfg, err := s.Parse(q)
		if err != nil {
			return nil, nil, err
		}
		return open(e, u, cfg)
	}}
}

// alias is the usage of a second scheme for the same kind.
type alias string

func (a alias) Usage() string { return "  " + string(a) + "\n" }

// noOptions is the config of a kind without options.
type noOptions struct{}

// generatorConfig is the generator: kind.
type generatorConfig struct {
	Rows      int64         `spec:"rows" default:"0" doc:"rows in the stream; 0: unbounded"`
	BatchRows int           `spec:"batch_rows" default:"10000" doc:"rows per batch"`
	Stream    string        `spec:"stream" default:"orders" doc:"the stream's name"`
	Interval  time.Duration `spec:"interval" default:"0s" doc:"pause before each batch (simulates a slow source)"`
}

var generatorSpec = spec.New[generatorConfig]("generator", "generator:?rows=N&batch_rows=N&…",
	"deterministic synthetic orders", nil)

func openGenerator(_ env, _ *url.URL, c generatorConfig) (flightsrc.Source, func(), error) {
	g, err := flightsrc.NewGenerator(flightsrc.GenRows(c.Rows), flightsrc.GenBatchRows(c.BatchRows),
		flightsrc.GenStream(c.Stream), flightsrc.GenInterval(c.Interval))
	return g, func() {}, err
}

var (
	dirSpec    = spec.New[noOptions]("dir", "dir:PATH", "exactly-once Arrow IPC files under PATH/<target>/ (local disk)", nil)
	memorySpec = spec.New[noOptions]("memory", "memory:", "exactly-once for the life of the process; for tests", nil)
	nullSpec   = spec.New[noOptions]("null", "null:", "discards rows, keeps checkpoints in memory; for benchmarks", nil)
	// grpcSpec is the remote form of every source and sink: a Flight URL.
	// Its security settings are flags (--source-tls-ca, --sink-token-file,
	// …), not query keys, so secrets stay out of the URL.
	grpcSpec = spec.New[noOptions]("grpc", "grpc://HOST:PORT, grpc+tls://HOST:PORT",
		"a remote Flightline endpoint (serve-source, serve-sink, or any server speaking docs/protocol.md)", nil)
)

// location returns the part of an opaque URL after "kind:" (or its path).
func location(u *url.URL) string {
	if u.Opaque != "" {
		return u.Opaque
	}
	return u.Path
}

func openDir(_ env, u *url.URL, _ noOptions) (flightsink.Sink, func(), error) {
	path := location(u)
	if path == "" {
		return nil, nil, fmt.Errorf("dir: want dir:PATH")
	}
	d, err := flightsink.NewDir(path, nil)
	return d, func() {}, err
}

var sourceKinds = map[string]sourceKind{
	"generator": sourceOf(generatorSpec, openGenerator),
}

var sinkKinds = map[string]sinkKind{
	"dir": sinkOf(dirSpec, openDir).at("path", "the directory"),
	"memory": sinkOf(memorySpec, func(env, *url.URL, noOptions) (flightsink.Sink, func(), error) {
		m := flightsink.NewMemory()
		return m, m.Release, nil
	}),
	"null": sinkOf(nullSpec, func(env, *url.URL, noOptions) (flightsink.Sink, func(), error) {
		return flightsink.NewNull(), func() {}, nil
	}),
}

func isRemote(spec string) bool {
	return strings.HasPrefix(spec, "grpc://") || strings.HasPrefix(spec, "grpc+tls://") || strings.HasPrefix(spec, "grpc+tcp://")
}

func parseSpec(spec string) (*url.URL, url.Values, error) {
	u, err := url.Parse(spec)
	if err != nil || u.Scheme == "" {
		return nil, nil, fmt.Errorf("%q is not an endpoint: want grpc://host:port or kind:options", spec)
	}
	return u, u.Query(), nil
}

// checkRemote refuses query keys on a Flight URL, which has none.
func checkRemote(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not an endpoint URL: %w", raw, err)
	}
	_, err = grpcSpec.Parse(u.Query())
	return err
}

// probeRemote checks a remote endpoint's transport before a pipeline uses
// it (endpoint.Probe): a configuration mistake (plaintext against TLS, an
// unknown CA) is an error naming the fix, which retrying would never
// cure; a server that does not answer yet is a warning, and the pipeline
// retries until it does.
func probeRemote(e env, what, raw string, cc flightline.ClientConfig, caFlag string) error {
	ctx := e.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := endpoint.Probe(ctx, raw, cc, caFlag)
	if errors.Is(err, flightline.ErrInvalidInput) {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err != nil && e.log != nil {
		e.log.Warn(what+" does not answer at start; retrying until it does", "err", err)
	}
	return nil
}

func openSource(e env, raw string, cc flightsrc.ClientConfig) (flightsrc.Source, func(), error) {
	if isRemote(raw) {
		if err := checkRemote(raw); err != nil {
			return nil, nil, err
		}
		if err := probeRemote(e, "--source "+raw, raw, cc, "--source-tls-ca"); err != nil {
			return nil, nil, err
		}
		c, err := flightsrc.Dial(raw, cc)
		if err != nil {
			return nil, nil, err
		}
		return c, func() { c.Close() }, nil
	}
	u, q, err := parseSpec(raw)
	if err != nil {
		return nil, nil, err
	}
	k, ok := sourceKinds[u.Scheme]
	if !ok {
		return nil, nil, fmt.Errorf("unknown source kind %q; known: %s", u.Scheme, kinds(sourceKinds))
	}
	return k.open(e, u, q)
}

func openSink(e env, raw string, cc flightsink.ClientConfig) (flightsink.Sink, func(), error) {
	if isRemote(raw) {
		if err := checkRemote(raw); err != nil {
			return nil, nil, err
		}
		if err := probeRemote(e, "--sink "+raw, raw, cc, "--sink-tls-ca"); err != nil {
			return nil, nil, err
		}
		c, err := flightsink.Dial(raw, cc)
		if err != nil {
			return nil, nil, err
		}
		return c, func() { c.Close() }, nil
	}
	u, q, err := parseSpec(raw)
	if err != nil {
		return nil, nil, err
	}
	k, ok := sinkKinds[u.Scheme]
	if !ok {
		return nil, nil, fmt.Errorf("unknown sink kind %q; known: %s", u.Scheme, kinds(sinkKinds))
	}
	return k.open(e, u, q)
}

func kinds[V any](m map[string]V) string {
	return strings.Join(sortedKeys(m), ", ")
}

// kindUsage is the part of every command's --help that lists the kinds,
// generated from their specs.
func kindUsage() string {
	var b strings.Builder
	b.WriteString("Endpoints are written kind:LOCATION?KEY=VALUE&…; unknown kinds and keys are errors.\n")
	b.WriteString("\nRemote sources and sinks:\n")
	b.WriteString(grpcSpec.Usage())
	b.WriteString(kindSection("Sources (in-process kinds)", usagers(sourceKinds)))
	b.WriteString(kindSection("Sinks (in-process kinds)", usagers(sinkKinds)))
	return b.String()
}

// kindSection is the usage of every kind of one side, under a title.
func kindSection(title string, kinds map[string]usager) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s, written kind:LOCATION?KEY=VALUE&…:\n", title)
	for _, k := range sortedKeys(kinds) {
		b.WriteString(kinds[k].Usage())
	}
	return b.String()
}

// usagers are the usage writers of a side's kinds.
func usagers[K sourceKind | sinkKind](kinds map[string]K) map[string]usager {
	out := make(map[string]usager, len(kinds))
	for name, k := range kinds {
		switch k := any(k).(type) {
		case sourceKind:
			out[name] = k.spec
		case sinkKind:
			out[name] = k.spec
		}
	}
	return out
}

// kindSummary is run's list of kinds: one line each; 'flightline kinds'
// has their keys.
func kindSummary() string {
	var b strings.Builder
	b.WriteString("\n--source and --sink: a Flight URL (grpc://HOST:PORT, grpc+tls://HOST:PORT) or an in-process kind:\n")
	for _, side := range []struct {
		title string
		kinds map[string]usager
	}{{"sources", usagers(sourceKinds)}, {"sinks", usagers(sinkKinds)}} {
		fmt.Fprintf(&b, "  %s: ", side.title)
		var names []string
		for _, k := range sortedKeys(side.kinds) {
			if _, isAlias := side.kinds[k].(alias); !isAlias {
				names = append(names, k+":")
			}
		}
		b.WriteString(strings.Join(names, " ") + "\n")
	}
	b.WriteString("Run 'flightline kinds' (or 'flightline serve-source --help', 'serve-sink --help') for every kind's keys.\n")
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// OpenSource opens the source raw names: a Flight URL (grpc://HOST:PORT,
// grpc+tls://HOST:PORT), dialled with cc after a probe of its transport
// (a mismatch, such as plaintext against TLS, is an error naming the flag
// to fix; a server that does not answer yet is a warning on log), or an
// in-process kind:LOCATION?KEY=VALUE&… of the registry. ctx bounds the
// opening, not the life of the source; log (nil: none) and reg (nil: no
// metrics) go to the kind. The returned function releases the source.
// Unknown kinds and unknown keys are errors.
func OpenSource(ctx context.Context, log *slog.Logger, reg prometheus.Registerer, raw string, cc flightline.ClientConfig) (flightsrc.Source, func(), error) {
	return openSource(env{ctx: ctx, log: log, reg: reg}, raw, cc)
}

// OpenSink opens the sink raw names, as OpenSource opens a source.
func OpenSink(ctx context.Context, log *slog.Logger, reg prometheus.Registerer, raw string, cc flightline.ClientConfig) (flightsink.Sink, func(), error) {
	return openSink(env{ctx: ctx, log: log, reg: reg}, raw, cc)
}

// IsRemote reports whether spec is a Flight URL rather than an in-process
// kind.
func IsRemote(spec string) bool { return isRemote(spec) }

// SourceKinds and SinkKinds are the registered kinds' names, sorted and
// comma-separated, for errors that list them.
func SourceKinds() string { return kinds(sourceKinds) }

// SinkKinds: see SourceKinds.
func SinkKinds() string { return kinds(sinkKinds) }

// KindUsage is every kind with its keys, generated from the kinds' specs
// (`flightline kinds`).
func KindUsage() string { return kindUsage() }

// SourceUsage and SinkUsage are KindUsage's part for one side, which
// serve-source --help and serve-sink --help print.
func SourceUsage() string { return kindSection("Sources (in-process kinds)", usagers(sourceKinds)) }

// SinkUsage: see SourceUsage.
func SinkUsage() string { return kindSection("Sinks (in-process kinds)", usagers(sinkKinds)) }

// KindSummary is one line of kind names per side, for run --help.
func KindSummary() string { return kindSummary() }
