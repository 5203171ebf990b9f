package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/config"
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
// connections (config.OpenTransforms): a remote transform's transport is
// probed first, like a remote source's or sink's; a mismatch is an error
// naming the flag to fix; a service that does not answer yet is a warning.
func (t *transformFlags) open(ctx context.Context, log *slog.Logger, pipeline, stream string) ([]transform.Transform, func(), error) {
	return config.OpenTransforms(ctx, log, t.specs, func() (flightline.ClientConfig, error) {
		return t.cf.config("FLIGHTLINE_TRANSFORM_TOKEN")
	}, pipeline, stream)
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
		if config.IsRemote(s) {
			return fmt.Errorf("--transform %q: serve-transform serves built-ins; chain remote services with run --transform", s)
		}
		f, err := config.Builtin(s)
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
