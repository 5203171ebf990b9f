package main

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
)

// An endpoint spec names a source or sink: a Flight URL (grpc://host:port,
// grpc+tls://host:port) for a remote endpoint, or kind:options for one that
// runs in this process, e.g.
//
//	generator:?rows=1000000&batch_rows=10000
//	dir:/var/lib/flightline/out
//
// Unknown kinds and unknown options are errors.

type sourceKind struct {
	usage string
	open  func(u *url.URL, q query) (flightsrc.Source, func(), error)
}

type sinkKind struct {
	usage string
	open  func(u *url.URL, q query) (flightsink.Sink, func(), error)
}

var sourceKinds = map[string]sourceKind{
	"generator": {
		usage: "generator:?rows=N&batch_rows=N&stream=NAME&interval=DURATION  deterministic synthetic orders (rows=0: unbounded)",
		open: func(_ *url.URL, q query) (flightsrc.Source, func(), error) {
			opts := []flightsrc.GeneratorOption{}
			if v, ok := q.take("rows"); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, nil, fmt.Errorf("generator: rows=%q: %w", v, err)
				}
				opts = append(opts, flightsrc.GenRows(n))
			}
			if v, ok := q.take("batch_rows"); ok {
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, nil, fmt.Errorf("generator: batch_rows=%q: %w", v, err)
				}
				opts = append(opts, flightsrc.GenBatchRows(n))
			}
			if v, ok := q.take("stream"); ok {
				opts = append(opts, flightsrc.GenStream(v))
			}
			if v, ok := q.take("interval"); ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					return nil, nil, fmt.Errorf("generator: interval=%q: %w", v, err)
				}
				opts = append(opts, flightsrc.GenInterval(d))
			}
			if err := q.done("generator"); err != nil {
				return nil, nil, err
			}
			g, err := flightsrc.NewGenerator(opts...)
			return g, func() {}, err
		},
	},
}

var sinkKinds = map[string]sinkKind{
	"dir": {
		usage: "dir:PATH  exactly-once Arrow IPC files under PATH/<target>/ (local disk)",
		open: func(u *url.URL, q query) (flightsink.Sink, func(), error) {
			path := u.Opaque
			if path == "" {
				path = u.Path
			}
			if path == "" {
				return nil, nil, fmt.Errorf("dir: want dir:PATH")
			}
			if err := q.done("dir"); err != nil {
				return nil, nil, err
			}
			d, err := flightsink.NewDir(path, nil)
			return d, func() {}, err
		},
	},
	"memory": {
		usage: "memory:  exactly-once for the life of the process; for tests",
		open: func(_ *url.URL, q query) (flightsink.Sink, func(), error) {
			m := flightsink.NewMemory()
			return m, m.Release, q.done("memory")
		},
	},
	"null": {
		usage: "null:  discards rows, keeps checkpoints in memory; for benchmarks",
		open: func(_ *url.URL, q query) (flightsink.Sink, func(), error) {
			return flightsink.NewNull(), func() {}, q.done("null")
		},
	},
}

// query is a URL query whose keys must all be consumed.
type query url.Values

func (q query) take(k string) (string, bool) {
	v, ok := q[k]
	if !ok {
		return "", false
	}
	delete(q, k)
	return v[len(v)-1], true
}

func (q query) done(kind string) error {
	if len(q) == 0 {
		return nil
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return fmt.Errorf("%s: unknown option(s) %s", kind, strings.Join(keys, ", "))
}

func isRemote(spec string) bool {
	return strings.HasPrefix(spec, "grpc://") || strings.HasPrefix(spec, "grpc+tls://") || strings.HasPrefix(spec, "grpc+tcp://")
}

func parseSpec(spec string) (*url.URL, query, error) {
	u, err := url.Parse(spec)
	if err != nil || u.Scheme == "" {
		return nil, nil, fmt.Errorf("%q is not an endpoint: want grpc://host:port or kind:options", spec)
	}
	return u, query(u.Query()), nil
}

func openSource(spec string, cc flightsrc.ClientConfig) (flightsrc.Source, func(), error) {
	if isRemote(spec) {
		c, err := flightsrc.Dial(spec, cc)
		if err != nil {
			return nil, nil, err
		}
		return c, func() { c.Close() }, nil
	}
	u, q, err := parseSpec(spec)
	if err != nil {
		return nil, nil, err
	}
	k, ok := sourceKinds[u.Scheme]
	if !ok {
		return nil, nil, fmt.Errorf("unknown source kind %q; known: %s", u.Scheme, kinds(sourceKinds))
	}
	return k.open(u, q)
}

func openSink(spec string, cc flightsink.ClientConfig) (flightsink.Sink, func(), error) {
	if isRemote(spec) {
		c, err := flightsink.Dial(spec, cc)
		if err != nil {
			return nil, nil, err
		}
		return c, func() { c.Close() }, nil
	}
	u, q, err := parseSpec(spec)
	if err != nil {
		return nil, nil, err
	}
	k, ok := sinkKinds[u.Scheme]
	if !ok {
		return nil, nil, fmt.Errorf("unknown sink kind %q; known: %s", u.Scheme, kinds(sinkKinds))
	}
	return k.open(u, q)
}

func kinds[V any](m map[string]V) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

func kindUsage() string {
	var b strings.Builder
	b.WriteString("\nSources (in-process kinds; or grpc://host:port, grpc+tls://host:port):\n")
	for _, k := range sortedKeys(sourceKinds) {
		fmt.Fprintf(&b, "  %s\n", sourceKinds[k].usage)
	}
	b.WriteString("Sinks (in-process kinds; or grpc://host:port, grpc+tls://host:port):\n")
	for _, k := range sortedKeys(sinkKinds) {
		fmt.Fprintf(&b, "  %s\n", sinkKinds[k].usage)
	}
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
