package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/endpoint"
)

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

// Listeners are entries of a file that its listen section gives an
// address, to serve as Flight endpoints (`flightline serve`).
type Listeners struct {
	c  *File
	es []*endpointConf
}

// Listeners are c's entries with a listen address, sorted by reference;
// only, when not empty, keeps those it names (sources.NAME, sinks.NAME,
// …, comma-separated), and naming one without an address is an error. So
// is a file with nothing to serve.
func (c *File) Listeners(only string) (*Listeners, error) {
	cfg := c
	var es []*endpointConf
	for e := range cfg.listen {
		es = append(es, e)
	}
	sort.Slice(es, func(i, j int) bool { return es[i].ref() < es[j].ref() })
	if only != "" {
		want := map[string]bool{}
		for _, r := range splitList(only) {
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
			return nil, fmt.Errorf("--only: %s: no such entry with a listen address in %s", sortedKeys(want), cfg.path)
		}
		es = kept
	}
	if len(es) == 0 {
		return nil, fmt.Errorf("%s: nothing to serve: give endpoints addresses in its listen section", cfg.path)
	}
	return &Listeners{c: c, es: es}, nil
}

// Serve serves each entry as serve-source and serve-sink would, with its
// listen settings (TLS, token; without either on a non-loopback address
// only with noAuth, and then with a warning on log), until ctx ends; then
// each stops as endpoint.Serve says. An entry that fails to start, or
// stops with an error, stops the others; the error names it.
func (l *Listeners) Serve(ctx context.Context, log *slog.Logger, reg prometheus.Registerer, noAuth bool) error {
	cfg, es := l.c, l.es
	var err error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(es))
	for i, e := range es {
		lc := cfg.listen[e]
		ev := env{ctx: ctx, log: log.With("endpoint", e.ref()), reg: reg}
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
			tok, err = ReadToken("listen."+e.ref()+".token_file", lc.TokenFile, "")
		}
		if err == nil {
			w := "listen." + e.ref() + "."
			err = CheckTLSFiles([2]string{w + "tls_cert", lc.Cert}, [2]string{w + "tls_key", lc.Key}, [2]string{w + "tls_client_ca", lc.ClientCA})
		}
		if err == nil {
			err = AuthDecision(ev.log, lc.Addr, tok != "" || lc.ClientCA != "", noAuth)
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
			if errs[i] = endpoint.Serve(ctx, gs, lis, ev.log); errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", e.ref(), errs[i])
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
