// Command flightline runs Flightline endpoints and pipelines.
//
//	flightline serve-source --source SPEC --listen ADDR
//	flightline serve-sink   --sink SPEC --listen ADDR
//	flightline run          --source SPEC --sink SPEC --stream S --pipeline P [--transform T]…
//	flightline serve-transform --transform builtin:… --listen ADDR
//	flightline demo
//	flightline sync         [--config flightline.yml] [--pipeline NAME] [--once]
//	flightline serve        [--config flightline.yml] [--only REF,…]
//	flightline check        [--config flightline.yml]
//	flightline config show  [--config flightline.yml]
//	flightline config doc
//	flightline config schema --json
//	flightline config apply --json < edit.json
//	flightline connect      source|sink|deadletter-sink|schema-sink KIND --name N [--pipeline P] [--KEY VALUE]…
//
// Every command takes --help.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/flightline/flightline/config"
	"github.com/flightline/flightline/coordinator"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/arrowmem"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/metrics"
)

const usage = `flightline moves Arrow record batches from sources to sinks, exactly once.

Usage:
  flightline <command> [flags]

Commands:
  serve-source   serve a source as an Arrow Flight server (DoGet)
  serve-sink     serve a sink as an Arrow Flight DoPut endpoint
  serve-transform serve built-in transforms as an Arrow Flight DoExchange endpoint
  run            run the coordinator between a source and a sink, through transforms
  demo           run a whole pipeline in this process and print what it wrote
  delta          optimize|vacuum URI: compact a Delta table's small files, or
                 delete its expired log entries and unreferenced files

With a config file (flightline.yml, or --config FILE; see docs/config.md):
  sync           run the file's pipelines (--pipeline NAME: one) in this process;
                 --once stops when the sink has what the source held at the start
  serve          serve the file's sources and sinks that have listen addresses
  check          validate the file, then reach each endpoint: one line each
  query          "SQL" over the local tables of pipelines without sink: (DuckDB);
                 --format table|json|csv, --pipeline NAME
  config show    print the resolved file, secrets masked
  config doc     print the reference of every kind's keys (docs/config.md)
  config schema  --json: every kind's keys, machine-readable
  config apply   --json: apply an edit (JSON on stdin) with the merge writer
  connect        add or update a source, sink, dead-letter or schema sink
                 in the file and link it to a pipeline

Other:
  kinds          every source and sink kind with its keys (also: help kinds)
  version        the version and commit this binary was built from (also: --version)
  help CMD       a command's flags (the same as 'flightline CMD --help')

Run 'flightline <command> --help' for a command's flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	// Count the Arrow allocator's outstanding bytes for the metrics
	// endpoint (flightline_arrow_allocated_bytes) before anything takes it.
	arrowmem.Install()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cmd, args := os.Args[1], os.Args[2:]
	err := runCommand(ctx, cmd, args, os.Stdout)
	if errors.Is(err, errUnknownCommand) {
		fmt.Fprintf(os.Stderr, "flightline: %v\n\n%s", err, usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

// errorLine is err as the command prints it: one "flightline:" prefix,
// whether or not the error starts with the sentinel's own.
func errorLine(err error) string {
	msg := err.Error()
	for strings.HasPrefix(msg, "flightline: flightline: ") {
		msg = strings.TrimPrefix(msg, "flightline: ")
	}
	if !strings.HasPrefix(msg, "flightline: ") {
		msg = "flightline: " + msg
	}
	return msg
}

// errUnknownCommand is runCommand's error for a command it does not know.
var errUnknownCommand = errors.New("unknown command")

// runCommand runs command cmd with args, writing its output (not its
// logs) to out. The tests run the documented commands through it.
func runCommand(ctx context.Context, cmd string, args []string, out io.Writer) error {
	switch cmd {
	case "serve-source":
		return serveSource(ctx, args)
	case "serve-sink":
		return serveSink(ctx, args)
	case "serve-transform":
		return serveTransform(ctx, args)
	case "run":
		return runPipeline(ctx, args)
	case "demo":
		return demoCommand(ctx, args, out)
	case "config":
		return configCommand(args, out)
	case "check":
		return checkCommand(ctx, args, out)
	case "sync":
		return syncCommand(ctx, args)
	case "query":
		return queryCommand(ctx, args, out)
	case "serve":
		return serveCommand(ctx, args)
	case "connect":
		return connectCommand(args, out)
	case "delta":
		return deltaCommand(ctx, args, out)
	case "kinds":
		if err := parse(newFlagSet("kinds", "kinds"), args); err != nil {
			return err
		}
		_, err := io.WriteString(out, config.KindUsage())
		return err
	case "version", "--version", "-version":
		_, err := fmt.Fprintln(out, versionString())
		return err
	case "help", "-h", "--help":
		switch {
		case len(args) == 0:
			_, err := fmt.Fprint(out, usage)
			return err
		case args[0] == "kinds":
			_, err := io.WriteString(out, config.KindUsage())
			return err
		case args[0] == "help" || args[0] == "-h" || args[0] == "--help":
			return fmt.Errorf("%w %q", errUnknownCommand, args[0])
		}
		old := helpOutput
		helpOutput = out
		defer func() { helpOutput = old }()
		return runCommand(ctx, args[0], append(args[1:], "--help"), out)
	}
	return fmt.Errorf("%w %q", errUnknownCommand, cmd)
}

// version is the release this binary was built as; a build may set it
// with -ldflags "-X main.version=v1.2.3". Empty: the module's version
// from the build information.
var version string

// commit is the VCS commit, for builds Go stamps none into (-buildvcs=false,
// a worktree): the Makefile sets it with -ldflags "-X main.commit=…".
var commit string

// versionString is what flightline version prints: the version, the
// module's version and the VCS commit Go stamped into the binary.
func versionString() string {
	mod, rev, when, dirty := "(unknown)", "", "", false
	goVersion := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		mod, goVersion = info.Main.Version, info.GoVersion
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if rev == "" {
		rev = commit
	}
	v := version
	if v == "" {
		v = mod
	}
	out := fmt.Sprintf("flightline %s (module github.com/flightline/flightline %s", v, mod)
	if rev != "" {
		out += ", commit " + rev
		if dirty {
			out += " with uncommitted changes"
		}
		if when != "" {
			out += " of " + when
		}
	} else {
		out += ", commit unknown: built without VCS information"
	}
	return out + ", " + goVersion + ")"
}

// logOutput receives every command's logs; tests capture it.
var logOutput io.Writer = os.Stderr

// common holds the flags every command shares.
type common struct {
	logLevel    string
	logFormat   string
	metricsAddr string
	pprof       bool
	memoryLimit string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on this address (e.g. 127.0.0.1:9464); empty disables")
	fs.BoolVar(&c.pprof, "pprof", false, "also serve the Go runtime's profiles (net/http/pprof) under /debug/pprof/ on --metrics-addr; they expose internals (stacks, heap contents' call sites, the command line): keep the address private")
	fs.StringVar(&c.memoryLimit, "memory-limit", "auto", "the Go runtime's soft memory limit: auto (from the Kafka sources' fetch buffers, unless GOMEMLIMIT is set), off, or a size such as 512MiB")
}

func (c *common) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var log *slog.Logger
	switch c.logFormat {
	case "text":
		log = slog.New(slog.NewTextHandler(w, opts))
	case "json":
		log = slog.New(slog.NewJSONHandler(w, opts))
	default:
		return nil, fmt.Errorf("--log-format must be text or json, got %q", c.logFormat)
	}
	// Every command makes its logger first: the process's memory limit
	// is applied here too (config.SetMemoryLimit).
	if err := config.SetMemoryLimit(c.memoryLimit, log); err != nil {
		return nil, err
	}
	return log, nil
}

// serveMetrics starts the metrics endpoint if configured; the returned
// function stops it. With --pprof it also serves net/http/pprof's handlers
// under /debug/pprof/ (pprofRoutes); --pprof without --metrics-addr is an
// error, not a silent no-op.
func (c *common) serveMetrics(m *metrics.Metrics, log *slog.Logger, extra ...map[string]http.Handler) (func(), error) {
	if c.metricsAddr == "" {
		if c.pprof {
			return nil, errors.New("--pprof serves on the --metrics-addr server: set --metrics-addr too")
		}
		return func() {}, nil
	}
	if c.pprof {
		extra = append(extra, pprofRoutes())
	}
	lis, err := net.Listen("tcp", c.metricsAddr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	for _, routes := range extra {
		for path, h := range routes {
			mux.Handle(path, h)
		}
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(lis)
	log.Info("metrics listening", "addr", lis.Addr().String())
	return func() { srv.Close() }, nil
}

// pprofRoutes are the Go runtime's profiling handlers (net/http/pprof) at
// their usual paths: /debug/pprof/ lists the profiles and serves each by
// name (heap, goroutine, allocs, block, mutex, threadcreate; ?gc=1 on heap
// collects first, so it shows the live heap; ?debug=1 or 2 is text), and
// cmdline, profile (CPU, ?seconds=N), symbol and trace. They are mounted
// only with --pprof: a profile shows stacks, call sites and the command
// line, and a CPU profile or trace costs the process while it runs.
func pprofRoutes() map[string]http.Handler {
	return map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}
}

// serverFlags are the security flags of serve-* commands.
type serverFlags struct {
	listen                     string
	cert, key, clientCA, token string
	noAuth                     bool
}

func (s *serverFlags) register(fs *flag.FlagSet, defaultListen string) {
	fs.StringVar(&s.listen, "listen", defaultListen, "address to listen on")
	fs.StringVar(&s.cert, "tls-cert", "", "TLS certificate file (enables TLS)")
	fs.StringVar(&s.key, "tls-key", "", "TLS private key file")
	fs.StringVar(&s.clientCA, "tls-client-ca", "", "CA file clients' certificates must chain to (enables mTLS)")
	fs.StringVar(&s.token, "token-file", "", "file holding the bearer token clients must send (or set FLIGHTLINE_TOKEN); an empty file is an error")
	fs.BoolVar(&s.noAuth, "insecure-no-auth", false, "serve without a token or mTLS on a non-loopback address, on purpose (logged as a warning)")
}

func (s *serverFlags) config(log *slog.Logger) (endpoint.ServerConfig, error) {
	tok, err := config.ReadToken("--token-file", s.token, "FLIGHTLINE_TOKEN")
	if err != nil {
		return endpoint.ServerConfig{}, err
	}
	if err := config.CheckTLSFiles([2]string{"--tls-cert", s.cert}, [2]string{"--tls-key", s.key}, [2]string{"--tls-client-ca", s.clientCA}); err != nil {
		return endpoint.ServerConfig{}, err
	}
	if err := config.AuthDecision(log, s.listen, tok != "" || s.clientCA != "", s.noAuth); err != nil {
		return endpoint.ServerConfig{}, err
	}
	return endpoint.ServerConfig{CertFile: s.cert, KeyFile: s.key, ClientCAFile: s.clientCA, Token: tok, Logger: log}, nil
}

// clientFlags are the security flags for one remote endpoint.
type clientFlags struct {
	prefix                           string
	ca, cert, key, serverName, token string
}

func (c *clientFlags) register(fs *flag.FlagSet, prefix, envToken string) {
	c.prefix = prefix
	fs.StringVar(&c.ca, prefix+"tls-ca", "", "CA file to verify the "+strings.TrimSuffix(prefix, "-")+" endpoint (grpc+tls)")
	fs.StringVar(&c.cert, prefix+"tls-cert", "", "client certificate for mTLS")
	fs.StringVar(&c.key, prefix+"tls-key", "", "client key for mTLS")
	fs.StringVar(&c.serverName, prefix+"tls-server-name", "", "override the server name checked in its certificate")
	fs.StringVar(&c.token, prefix+"token-file", "", "file holding the bearer token to send (or set "+envToken+")")
}

func (c *clientFlags) config(envToken string) (endpoint.ClientConfig, error) {
	tok, err := config.ReadToken("--"+c.prefix+"token-file", c.token, envToken)
	if err != nil {
		return endpoint.ClientConfig{}, err
	}
	p := "--" + c.prefix
	if err := config.CheckTLSFiles([2]string{p + "tls-ca", c.ca}, [2]string{p + "tls-cert", c.cert}, [2]string{p + "tls-key", c.key}); err != nil {
		return endpoint.ClientConfig{}, err
	}
	return endpoint.ClientConfig{CAFile: c.ca, CertFile: c.cert, KeyFile: c.key, ServerName: c.serverName, Token: tok}, nil
}

// helpOutput receives --help; flightline help CMD sends it to stdout.
var helpOutput io.Writer = os.Stderr

// kindHelp is what a command's --help adds after its flags: the kinds it
// takes, and no others.
var kindHelp = map[string]func() string{
	"serve-source": config.SourceUsage,
	"serve-sink":   config.SinkUsage,
	"run":          config.KindSummary,
}

func newFlagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(helpWriter{})
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: flightline %s\n\n", synopsis)
		fs.PrintDefaults()
		if h := kindHelp[name]; h != nil {
			fmt.Fprint(fs.Output(), h())
		}
	}
	return fs
}

// helpWriter writes to helpOutput as it is when written.
type helpWriter struct{}

func (helpWriter) Write(p []byte) (int, error) { return helpOutput.Write(p) }

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return checkEmptyFlags(fs)
}

// serveFlight runs svc until ctx ends, then stops gracefully.
func serveFlight(ctx context.Context, svc flight.FlightServer, sf *serverFlags, log *slog.Logger) error {
	cfg, err := sf.config(log)
	if err != nil {
		return err
	}
	gs, _, err := endpoint.NewServer(cfg)
	if err != nil {
		return err
	}
	flight.RegisterFlightServiceServer(gs, svc)
	lis, err := net.Listen("tcp", sf.listen)
	if err != nil {
		return err
	}
	log.Info("listening", "addr", lis.Addr().String(), "tls", cfg.CertFile != "", "mtls", cfg.ClientCAFile != "", "auth", cfg.Token != "")
	return endpoint.Serve(ctx, gs, lis, log)
}

func serveSource(ctx context.Context, args []string) error {
	fs := newFlagSet("serve-source", "serve-source --source SPEC [--listen ADDR] [flags]")
	var c common
	var sf serverFlags
	c.register(fs)
	sf.register(fs, "127.0.0.1:7401")
	spec := fs.String("source", "", "the source to serve (required; see below)")
	heartbeat := fs.Duration("heartbeat", 5*time.Second, "send a heartbeat after this long without data (0 disables)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *spec == "" || config.IsRemote(*spec) {
		return fmt.Errorf("--source must name an in-process source kind; known: %s", config.SourceKinds())
	}
	log, err := c.logger(logOutput)
	if err != nil {
		return err
	}
	m := metrics.New()
	src, closeSrc, err := config.OpenSource(ctx, log, m.Registry(), *spec, endpoint.ClientConfig{})
	if err != nil {
		return err
	}
	defer closeSrc()
	stopMetrics, err := c.serveMetrics(m, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	return serveFlight(ctx, flightsrc.NewServer(src, flightsrc.WithLogger(log), flightsrc.WithMetrics(m.Registry()), flightsrc.WithHeartbeat(*heartbeat)), &sf, log)
}

func serveSink(ctx context.Context, args []string) error {
	fs := newFlagSet("serve-sink", "serve-sink --sink SPEC [--listen ADDR] [flags]")
	var c common
	var sf serverFlags
	c.register(fs)
	sf.register(fs, "127.0.0.1:7402")
	spec := fs.String("sink", "", "the sink to serve (required; see below)")
	pipeBytes := fs.String("pipeline-bytes", "64MiB", "received batches a stream holds while earlier ones commit: sinks that stage (delta) encode and write them meanwhile; off: encode and write each batch inside its commit")
	if err := parse(fs, args); err != nil {
		return err
	}
	budget := int64(-1)
	if *pipeBytes != "off" {
		n, err := config.ParseSize(*pipeBytes)
		if err != nil || n <= 0 {
			return fmt.Errorf("--pipeline-bytes %q: want a size such as 64MiB, or off", *pipeBytes)
		}
		budget = n
	}
	if *spec == "" || config.IsRemote(*spec) {
		return fmt.Errorf("--sink must name an in-process sink kind; known: %s", config.SinkKinds())
	}
	log, err := c.logger(logOutput)
	if err != nil {
		return err
	}
	m := metrics.New()
	sink, closeSink, err := config.OpenSink(ctx, log, m.Registry(), *spec, endpoint.ClientConfig{})
	if err != nil {
		return err
	}
	defer closeSink()
	stopMetrics, err := c.serveMetrics(m, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	return serveFlight(ctx, flightsink.NewServer(sink, flightsink.WithLogger(log), flightsink.WithMetrics(m.Registry()),
		flightsink.WithPipelineBytes(budget)), &sf, log)
}

func runPipeline(ctx context.Context, args []string) error {
	fs := newFlagSet("run", "run --source SPEC --sink SPEC --pipeline ID [--stream NAME] [flags]")
	var c common
	var scf, kcf clientFlags
	c.register(fs)
	scf.register(fs, "source-", "FLIGHTLINE_SOURCE_TOKEN")
	kcf.register(fs, "sink-", "FLIGHTLINE_SINK_TOKEN")
	var tf transformFlags
	tf.register(fs)
	srcSpec := fs.String("source", "", "source: grpc://host:port, grpc+tls://host:port, or an in-process kind (required)")
	sinkSpec := fs.String("sink", "", "sink: grpc://host:port, grpc+tls://host:port, or an in-process kind (required)")
	stream := fs.String("stream", "", "the source stream to read; empty: the source's only stream")
	pipeline := fs.String("pipeline", "", "pipeline id: the key of the sink's checkpoint (required)")
	target := fs.String("target", "", "target inside the sink (table, topic, directory); empty: the sink's default")
	window := fs.Int("window", 4, "batches in flight between source and sink")
	maxAttempts := fs.Int("max-attempts", 0, "give up after this many failed attempts in a row (0: never)")
	takeover := fs.Bool("takeover", false, "claim the pipeline anew on every retry, fencing a coordinator started after this one (default: a retry rejoins this run's claim and stops if a newer coordinator claimed the pipeline; see docs/chaining.md)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *srcSpec == "" || *sinkSpec == "" || *pipeline == "" {
		fs.Usage()
		return errors.New("--source, --sink and --pipeline are required")
	}
	log, err := c.logger(logOutput)
	if err != nil {
		return err
	}
	scc, err := scf.config("FLIGHTLINE_SOURCE_TOKEN")
	if err != nil {
		return err
	}
	kcc, err := kcf.config("FLIGHTLINE_SINK_TOKEN")
	if err != nil {
		return err
	}
	m := metrics.New()
	src, closeSrc, err := config.OpenSource(ctx, log, m.Registry(), *srcSpec, scc)
	if err != nil {
		return err
	}
	defer closeSrc()
	sink, closeSink, err := config.OpenSink(ctx, log, m.Registry(), *sinkSpec, kcc)
	if err != nil {
		return err
	}
	defer closeSink()
	if *stream == "" {
		if *stream, err = config.OnlyStream(ctx, src, *srcSpec, "--stream NAME"); err != nil {
			return err
		}
	}
	chain, closeChain, err := tf.open(ctx, log, *pipeline, *stream)
	if err != nil {
		return err
	}
	defer closeChain()
	stopMetrics, err := c.serveMetrics(m, log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	co, err := coordinator.New(src, sink, *stream, flightsink.Pipeline{ID: *pipeline, Target: *target},
		coordinator.Window(*window), coordinator.WithLogger(log), coordinator.WithMetrics(m.Registry()), coordinator.MaxAttempts(*maxAttempts),
		coordinator.WithChain(chain...), coordinator.Takeover(*takeover))
	if err != nil {
		return err
	}
	err = co.Run(ctx)
	st := co.Stats()
	log.Info("run finished", "pipeline", *pipeline, "rows", st.Rows, "batches", st.Batches, "restarts", st.Restarts, "checkpoint", string(st.LastCheckpoint))
	return err
}
