package config

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/transform"
	"github.com/flightline/flightline/transform/flighttransform"
)

// OpenTransforms opens the chain specs name, in order, for pipeline and
// stream, and returns a function that closes its connections. A spec is
// builtin:… (Builtin), run in this process, or a Flight URL of a
// DoExchange service, dialled with clientConfig's config after a probe of its
// transport, like a remote source's or sink's (OpenSource): a mismatch is
// an error naming the flag to fix (--transform-tls-ca); a service that
// does not answer yet is a warning on log.
func OpenTransforms(ctx context.Context, log *slog.Logger, specs []string, clientConfig func() (flightline.ClientConfig, error), pipeline, stream string) ([]transform.Transform, func(), error) {
	var chain []transform.Transform
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for _, spec := range specs {
		if isRemote(spec) {
			if err := checkRemote(spec); err != nil {
				return nil, nil, err
			}
			cc, err := clientConfig()
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			if err := probeRemote(env{ctx: ctx, log: log}, "--transform "+spec, spec, cc, "--transform-tls-ca"); err != nil {
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
		f, err := Builtin(spec)
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
			f, err := Builtin(t.spec)
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

// Builtin is the transform a builtin:NAME?… spec names: select, rename,
// filter or flatten (flightline run --help lists their keys). An unknown
// name or key is an error.
func Builtin(spec string) (transform.Func, error) {
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
