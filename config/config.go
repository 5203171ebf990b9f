package config

// The config file, flightline.yml, names sources, sinks, dead-letter sinks
// and the pipelines between them:
//
//	sources:
//	  orders:
//	    kafka: {brokers: [127.0.0.1:9092], topics: [orders], format: json, schema: orders.avsc}
//	sinks:
//	  warehouse:
//	    postgres: {dsn: postgres://loader@db/analytics, table: raw.orders, password: ${PGPASS}}
//	  remote: grpc+tls://sink.example:7402
//	pipelines:
//	  orders:
//	    source: sources.orders
//	    sink: sinks.warehouse
//
// An endpoint is either a string, written exactly as on the command line
// (a kind URL or a Flight URL), or a mapping with one key, the kind, whose
// value maps the kind's options to values. The options are those the
// kind's spec declares (internal/spec), so a kind registered with
// sourceOf or sinkOf appears here with no code of its own: its fields,
// its pass-through keys, and the key of its location (at). The values
// are checked by the kind's own parser, the same as in a URL. Nothing
// here knows a particular kind except grpc, the remote form, whose TLS
// and token settings are flags on the command line and fields here.

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/spec"
)

// DefaultFile is the config file the commands read when --config is not
// given.
const DefaultFile = "flightline.yml"

// The sections of the file.
const (
	secSources     = "sources"
	secSinks       = "sinks"
	secDeadLetters = "deadletter_sinks"
	secPipelines   = "pipelines"
	secListen      = "listen"
	secSchemaSinks = "schema_sinks"
)

var sections = []string{secSources, secSinks, secDeadLetters, secSchemaSinks, secPipelines, secListen}

// listenConfig is where `flightline serve` serves one endpoint of the
// file, and how it secures it: the serve-source and serve-sink flags.
type listenConfig struct {
	Addr      string        `spec:"addr" doc:"HOST:PORT to listen on (required)"`
	Cert      string        `spec:"tls_cert" doc:"TLS certificate file (enables TLS)"`
	Key       string        `spec:"tls_key" doc:"TLS private key file"`
	ClientCA  string        `spec:"tls_client_ca" doc:"CA file clients' certificates must chain to (enables mTLS)"`
	Token     string        `spec:"token" secret:"true" doc:"bearer token clients must send; write it ${VAR}"`
	TokenFile string        `spec:"token_file" doc:"file holding the bearer token clients must send"`
	Heartbeat time.Duration `spec:"heartbeat" default:"5s" doc:"sources: send a heartbeat after this long without data (0 disables)"`
}

var listenSpec = spec.New[listenConfig]("listen", "listen: {REF: HOST:PORT} or {REF: {addr: HOST:PORT, …}}",
	"where flightline serve serves an endpoint of the file", nil)

// listenDecl declares the keys of a listen entry.
var listenDecl = func() *decl { d := declOf(listenSpec); d.loc, d.locDoc = "", ""; return d }()

// grpcFileConfig is the remote kind in the config file: a Flight URL and
// the security settings the command line takes as --source-tls-ca, ….
type grpcFileConfig struct {
	URL        string `spec:"url" doc:"grpc://HOST:PORT or grpc+tls://HOST:PORT (required)"`
	CA         string `spec:"tls_ca" doc:"CA file to verify the endpoint (grpc+tls)"`
	Cert       string `spec:"tls_cert" doc:"client certificate for mTLS"`
	Key        string `spec:"tls_key" doc:"client key for mTLS"`
	ServerName string `spec:"tls_server_name" doc:"override the server name checked in its certificate"`
	Token      string `spec:"token" secret:"true" doc:"bearer token to send; write it ${VAR}"`
	TokenFile  string `spec:"token_file" doc:"file holding the bearer token to send"`
}

var grpcFileSpec = spec.New[grpcFileConfig]("grpc", "grpc: {url: grpc+tls://HOST:PORT, …}",
	"a remote Flightline endpoint (serve, serve-source, serve-sink, or any server speaking docs/protocol.md)", nil)

// grpcDecl is the remote kind's declaration; it has no location key.
var grpcDecl = func() *decl { d := declOf(grpcFileSpec); d.loc, d.locDoc = "", ""; return d }()

// File is a loaded config file: every ${VAR} expanded, every key known,
// every option value checked by its kind's parser, every pipeline's
// references resolved. Load and Parse make one; it is not changed after,
// so its methods may run concurrently.
type File struct {
	path      string
	sources   map[string]*endpointConf
	sinks     map[string]*endpointConf
	deadSinks map[string]*endpointConf
	pipelines map[string]*pipelineConf
	// listen maps an endpoint to where serve serves it.
	listen map[*endpointConf]listenConfig
	// schemaSinks are the catalogs pipelines register their schemas in.
	schemaSinks map[string]*schemaSinkConf
}

