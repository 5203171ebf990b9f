package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/flightline/flightline/transform"
	"github.com/flightline/flightline/transform/flighttransform"
)

// A transform spec names one stage of a chain:
//
//	grpc://HOST:PORT, grpc+tls://HOST:PORT   a DoExchange transform service
//	builtin:select?columns=id,amount         keep these columns, in this order
//	builtin:rename?id=order_id&ts=time       rename columns (old=new)
//	builtin:filter?column=amount&op=gt&value=100
//	                                         keep rows where column op value;
//	                                         op: eq ne lt le gt ge is_null not_null
//	builtin:flatten?column=value             a struct column's fields as columns
//
// Python (or any other language's) transforms are their own processes
// serving docs/protocol.md's DoExchange contract (see
// examples/transforms/python); the coordinator reaches them by URL.
const transformUsage = `
Transforms (--transform, repeatable, run in the order given):
  grpc://HOST:PORT, grpc+tls://HOST:PORT
        a DoExchange transform service (flightline serve-transform, or any
        server following docs/protocol.md, e.g. examples/transforms/python)
  builtin:select?columns=A,B
        keep these columns, in this order
  builtin:rename?OLD=NEW&…
        rename columns
  builtin:filter?column=C&op=OP&value=V
        keep the rows where C OP V; OP: eq ne lt le gt ge is_null not_null
        (is_null and not_null take no value)
  builtin:flatten?column=C
        replace the struct column C by its fields (e.g. the Kafka source's
        decoded value: builtin:flatten?column=value)
`

// transformList is a repeatable --transform flag.
type transformList []string

func (l *transformList) String() string { return strings.Join(*l, " ") }
func (l *transformList) Set(s string) error {
	if s == "" {
		return errors.New("empty transform")
	}
	*l = append(*l, s)
	return nil
}

// transformFlags are the --transform flags of run and the security flags
// shared by its remote transforms.
type transformFlags struct {
	specs transformList
	cf    clientFlags
}

func (t *transformFlags) register(fs *flag.FlagSet) {
	fs.Var(&t.specs, "transform", "a transform between source and sink: grpc://host:port or builtin:…; repeatable, in order (see below)")
	t.cf.register(fs, "transform-", "FLIGHTLINE_TRANSFORM_TOKEN")
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprint(fs.Output(), transformUsage)
	}
}

// open returns the chain the flags name and a function that closes its
// connections. A remote transform's transport is probed first, like a
// remote source's or sink's (probeRemote): a mismatch is an error naming
// the flag to fix; a service that does not answer yet is a warning.
func (t *transformFlags) open(e env, pipeline, stream string) ([]transform.Transform, func(), error) {
	var chain []transform.Transform
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for _, spec := range t.specs {
		if isRemote(spec) {
			if err := checkRemote(spec); err != nil {
				return nil, nil, err
			}
			cc, err := t.cf.config("FLIGHTLINE_TRANSFORM_TOKEN")
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			if err := probeRemote(e, "--transform "+spec, spec, cc, "--transform-tls-ca"); err != nil {
				closeAll()
				return nil, nil, err
			}
			c, err := flighttransform.Dial(spec, cc, flighttransform.ForPipeline(pipeline, stream))
			if err != nil {
				closeAll()
				return nil, nil, fmt.Errorf("--transform %s: %w", spec, err)
			}
			closers = append(closers, func() { c.Close() })
			chain = append(chain, c)
			continue
		}
		f, err := builtin(spec)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		chain = append(chain, named{transform.Map(f), spec})
	}
	return chain, closeAll, nil
}

// openConfTransforms opens the transforms of pipeline p of the config file,
// for stream, and returns a function that closes their connections. Remote
// transforms are probed first (probeRemote), as run's are.
func openConfTransforms(e env, p *pipelineConf, stream string) ([]transform.Transform, func(), error) {
	var chain []transform.Transform
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for _, t := range p.transforms {
		if t.remote == nil {
			f, err := builtin(t.spec)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			chain = append(chain, named{transform.Map(f), t.spec})
			continue
		}
		cc, err := t.remote.clientConfig()
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		if err := probeRemote(e, t.remote.ref(), t.spec, cc, t.caKey()); err != nil {
			closeAll()
			return nil, nil, err
		}
		c, err := flighttransform.Dial(t.spec, cc, flighttransform.ForPipeline(p.id, stream))
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s: %w", t.remote.ref(), err)
		}
		closers = append(closers, func() { c.Close() })
		chain = append(chain, c)
	}
	return chain, closeAll, nil
}

