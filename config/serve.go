package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/metrics"
)

// serveCommand runs `flightline serve`: every source and sink of the file
// that its listen section gives an address is served as a Flight endpoint,
// as serve-source and serve-sink would serve it, until interrupted. One
// file can so describe a chain across hosts: each host serves the entries
// it listens for (--only) and its pipelines name the others as grpc
// endpoints.
func serveCommand(ctx context.Context, args []string) error {
	fs := newFlagSet("serve", "serve [--config FILE] [--only REF,REF] [flags]")
	path := configFlag(fs)
	only := fs.String("only", "", "serve only these entries (sources.NAME, sinks.NAME, …), comma-separated; empty: every entry with a listen address")
	noAuth := fs.Bool("insecure-no-auth", false, "serve entries without token or tls_client_ca on non-loopback addresses, on purpose (logged as a warning)")
	var c common
	c.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := loadConfig(*path, os.LookupEnv)
	if err != nil {
		return err
	}
	var es []*endpointConf
	for e := range cfg.listen {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].ref() < es[j].ref() })
	if *only != "" {
		want := map[string]bool{}
		for _, r := range splitList(*only) {
			want[r] = true
		}
		var kept []*endpointConf
		for _, e := range es {
			if want[e.ref()] {
				kept = append(kept, e)
				delete(want, e.ref())
			}
		}
		if len(want) > 0 {
			return fmt.Errorf("--only: %s: no such entry with a listen address in %s", sortedKeys(want), cfg.path)
		}
		es = kept
	}
	if len(es) == 0 {
		return fmt.Errorf("%s: nothing to serve: give endpoints addresses in its listen section", cfg.path)
	}
	log, err := c.logger(logOutput)
	if err != nil {
		return err
	}
	m := metrics.New()
	stopMetrics, err := c.serveMetrics(m, log)
	if err != nil {
		return err
	}
	defer stopMetrics()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(es))
	for i, e := range es {
		lc := cfg.listen[e]
		ev := env{ctx: ctx, log: log.With("endpoint", e.ref()), reg: m.Registry()}
		var svc flight.FlightServer
		var closeFn func()
		if e.section == secSources {
			src, c, err := openConfSource(ev, e)
			if err != nil {
				return errors.Join(err, cancelAndWait(cancel, &wg, errs))
			}
			svc, closeFn = flightsrc.NewServer(src, flightsrc.WithLogger(ev.log), flightsrc.WithMetrics(ev.reg), flightsrc.WithHeartbeat(lc.Heartbeat)), c
		} else {
			sink, c, err := openConfSink(ev, e)
			if err != nil {
				return errors.Join(err, cancelAndWait(cancel, &wg, errs))
			}
			svc, closeFn = flightsink.NewServer(sink, flightsink.WithLogger(ev.log), flightsink.WithMetrics(ev.reg)), c
		}
		tok := lc.Token
		if lc.TokenFile != "" {
			tok, err = readToken("listen."+e.ref()+".token_file", lc.TokenFile, "")
		}
		if err == nil {
			w := "listen." + e.ref() + "."
			err = checkTLSFiles([2]string{w + "tls_cert", lc.Cert}, [2]string{w + "tls_key", lc.Key}, [2]string{w + "tls_client_ca", lc.ClientCA})
		}
		if err == nil {
			err = authDecision(ev.log, lc.Addr, tok != "" || lc.ClientCA != "", *noAuth)
		}
		if err != nil {
			closeFn()
			return errors.Join(fmt.Errorf("%s: %w", e.ref(), err), cancelAndWait(cancel, &wg, errs))
		}
		gs, _, err := endpoint.NewServer(endpoint.ServerConfig{CertFile: lc.Cert, KeyFile: lc.Key, ClientCAFile: lc.ClientCA, Token: tok, Logger: ev.log})
		if err != nil {
			closeFn()
			return errors.Join(fmt.Errorf("%s: %w", e.ref(), err), cancelAndWait(cancel, &wg, errs))
		}
		flight.RegisterFlightServiceServer(gs, svc)
		lis, err := net.Listen("tcp", lc.Addr)
		if err != nil {
			closeFn()
			return errors.Join(fmt.Errorf("%s: %w", e.ref(), err), cancelAndWait(cancel, &wg, errs))
		}
		ev.log.Info("listening", "addr", lis.Addr().String(), "kind", e.kind, "tls", lc.Cert != "", "mtls", lc.ClientCA != "", "auth", tok != "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer closeFn()
			if errs[i] = serveUntil(ctx, gs, lis, ev.log); errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", e.ref(), errs[i])
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// cancelAndWait stops the endpoints already serving and returns their
// errors.
func cancelAndWait(cancel context.CancelFunc, wg *sync.WaitGroup, errs []error) error {
	cancel()
	wg.Wait()
	return errors.Join(errs...)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