// endpointConf is one source or sink of the file.
type endpointConf struct {
	section, name string
	line          int
	kind          string // the registry key, or "grpc"
	decl          *decl
	loc           string     // the location ("" when none)
	q             url.Values // the options, as a URL query would hold them
}

func (e *endpointConf) ref() string { return e.section + "." + e.name }

func (e *endpointConf) remote() bool { return e.kind == "grpc" }

// secret reports whether option key of e holds a secret.
func (e *endpointConf) secret(key string) bool {
	for _, f := range e.decl.fields {
		if f.Name == key {
			return f.Secret
		}
	}
	return e.decl.extra != nil && slices.Contains(e.decl.extra.Secret, key)
}

// pipelineConf is one pipeline of the file.
type pipelineConf struct {
	name       string
	line       int
	id         string // the sink's checkpoint key; default: the name
	source     *endpointConf
	sink       *endpointConf
	deadLetter *endpointConf // nil: none
	discard    bool          // deadletter: discard
	stream     string        // "" : the source's only stream
	target     string
	window     int
	attempts   int
	plainViews bool            // copy view columns to plain ones before the sink
	schemaSink *schemaSinkConf // nil: none
	transforms []transformConf // between source and sink, in order
	local      bool            // no sink: in the file: sink is the embedded local table (local.go)
}

// transformConf is one stage of a pipeline's transforms: a built-in, or a
// DoExchange service.
type transformConf struct {
	spec   string        // builtin:…, or the service's grpc:// URL
	remote *endpointConf // the service's url, TLS and token; nil for a built-in
	bare   bool          // remote, written as a bare URL (no TLS or token keys)
}

// pipelineKeys are the keys of a pipeline entry.
var pipelineKeys = []string{"source", "sink", "deadletter_sink", "deadletter", "schema_sink", "id", "stream", "target", "window", "max_attempts", "plain_views", "transforms"}

// configError is an error at a place in the file.
type configError struct {
	file string
	line int
	msg  string
}

func (e *configError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg)
	}
	return fmt.Sprintf("%s: %s", e.file, e.msg)
}

func (e *configError) Unwrap() error { return flightline.ErrInvalidInput }

// loader carries what loading one file needs.
type loader struct {
	path   string
	lookup func(string) (string, bool) // the environment
}

func (l *loader) errf(n *yaml.Node, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &configError{file: l.path, line: line, msg: fmt.Sprintf(format, args...)}
}

// unknownKey is the error for key k at n, naming the nearest of valid.
func (l *loader) unknownKey(n *yaml.Node, where, k string, valid []string) error {
	if near := spec.Nearest(k, valid); near != "" {
		return l.errf(n, "%s: unknown key %q; did you mean %q?", where, k, near)
	}
	return l.errf(n, "%s: unknown key %q; valid keys: %s", where, k, strings.Join(valid, ", "))
}

// loadConfig reads and checks the config file at path, expanding ${VAR}
// from lookup (os.LookupEnv in the command).
func Load(path string, lookup func(string) (string, bool)) (*File, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("config: %w: give --config FILE, or write %s here (README.md, A first run on this machine; every key: docs/config.md)", err, path)
	}
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(path, b, lookup)
}

