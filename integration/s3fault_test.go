package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/s3test"
)

// faultProxy is a reverse proxy in front of the S3 server that fails
// requests on demand: 500 InternalError, 503 SlowDown, a hang (no answer
// until the client gives up, or a reset after 90 s), or a reset connection.
type faultProxy struct {
	mu   sync.Mutex
	mode string       // "", "500", "503", "hang", "reset"
	hits atomic.Int64 // requests failed
	srv  *http.Server
	url  string
}

func startFaultProxy(t *testing.T, target string) *faultProxy {
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := &faultProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.url = "http://" + lis.Addr().String()
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		mode := p.mode
		p.mu.Unlock()
		if mode != "" {
			p.hits.Add(1)
		}
		switch mode {
		case "500", "503":
			code, name := http.StatusInternalServerError, "InternalError"
			if mode == "503" {
				code, name = http.StatusServiceUnavailable, "SlowDown"
			}
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(code)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, name)
			return
		case "hang":
			// A request the server never answers stays unanswered after
			// the fault ends, as with a real hung connection: only the
			// client's own timeout ends it (or, after 90 s, a reset).
			select {
			case <-r.Context().Done():
			case <-time.After(90 * time.Second):
			}
			fallthrough
		case "reset":
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					if tc, ok := c.(*net.TCPConn); ok {
						tc.SetLinger(0) // RST, not FIN
					}
					c.Close()
					return
				}
			}
			panic(http.ErrAbortHandler)
		}
		rp.ServeHTTP(w, r)
	})}
	go p.srv.Serve(lis)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// set starts fault mode ("" ends it).
func (p *faultProxy) set(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
}

// TestIntegrationS3Faults runs the split pipeline into a Delta table on S3
// through faultProxy and injects each fault for 3 s while rows flow (each
// once; 3 times each under FLIGHTLINE_CHAOS=1), measures the recovery (the
// fault's end to the first commit of a record produced after it began) and
// checks every record with delta-rs, which reads the bucket directly.
func TestIntegrationS3Faults(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test: skipped in -short mode")
	}
	Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	storage := s3test.Options(t)
	runS3Faults(t, "delta-s3", "s3fault", []string{"500", "503", "hang", "reset"},
		func(t *testing.T, name string) (killDest, *faultProxy) {
			proxy := startFaultProxy(t, storage[objstore.EndpointURL])
			uri := fmt.Sprintf("s3://%s/%s/orders", s3test.Bucket, name)
			via := objstore.Options{}
			for k, v := range storage {
				via[k] = v
			}
			via[objstore.EndpointURL] = proxy.url
			return killDest{spec: deltaSinkSpec(t, uri, via, ""), read: pythonKeys(t, "delta", uri, storage)}, proxy
		})
}

// TestIntegrationDatabricksS3Faults is TestIntegrationS3Faults for the
// Databricks sink: the fault proxy sits between the sink and the S3 server
// (moto behind the fake catalog's credential-checking proxy); the catalog
// itself stays up. delta-rs reads the table straight from moto. make test
// injects 503 and a hang once each; FLIGHTLINE_CHAOS=1 all four faults
// three times each.
func TestIntegrationDatabricksS3Faults(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test: skipped in -short mode")
	}
	Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	faults := []string{"503", "hang"}
	if chaosMode() {
		faults = []string{"500", "503", "hang", "reset"}
	}
	runS3Faults(t, "databricks", "dbxfault", faults, databricksFaultDest)
}

// runS3Faults runs the split pipeline into the destination dest makes, and
// injects each of faults for 3 s through the proxy dest put between the
// sink and S3, each once (3 times under FLIGHTLINE_CHAOS=1); then checks
// record by record and reports a row per fault.
func runS3Faults(t *testing.T, sink, name string, faults []string,
	dest func(t *testing.T, name string) (killDest, *faultProxy)) {
	each := 1
	if chaosMode() {
		each = 3
	}
	seed := killSeed(t)
	t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays the producer)", seed, seed)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	var proxy *faultProxy
	s := killSink{name: name, format: "json", dest: func(t *testing.T, _ context.Context, name string) killDest {
		d, p := dest(t, name)
		proxy = p
		return d
	}}
	r := newKillRun(t, ctx, s, seed, killSession.String(), false)
	rows := map[string]*faultRow{}
	for i := range len(faults) * each {
		fault := faults[i%len(faults)]
		r.waitMoving(ctx, 2*time.Minute)
		w := r.watchProgress(ctx)
		begun := time.Now()
		end := endPositions(t, ctx, r.adm, r.topic)
		hits := proxy.hits.Load()
		proxy.set(fault)
		time.Sleep(3 * time.Second)
		proxy.set("")
		up := time.Now()
		at, ok := w.next(up, end, 2*time.Minute)
		require.True(t, ok, "no commit within 2 minutes of the end of S3 fault %s\n%s", fault, r.dump())
		w.stop(nil)
		rec := at.Sub(up)
		t.Logf("S3 %s for 3 s (%d requests failed): committed again %v after it ended", fault,
			proxy.hits.Load()-hits, rec.Round(100*time.Millisecond))
		row := rows[fault]
		if row == nil {
			row = &faultRow{sink: sink, fault: "S3 " + fault}
			rows[fault] = row
		}
		row.faults++
		row.recovery = max(row.recovery, rec)
		row.stall = max(row.stall, at.Sub(begun))
		r.requireAlive()
	}
	res := r.finish(ctx, 4*time.Minute)
	var table []faultRow
	for _, f := range faults {
		row := *rows[f]
		row.checked, row.dups, row.losses = res.checked, res.dups, res.losses
		table = append(table, row)
	}
	logFaultTable(t, table)
	for _, row := range table {
		bound := killRecoveryBound
		if row.fault == "S3 hang" {
			// A request sent just before the fault ended hangs until the
			// client's header timeout: it cannot tell a hung server from a
			// slow one earlier.
			bound += objstore.ResponseHeaderTimeout
		}
		require.LessOrEqual(t, row.recovery, bound, "%s: S3 was back, the pipeline was not", row.fault)
	}
}