// caKey names the setting that gives a remote transform's CA, for
// endpoint.Probe's errors. A transform written as a bare URL has none: the
// hint says how to write it so that it can.
func (t transformConf) caKey() string {
	if !t.bare {
		return t.remote.ref() + " tls_ca"
	}
	return "a tls_ca key (write " + t.remote.ref() + " as {grpc: {url: …, tls_ca: FILE}})"
}

// named gives a Transform the name errors call it by.
type named struct {
	transform.Transform
	name string
}

func (n named) String() string { return n.name }

// builtin parses a builtin:NAME?… spec.
func builtin(spec string) (transform.Func, error) {
	u, err := url.Parse(spec)
	if err != nil || u.Scheme != "builtin" {
		return nil, fmt.Errorf("--transform %q: want grpc://host:port, grpc+tls://host:port or builtin:NAME?…", spec)
	}
	q := u.Query()
	name := location(u)
	only := func(keys ...string) error {
		for k := range q {
			ok := false
			for _, want := range keys {
				ok = ok || k == want
			}
			if !ok {
				return fmt.Errorf("--transform %q: unknown option %q of builtin:%s", spec, k, name)
			}
		}
		return nil
	}
	switch name {
	case "select":
		if err := only("columns"); err != nil {
			return nil, err
		}
		var cols []string
		for _, c := range strings.Split(q.Get("columns"), ",") {
			if c = strings.TrimSpace(c); c != "" {
				cols = append(cols, c)
			}
		}
		return transform.Select(cols...)
	case "rename":
		m := map[string]string{}
		for old, news := range q {
			if len(news) != 1 || news[0] == "" {
				return nil, fmt.Errorf("--transform %q: rename %s to exactly one non-empty name", spec, old)
			}
			m[old] = news[0]
		}
		return transform.Rename(m)
	case "flatten":
		if err := only("column"); err != nil {
			return nil, err
		}
		if q.Get("column") == "" {
			return nil, fmt.Errorf("--transform %q: flatten needs column=", spec)
		}
		return transform.Flatten(q.Get("column"), nil), nil
	case "filter":
		if err := only("column", "op", "value"); err != nil {
			return nil, err
		}
		if q.Get("column") == "" {
			return nil, fmt.Errorf("--transform %q: filter needs column=", spec)
		}
		return transform.Filter(q.Get("column"), transform.Op(q.Get("op")), q.Get("value"), nil)
	}
	return nil, fmt.Errorf("--transform %q: unknown built-in %q; known: filter, flatten, rename, select", spec, name)
}

// serveTransform serves a chain of built-ins as one DoExchange service.
func serveTransform(ctx context.Context, args []string) error {
	fs := newFlagSet("serve-transform", "serve-transform --transform builtin:… [--transform …] [--listen ADDR] [flags]")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: flightline serve-transform --transform builtin:… [--transform …] [--listen ADDR] [flags]\n\n")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), transformUsage)
		fmt.Fprint(fs.Output(), "\nserve-transform serves built-ins only; a transform in Python or another language is\nits own DoExchange server (examples/transforms/python), reached by URL.\n")
	}
	var c common
	var sf serverFlags
	var specs transformList
	c.register(fs)
	sf.register(fs, "127.0.0.1:7403")
	fs.Var(&specs, "transform", "a built-in to serve (builtin:…); repeatable: they run in the order given")
	if err := parse(fs, args); err != nil {
		return err
	}
	if len(specs) == 0 {
		return errors.New("--transform is required")
	}
	var fns []transform.Func
	for _, s := range specs {
		if isRemote(s) {
			return fmt.Errorf("--transform %q: serve-transform serves built-ins; chain remote services with run --transform", s)
		}
		f, err := builtin(s)
		if err != nil {
			return err
		}
		fns = append(fns, f)
	}
	log, err := c.logger(logOutput)
	if err != nil {
		return err
	}
	return serveFlight(ctx, flighttransform.NewServer(transform.Map(transform.Chain(fns...)), flighttransform.WithLogger(log)), &sf, log)
}