// Parse checks the config file content b as Load does; path names it in
// errors and is where relative paths of the file are resolved from.
func Parse(path string, b []byte, lookup func(string) (string, bool)) (*File, error) {
	l := &loader{path: path, lookup: lookup}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		msg := fmt.Sprintf("not valid YAML: %v", err)
		if line := unquotedFlowVar(b); line > 0 {
			msg += fmt.Sprintf(" (line %d has an unquoted ${…} in a {…} mapping: quote values that contain ${…} in a {…} mapping, as in password: \"${VAR}\")", line)
		}
		return nil, &configError{file: path, msg: msg}
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, l.errf(&doc, "want a mapping with the sections %s", strings.Join(sections, ", "))
	}
	c := &File{path: path, sources: map[string]*endpointConf{}, sinks: map[string]*endpointConf{},
		deadSinks: map[string]*endpointConf{}, pipelines: map[string]*pipelineConf{}, schemaSinks: map[string]*schemaSinkConf{}}
	root := doc.Content[0]
	var pipelines, listen *yaml.Node
	err := l.eachKey(root, "the file", func(k, v *yaml.Node) error {
		switch k.Value {
		case secSources:
			return l.endpoints(v, secSources, c.sources)
		case secSinks:
			return l.endpoints(v, secSinks, c.sinks)
		case secDeadLetters:
			return l.endpoints(v, secDeadLetters, c.deadSinks)
		case secPipelines:
			pipelines = v
			return nil
		case secSchemaSinks:
			return l.eachKey(v, secSchemaSinks, func(k, v *yaml.Node) error {
				ss, err := l.schemaSink(k, v)
				if err == nil {
					c.schemaSinks[ss.name] = ss
				}
				return err
			})
		case secListen:
			listen = v
			return nil
		}
		return l.unknownKey(k, "the file", k.Value, sections)
	})
	if err != nil {
		return nil, err
	}
	if pipelines != nil {
		if err := l.eachKey(pipelines, secPipelines, func(k, v *yaml.Node) error {
			p, err := l.pipeline(c, k, v)
			if err != nil {
				return err
			}
			c.pipelines[p.name] = p
			return nil
		}); err != nil {
			return nil, err
		}
	}
	c.listen = map[*endpointConf]listenConfig{}
	if listen != nil {
		if err := l.eachKey(listen, secListen, func(k, v *yaml.Node) error {
			return l.listenEntry(c, k, v)
		}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// flowVar finds a value starting with ${ inside a {…} flow mapping, where
// YAML reads the { as the start of a nested mapping.
var flowVar = regexp.MustCompile(`\{[^#]*:\s*\$\{`)

// unquotedFlowVar returns the first line (from 1) of b with an unquoted
// ${…} value inside a {…} mapping, or 0.
func unquotedFlowVar(b []byte) int {
	for i, line := range strings.Split(string(b), "\n") {
		if flowVar.MatchString(line) {
			return i + 1
		}
	}
	return 0
}

// eachKey calls f for each key of mapping n, refusing anything else and
// keys given twice.
func (l *loader) eachKey(n *yaml.Node, where string, f func(k, v *yaml.Node) error) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil // an empty section
	}
	if n.Kind != yaml.MappingNode {
		return l.errf(n, "%s: want a mapping", where)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return l.errf(k, "%s: keys are names", where)
		}
		if seen[k.Value] {
			return l.errf(k, "%s: %q is given twice", where, k.Value)
		}
		seen[k.Value] = true
		if v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		if err := f(k, v); err != nil {
			return err
		}
	}
	return nil
}

var varRef = regexp.MustCompile(`\$\$|\$\{([^}]*)\}`)

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expand replaces each ${VAR} in the scalar n with the variable's value;
// $$ is a literal $. A variable that is not set is an error naming it.
func (l *loader) expand(n *yaml.Node, where string) (string, error) {
	var err error
	out := varRef.ReplaceAllStringFunc(n.Value, func(m string) string {
		if m == "$$" {
			return "$"
		}
		name := m[2 : len(m)-1]
		if !varName.MatchString(name) {
			if err == nil {
				err = l.errf(n, "%s: %q is not a variable reference: want ${NAME}", where, m)
			}
			return ""
		}
		v, ok := l.lookup(name)
		if !ok && err == nil {
			err = l.errf(n, "%s: environment variable %s is not set", where, name)
		}
		return v
	})
	return out, err
}

// checkSecurityValue refuses an empty token or TLS setting (securityKeys)
// of a grpc endpoint or a listen entry: written empty, or a ${VAR} that
// expands to nothing, it would turn authentication or TLS off.
func (l *loader) checkSecurityValue(n *yaml.Node, where, key, val string) error {
	if !securityKeys[key] || strings.TrimSpace(val) != "" {
		return nil
	}
	if m := varRef.FindStringSubmatch(n.Value); m != nil && m[1] != "" {
		return l.errf(n, "%s.%s: ${%s} expands to nothing: set %s, or remove the key (an empty %s would turn %s off)", where, key, m[1], m[1], key, securityWhat(key))
	}
	return l.errf(n, "%s.%s is empty: give a value, or remove the key (an empty %s would turn %s off)", where, key, key, securityWhat(key))
}

func securityWhat(key string) string {
	if strings.HasPrefix(key, "token") {
		return "authentication"
	}
	return "TLS"
}

// scalar returns the expanded value of n, which must be a scalar.
func (l *loader) scalar(n *yaml.Node, where string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", l.errf(n, "%s: want a single value", where)
	}
	if n.Tag == "!!null" {
		return "", l.errf(n, "%s: no value", where)
	}
	return l.expand(n, where)
}

func (l *loader) endpoints(n *yaml.Node, section string, into map[string]*endpointConf) error {
	return l.eachKey(n, section, func(k, v *yaml.Node) error {
		e, err := l.endpoint(section, k, v)
		if err != nil {
			return err
		}
		into[e.name] = e
		return nil
	})
}

// kindsOf returns the registry of a section's kinds.
func kindsOf(section string) map[string]*decl {
	out := map[string]*decl{"grpc": grpcDecl}
	if section == secPipelines { // a pipeline's remote transforms
		return out
	}
	if section == secSources {
		for name, k := range sourceKinds {
			if k.decl != nil {
				out[name] = k.decl
			}
		}
		return out
	}
	for name, k := range sinkKinds {
		if k.decl != nil {
			out[name] = k.decl
		}
	}
	return out
}

// mainKinds are a section's kinds without the aliases (postgresql for
// postgres), for suggestions and the reference.
func mainKinds(section string) []string {
	if section == secPipelines {
		return []string{"grpc"}
	}
	var out []string
	add := func(name string, s usager, d *decl) {
		if _, isAlias := s.(alias); !isAlias && d != nil {
			out = append(out, name)
		}
	}
	if section == secSources {
		for name, k := range sourceKinds {
			add(name, k.spec, k.decl)
		}
	} else {
		for name, k := range sinkKinds {
			add(name, k.spec, k.decl)
		}
	}
	sort.Strings(out)
	return append(out, "grpc")
}

func (l *loader) endpoint(section string, k, v *yaml.Node) (*endpointConf, error) {
	e := &endpointConf{section: section, name: k.Value, line: k.Line, q: url.Values{}}
	where := section + "." + e.name
	kinds := kindsOf(section)
	if v.Kind == yaml.ScalarNode {
		raw, err := l.scalar(v, where)
		if err != nil {
			return nil, err
		}
		if err := l.fromURL(e, v, raw, kinds); err != nil {
			return nil, err
		}
		return e, nil
	}
	if v.Kind != yaml.MappingNode || len(v.Content) != 2 {
		return nil, l.errf(v, "%s: want a URL or a mapping with one key, the kind (%s)", where, strings.Join(mainKinds(section), ", "))
	}
	kn, fields := v.Content[0], v.Content[1]
	d, ok := kinds[kn.Value]
	if !ok {
		valid := mainKinds(section)
		if near := spec.Nearest(kn.Value, valid); near != "" {
			return nil, l.errf(kn, "%s: unknown kind %q; did you mean %q? (known: %s)", where, kn.Value, near, strings.Join(valid, ", "))
		}
		return nil, l.errf(kn, "%s: unknown kind %q (known: %s)", where, kn.Value, strings.Join(valid, ", "))
	}
	e.kind, e.decl = kn.Value, d
	where += "." + e.kind
	valid := d.keys()
	err := l.eachKey(fields, where, func(fk, fv *yaml.Node) error {
		key := fk.Value
		if key == d.loc && d.loc != "" {
			loc, err := l.scalar(fv, where+"."+key)
			e.loc = loc
			return err
		}
		f, isField := d.field(key)
		if !isField && !(d.extra != nil && slices.Contains(d.extra.Keys, key)) {
			return l.unknownKey(fk, where, key, valid)
		}
		var raw string
		if isField && f.Type == spec.List && fv.Kind == yaml.SequenceNode {
			var items []string
			for _, it := range fv.Content {
				s, err := l.scalar(it, where+"."+key)
				if err != nil {
					return err
				}
				if strings.Contains(s, ",") {
					return l.errf(it, "%s.%s: %q: a list item cannot hold a comma", where, key, s)
				}
				items = append(items, s)
			}
			raw = strings.Join(items, ",")
		} else {
			s, err := l.scalar(fv, where+"."+key)
			if err != nil {
				return err
			}
			raw = s
		}
		if err := l.checkSecurityValue(fv, where, key, raw); err != nil {
			return err
		}
		e.q.Set(key, raw)
		if err := d.check(url.Values{key: {raw}}); err != nil {
			return l.errf(fv, "%s: %s", where, reason(err))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if e.remote() {
		if e.q.Get("url") == "" {
			return nil, l.errf(kn, "%s: url is required", where)
		}
		if !isRemote(e.q.Get("url")) {
			return nil, l.errf(kn, "%s: url=%q: want grpc://HOST:PORT or grpc+tls://HOST:PORT", where, e.q.Get("url"))
		}
		if err := checkRemote(e.q.Get("url")); err != nil {
			return nil, l.errf(kn, "%s: %s", where, reason(err))
		}
		return e, nil
	}
	// A location written as the kind's own URL (a PostgreSQL DSN) may
	// carry options in its query: they join the others, checked alike.
	if u, err := url.Parse(e.loc); err == nil && u.RawQuery != "" && kinds[u.Scheme] == d {
		for key, vs := range u.Query() {
			if _, dup := e.q[key]; dup {
				return nil, l.errf(kn, "%s: %s is given both in %s and as a key", where, key, d.loc)
			}
			if !d.known(key) {
				return nil, l.unknownKey(kn, where+"."+d.loc, key, valid)
			}
			e.q[key] = vs
		}
		if err := d.check(e.q); err != nil {
			return nil, l.errf(kn, "%s: %s", where, reason(err))
		}
		u.RawQuery = ""
		e.loc = u.String()
	}
	return e, nil
}

// fromURL fills e from an endpoint written as on the command line.
func (l *loader) fromURL(e *endpointConf, n *yaml.Node, raw string, kinds map[string]*decl) error {
	where := e.ref()
	if isRemote(raw) {
		if err := checkRemote(raw); err != nil {
			return l.errf(n, "%s: %s", where, reason(err))
		}
		e.kind, e.decl = "grpc", grpcDecl
		e.q.Set("url", raw)
		return nil
	}
	u, q, err := parseSpec(raw)
	if err != nil {
		return l.errf(n, "%s: %s", where, reason(err))
	}
	d, ok := kinds[u.Scheme]
	if !ok {
		return l.errf(n, "%s: unknown kind %q (known: %s)", where, u.Scheme, strings.Join(mainKinds(e.section), ", "))
	}
	if err := d.check(q); err != nil {
		return l.errf(n, "%s: %s", where, reason(err))
	}
	e.kind, e.decl, e.q = u.Scheme, d, q
	if strings.HasPrefix(raw, u.Scheme+"://") {
		u.RawQuery = ""
		e.loc = u.String()
	} else {
		e.loc = location(u)
	}
	return nil
}

// fields' names, the extra keys and the location key: what may appear
// under the kind.
func (d *decl) keys() []string {
	var out []string
	if d.loc != "" {
		out = append(out, d.loc)
	}
	for _, f := range d.fields {
		out = append(out, f.Name)
	}
	if d.extra != nil {
		out = append(out, d.extra.Keys...)
	}
	return out
}

func (d *decl) field(name string) (spec.Field, bool) {
	for _, f := range d.fields {
		if f.Name == name {
			return f, true
		}
	}
	return spec.Field{}, false
}

func (d *decl) known(key string) bool {
	_, ok := d.field(key)
	return ok || (d.extra != nil && slices.Contains(d.extra.Keys, key))
}

// transforms reads a pipeline's transforms: a list whose items are
// builtin:… specs, grpc:// URLs, or {grpc: {url: …, tls_ca: …, token: …}}
// entries — the same as run's --transform flags, with TLS and a token per
// service.
func (l *loader) transforms(n *yaml.Node, where string) ([]transformConf, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, l.errf(n, "%s: want a list of builtin:…, grpc://HOST:PORT or {grpc: {url: …}} items", where)
	}
	var out []transformConf
	for i, it := range n.Content {
		w := fmt.Sprintf("%s[%d]", where, i)
		if it.Kind == yaml.MappingNode {
			name := strings.TrimPrefix(w, secPipelines+".")
			e, err := l.endpoint(secPipelines, &yaml.Node{Kind: yaml.ScalarNode, Value: name, Line: it.Line}, it)
			if err != nil {
				return nil, err
			}
			out = append(out, transformConf{spec: e.q.Get("url"), remote: e})
			continue
		}
		s, err := l.scalar(it, w)
		if err != nil {
			return nil, err
		}
		if isRemote(s) {
			if err := checkRemote(s); err != nil {
				return nil, l.errf(it, "%s: %s", w, reason(err))
			}
			e := &endpointConf{section: secPipelines, name: strings.TrimPrefix(w, secPipelines+"."), line: it.Line,
				kind: "grpc", decl: grpcDecl, q: url.Values{"url": {s}}}
			out = append(out, transformConf{spec: s, remote: e, bare: true})
			continue
		}
		if _, err := Builtin(s); err != nil {
			return nil, l.errf(it, "%s: %s", w, reason(err))
		}
		out = append(out, transformConf{spec: s})
	}
	return out, nil
}

// resolveRef finds "section.name" (or a bare name) in section.
func (l *loader) resolveRef(c *File, n *yaml.Node, where, section string) (*endpointConf, error) {
	ref, err := l.scalar(n, where)
	if err != nil {
		return nil, err
	}
	name := ref
	if sec, rest, ok := strings.Cut(ref, "."); ok && slices.Contains(sections, sec) {
		if sec != section {
			return nil, l.errf(n, "%s: %q: want an entry of %s", where, ref, section)
		}
		name = rest
	}
	m := map[string]map[string]*endpointConf{secSources: c.sources, secSinks: c.sinks, secDeadLetters: c.deadSinks}[section]
	if e, ok := m[name]; ok {
		return e, nil
	}
	names := sortedKeys(m)
	if near := spec.Nearest(name, names); near != "" {
		return nil, l.errf(n, "%s: %s has no %q; did you mean %q?", where, section, name, near)
	}
	return nil, l.errf(n, "%s: %s has no %q (it has: %s)", where, section, name, strings.Join(names, ", "))
}

func (l *loader) pipeline(c *File, k, v *yaml.Node) (*pipelineConf, error) {
	p := &pipelineConf{name: k.Value, line: k.Line, id: k.Value, window: 4}
	where := secPipelines + "." + p.name
	var dlMode string
	var dlNode *yaml.Node
	err := l.eachKey(v, where, func(fk, fv *yaml.Node) error {
		w := where + "." + fk.Value
		var err error
		switch fk.Value {
		case "source":
			p.source, err = l.resolveRef(c, fv, w, secSources)
		case "sink":
			p.sink, err = l.resolveRef(c, fv, w, secSinks)
		case "deadletter_sink":
			p.deadLetter, err = l.resolveRef(c, fv, w, secDeadLetters)
			dlNode = fk
		case "deadletter":
			dlMode, err = l.scalar(fv, w)
			if err == nil && dlMode != "fail" && dlMode != "discard" {
				err = l.errf(fv, "%s: %q: want fail (the default: stop with an error) or discard", w, dlMode)
			}
			dlNode = fk
		case "schema_sink":
			var ref string
			if ref, err = l.scalar(fv, w); err == nil {
				name := strings.TrimPrefix(ref, secSchemaSinks+".")
				if p.schemaSink = c.schemaSinks[name]; p.schemaSink == nil {
					err = l.errf(fv, "%s: %s has no %q (it has: %s)", w, secSchemaSinks, name, strings.Join(sortedKeys(c.schemaSinks), ", "))
				}
			}
		case "id":
			p.id, err = l.scalar(fv, w)
		case "stream":
			p.stream, err = l.scalar(fv, w)
		case "target":
			p.target, err = l.scalar(fv, w)
		case "transforms":
			p.transforms, err = l.transforms(fv, w)
		case "plain_views":
			var s string
			if s, err = l.scalar(fv, w); err == nil {
				if p.plainViews, err = strconv.ParseBool(s); err != nil {
					err = l.errf(fv, "%s: %q: want true or false", w, s)
				}
			}
		case "window", "max_attempts":
			var s string
			if s, err = l.scalar(fv, w); err == nil {
				var n int
				n, err = strconv.Atoi(s)
				switch {
				case err != nil || n < 0 || (n == 0 && fk.Value == "window"):
					err = l.errf(fv, "%s: %q: want a positive number", w, s)
				case fk.Value == "window":
					p.window = n
				default:
					p.attempts = n
				}
			}
		default:
			err = l.unknownKey(fk, where, fk.Value, pipelineKeys)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if p.source == nil {
		return nil, l.errf(k, "%s: source is required", where)
	}
	if p.sink == nil {
		if p.sink, err = localSink(c.path, p); err != nil {
			return nil, l.errf(k, "%s: %v", where, err)
		}
		p.local = true
	}
	if p.deadLetter != nil && dlMode != "" {
		return nil, l.errf(dlNode, "%s: give deadletter_sink or deadletter, not both", where)
	}
	p.discard = dlMode == "discard"
	if p.deadLetter != nil && sameEndpoint(p.deadLetter, p.sink) {
		return nil, l.errf(dlNode, "%s: the dead-letter sink %s is the data sink %s: dead letters need an endpoint of their own", where, p.deadLetter.ref(), p.sink.ref())
	}
	return p, nil
}

// sameEndpoint reports whether a and b write the same place with the
// same options.
func sameEndpoint(a, b *endpointConf) bool {
	return a.kind == b.kind && a.loc == b.loc && a.q.Encode() == b.q.Encode()
}

// ErrNoPipeline is returned when a pipeline name (--pipeline) names no
// pipeline of the file.
var ErrNoPipeline = errors.New("no such pipeline")

// Summary counts c's entries, as check's first line prints them.
func (c *File) Summary() string {
	return fmt.Sprintf("%d sources, %d sinks, %d dead-letter sinks, %d pipelines",
		len(c.sources), len(c.sinks), len(c.deadSinks), len(c.pipelines))
}

// kindURL returns the URL and the options a kind's open function takes
// for e: the location itself when it is written as the kind's own URL
// (a PostgreSQL DSN), kind:LOCATION otherwise.
func (e *endpointConf) kindURL() (*url.URL, url.Values) {
	if u, err := url.Parse(e.loc); err == nil && u.Scheme != "" && strings.HasPrefix(e.loc, u.Scheme+"://") && kindsOf(e.section)[u.Scheme] == e.decl {
		return u, e.q
	}
	return &url.URL{Scheme: e.kind, Opaque: e.loc}, e.q
}

// clientConfig is the TLS and token settings of a remote endpoint.
func (e *endpointConf) clientConfig() (flightline.ClientConfig, error) {
	g, err := grpcFileSpec.Parse(e.q)
	if err != nil {
		return flightline.ClientConfig{}, err
	}
	tok := g.Token
	if g.TokenFile != "" {
		if tok != "" {
			return flightline.ClientConfig{}, fmt.Errorf("%s: give token or token_file, not both", e.ref())
		}
		if tok, err = ReadToken(e.ref()+" token_file", g.TokenFile, ""); err != nil {
			return flightline.ClientConfig{}, err
		}
	}
	if err := CheckTLSFiles([2]string{e.ref() + " tls_ca", g.CA}, [2]string{e.ref() + " tls_cert", g.Cert}, [2]string{e.ref() + " tls_key", g.Key}); err != nil {
		return flightline.ClientConfig{}, err
	}
	return flightline.ClientConfig{CAFile: g.CA, CertFile: g.Cert, KeyFile: g.Key, ServerName: g.ServerName, Token: tok}, nil
}

// openConfSource opens source e of the file.
func openConfSource(ev env, e *endpointConf) (flightsrc.Source, func(), error) {
	if e.remote() {
		cc, err := e.clientConfig()
		if err != nil {
			return nil, nil, err
		}
		if err := probeRemote(ev, e.ref(), e.q.Get("url"), cc, e.ref()+" tls_ca"); err != nil {
			return nil, nil, err
		}
		c, err := flightsrc.Dial(e.q.Get("url"), cc)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", e.ref(), err)
		}
		return c, func() { c.Close() }, nil
	}
	u, q := e.kindURL()
	s, closeFn, err := sourceKinds[e.kind].open(ev, u, q)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", e.ref(), err)
	}
	return s, closeFn, nil
}

// openConfSink opens sink (or dead-letter sink) e of the file.
func openConfSink(ev env, e *endpointConf) (flightsink.Sink, func(), error) {
	if e.remote() {
		cc, err := e.clientConfig()
		if err != nil {
			return nil, nil, err
		}
		if err := probeRemote(ev, e.ref(), e.q.Get("url"), cc, e.ref()+" tls_ca"); err != nil {
			return nil, nil, err
		}
		c, err := flightsink.Dial(e.q.Get("url"), cc)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", e.ref(), err)
		}
		return c, func() { c.Close() }, nil
	}
	u, q := e.kindURL()
	s, closeFn, err := sinkKinds[e.kind].open(ev, u, q)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", e.ref(), err)
	}
	return s, closeFn, nil
}

// masked is what config show prints instead of a secret.
const masked = "********"

// shown returns e's location as config show prints it: a URL's password
// masked.
func (e *endpointConf) shownLoc() string {
	if u, err := url.Parse(e.loc); err == nil && u.User != nil {
		return u.Redacted()
	}
	return e.loc
}

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }

func mapping() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode} }

func put(m *yaml.Node, k string, v *yaml.Node) { m.Content = append(m.Content, str(k), v) }

// node is e as config show prints it: the kind's every option, given or
// defaulted (a comment says which), secrets masked.
func (e *endpointConf) node() *yaml.Node {
	opts := mapping()
	if e.decl.loc != "" && e.loc != "" {
		put(opts, e.decl.loc, str(e.shownLoc()))
	}
	value := func(key, raw string, list bool) *yaml.Node {
		if e.secret(key) {
			return str(masked)
		}
		if e.remote() && key == "url" {
			if u, err := url.Parse(raw); err == nil {
				return str(u.Redacted())
			}
		}
		if list {
			seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
			for _, s := range strings.Split(raw, ",") {
				seq.Content = append(seq.Content, str(s))
			}
			return seq
		}
		return str(raw)
	}
	for _, f := range e.decl.fields {
		raw, given := e.q[f.Name]
		switch {
		case given:
			put(opts, f.Name, value(f.Name, raw[len(raw)-1], f.Type == spec.List))
		case f.Default != "":
			v := value(f.Name, f.Default, f.Type == spec.List)
			v.LineComment = "default"
			put(opts, f.Name, v)
		}
	}
	if e.decl.extra != nil {
		for _, k := range e.decl.extra.Keys {
			if vs, ok := e.q[k]; ok {
				put(opts, k, value(k, vs[len(vs)-1], false))
			}
		}
	}
	m := mapping()
	put(m, e.kind, opts)
	return m
}

// Show is c as YAML, resolved: ${VAR} expanded, references and defaults
// filled in, secrets masked (`flightline config show`).
func (c *File) Show() ([]byte, error) {
	root := mapping()
	for _, sec := range []struct {
		name string
		m    map[string]*endpointConf
	}{{secSources, c.sources}, {secSinks, c.sinks}, {secDeadLetters, c.deadSinks}} {
		if len(sec.m) == 0 {
			continue
		}
		s := mapping()
		for _, name := range sortedKeys(sec.m) {
			put(s, name, sec.m[name].node())
		}
		put(root, sec.name, s)
	}
	if len(c.schemaSinks) > 0 {
		s := mapping()
		for _, name := range sortedKeys(c.schemaSinks) {
			g := c.schemaSinks[name].cfg
			m := mapping()
			for _, kv := range [][2]string{{"database", g.Database}, {"table", g.Table}, {"region", g.Region}, {"endpoint", g.Endpoint},
				{"location", g.Location}, {"partition_keys", strings.Join(g.PartitionKeys, ",")}} {
				if kv[1] != "" {
					put(m, kv[0], str(kv[1]))
				}
			}
			k := mapping()
			put(k, "glue", m)
			put(s, name, k)
		}
		put(root, secSchemaSinks, s)
	}
	if len(c.pipelines) > 0 {
		s := mapping()
		for _, name := range sortedKeys(c.pipelines) {
			p := c.pipelines[name]
			m := mapping()
			put(m, "id", str(p.id))
			put(m, "source", str(p.source.ref()))
			if !p.local {
				put(m, "sink", str(p.sink.ref()))
			}
			switch {
			case p.deadLetter != nil:
				put(m, "deadletter_sink", str(p.deadLetter.ref()))
			case p.discard:
				put(m, "deadletter", str("discard"))
			default:
				put(m, "deadletter", str("fail"))
			}
			if p.stream != "" {
				put(m, "stream", str(p.stream))
			}
			if p.target != "" {
				put(m, "target", str(p.target))
			}
			put(m, "window", str(strconv.Itoa(p.window)))
			put(m, "max_attempts", str(strconv.Itoa(p.attempts)))
			put(m, "plain_views", str(strconv.FormatBool(p.plainViews)))
			if len(p.transforms) > 0 {
				seq := &yaml.Node{Kind: yaml.SequenceNode}
				for _, t := range p.transforms {
					if t.remote != nil {
						seq.Content = append(seq.Content, t.remote.node())
					} else {
						seq.Content = append(seq.Content, str(t.spec))
					}
				}
				put(m, "transforms", seq)
			}
			if p.schemaSink != nil {
				put(m, "schema_sink", str(secSchemaSinks+"."+p.schemaSink.name))
			}
			put(s, name, m)
		}
		put(root, secPipelines, s)
	}
	if len(c.listen) > 0 {
		s := mapping()
		var refs []*endpointConf
		for e := range c.listen {
			refs = append(refs, e)
		}
		sort.Slice(refs, func(i, j int) bool { return refs[i].ref() < refs[j].ref() })
		for _, e := range refs {
			lc := c.listen[e]
			m := mapping()
			put(m, "addr", str(lc.Addr))
			for _, kv := range [][2]string{{"tls_cert", lc.Cert}, {"tls_key", lc.Key}, {"tls_client_ca", lc.ClientCA}, {"token_file", lc.TokenFile}} {
				if kv[1] != "" {
					put(m, kv[0], str(kv[1]))
				}
			}
			if lc.Token != "" {
				put(m, "token", str(masked))
			}
			put(m, "heartbeat", str(lc.Heartbeat.String()))
			put(s, e.ref(), m)
		}
		put(root, secListen, s)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s, resolved; secrets are masked\n", c.path)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}

// reason is err's text without the "invalid input" prefix, which the
// config error carries as its type.
func reason(err error) string {
	return strings.TrimPrefix(err.Error(), flightline.ErrInvalidInput.Error()+": ")
}

// listenEntry reads one entry of the listen section: an endpoint
// reference and an address, or a mapping of listenConfig's keys.
func (l *loader) listenEntry(c *File, k, v *yaml.Node) error {
	where := secListen + "." + k.Value
	sec, _, _ := strings.Cut(k.Value, ".")
	if !slices.Contains([]string{secSources, secSinks, secDeadLetters}, sec) {
		return l.errf(k, "%s: want sources.NAME, sinks.NAME or deadletter_sinks.NAME", where)
	}
	e, err := l.resolveRef(c, k, where, sec)
	if err != nil {
		return err
	}
	if e.remote() {
		return l.errf(k, "%s: %s is a remote endpoint; serve it where it runs", where, e.ref())
	}
	q := url.Values{}
	if v.Kind == yaml.ScalarNode {
		addr, err := l.scalar(v, where)
		if err != nil {
			return err
		}
		q.Set("addr", addr)
	} else if err := l.eachKey(v, where, func(fk, fv *yaml.Node) error {
		if !listenDecl.known(fk.Value) {
			return l.unknownKey(fk, where, fk.Value, listenDecl.keys())
		}
		s, err := l.scalar(fv, where+"."+fk.Value)
		if err != nil {
			return err
		}
		if err := l.checkSecurityValue(fv, where, fk.Value, s); err != nil {
			return err
		}
		q.Set(fk.Value, s)
		return nil
	}); err != nil {
		return err
	}
	lc, err := listenSpec.Parse(q)
	if err != nil {
		return l.errf(v, "%s: %s", where, reason(err))
	}
	if lc.Addr == "" {
		return l.errf(v, "%s: addr is required", where)
	}
	if lc.Token != "" && lc.TokenFile != "" {
		return l.errf(v, "%s: give token or token_file, not both", where)
	}
	c.listen[e] = lc
	return nil
}
