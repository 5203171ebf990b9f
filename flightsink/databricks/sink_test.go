package databricks_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/databricks"
	"github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/flighttest"
	"github.com/flightline/flightline/internal/testkit/uctest"
	"github.com/flightline/flightline/internal/unitycatalog"
)

// readIDs reads the id column of the Delta table at uri on moto directly
// (fixed keys, not through the catalog).
func readIDs(t *testing.T, e *uctest.Env, uri string) []int64 {
	t.Helper()
	ctx := context.Background()
	st, err := objstore.Open(ctx, uri, e.DirectOptions())
	require.NoError(t, err)
	snap, err := deltalog.NewTable(st, nil).Snapshot(ctx)
	require.NoError(t, err)
	var ids []int64
	for _, f := range snap.SortedFiles() {
		b, err := st.Get(ctx, f.Path)
		require.NoError(t, err)
		pf, err := file.NewParquetReader(bytes.NewReader(b))
		require.NoError(t, err)
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
		require.NoError(t, err)
		tbl, err := fr.ReadTable(ctx)
		require.NoError(t, err)
		idx := tbl.Schema().FieldIndices("id")[0]
		for _, c := range tbl.Column(idx).Data().Chunks() {
			ids = append(ids, c.(*array.Int64).Int64Values()...)
		}
		tbl.Release()
		pf.Close()
	}
	return ids
}

func newSink(t *testing.T, e *uctest.Env, table string, opts ...databricks.Option) *databricks.Sink {
	t.Helper()
	return newSinkConfig(t, sinkConfig(e, table), opts...)
}

// sinkConfig is the Config of newSink: table in e's catalog.
func sinkConfig(e *uctest.Env, table string) databricks.Config {
	return databricks.Config{Table: table, Workspace: unitycatalog.Config{Host: e.URL, Token: e.Token},
		Storage: e.StorageOptions(), Delta: delta.Config{CheckpointInterval: 3}}
}

func newSinkConfig(t *testing.T, cfg databricks.Config, opts ...databricks.Option) *databricks.Sink {
	t.Helper()
	s, err := databricks.New(context.Background(), cfg, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// The sink conformance suite through the catalog: every target is a table
// the fake catalog resolves (EXTERNAL DELTA under one prefix), written
// with vended moto credentials through the expiry-checking proxy.
func TestIntegrationConformance(t *testing.T) {
	e := uctest.NewMotoEnv(t)
	prefix := fmt.Sprintf("s3://%s/conformance-%d", uctest.Bucket, time.Now().UnixNano())
	e.AutoExternal("main.flightline", prefix)
	// After both passes (they run at once: Run returns before they end).
	t.Cleanup(func() {
		st := e.Stats()
		require.Positive(t, st.S3Requests, "the writes went through the proxy with vended keys")
		require.Zero(t, st.ExpiredRejected)
	})
	sinktest.Run(t, sinktest.Harness{
		Guarantee: flightsink.ExactlyOnce,
		Parallel:  true,
		NewSink:   func(t *testing.T) flightsink.Sink { return newSink(t, e, "main.flightline.default") },
		IDs: func(t *testing.T, p flightsink.Pipeline) []int64 {
			return readIDs(t, e, prefix+"/"+p.Target)
		},
	})
}

// Credentials that live 5 s are re-vended throughout a long run of
// commits: the run never fails, and no request ever reaches S3 with
// credentials that have expired (the proxy would refuse and count it).
func TestIntegrationCredentialsExpireDuringRun(t *testing.T) {
	e := uctest.NewMotoEnv(t)
	loc := fmt.Sprintf("s3://%s/expiry-%d", uctest.Bucket, time.Now().UnixNano())
	e.AddExternal("main.flightline.expiry", loc)
	e.SetCredentialLife(5 * time.Second)
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := sinkConfig(e, "main.flightline.expiry")
	cfg.VendMargin = time.Millisecond
	s := newSinkConfig(t, cfg, databricks.DeltaOptions(delta.Allocator(mem)))
	p := flightsink.Pipeline{ID: "expiry"}
	w, _, err := s.Open(ctx, p)
	require.NoError(t, err)
	start := time.Now()
	n := int64(0)
	for time.Since(start) < 20*time.Second {
		rec := sinktest.Batch(mem, n*100, n*100+100)
		err := w.WriteBatch(ctx, rec, sinktest.CP(n*100+100))
		rec.Release()
		require.NoError(t, err, "batch %d at %s", n, time.Since(start))
		n++
	}
	require.NoError(t, w.Close(ctx))
	st := e.Stats()
	t.Logf("%d commits in %s, %d vends, %d S3 requests with vended keys", n, time.Since(start).Round(time.Millisecond), st.Vends, st.S3Requests)
	require.GreaterOrEqual(t, st.Vends, 5, "re-vended every ~2.5 s")
	require.Zero(t, st.ExpiredRejected, "no request signed with expired credentials")
	ids := readIDs(t, e, loc)
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	require.Len(t, ids, int(n*100))
	for i, id := range ids {
		require.Equal(t, int64(i), id)
	}
}

// A vend outage shorter than what is left of the credentials when renewal
// starts goes unnoticed; a longer one fails commits with UNAVAILABLE (also
// over Flight) once the held credentials run out, with nothing committed,
// and the sink works again once the catalog does.
func TestIntegrationVendOutage(t *testing.T) {
	e := uctest.NewMotoEnv(t)
	loc := fmt.Sprintf("s3://%s/outage-%d", uctest.Bucket, time.Now().UnixNano())
	e.AddExternal("main.flightline.outage", loc)
	e.SetCredentialLife(8 * time.Second) // renewal at 4 s left, refused at 2 s left: 2 s of slack for 1 s outages
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := sinkConfig(e, "main.flightline.outage")
	cfg.VendMargin = time.Millisecond
	s := newSinkConfig(t, cfg, databricks.DeltaOptions(delta.Allocator(mem)))
	url := flighttest.Serve(t, flightsink.NewServer(s), endpoint.ServerConfig{})
	c, err := flightsink.Dial(url, flightsink.ClientConfig{})
	require.NoError(t, err)
	defer c.Close()
	p := flightsink.Pipeline{ID: "outage"}
	w, _, err := c.Open(ctx, p)
	require.NoError(t, err)
	n := int64(0)
	write := func() error {
		rec := sinktest.Batch(mem, n*10, n*10+10)
		defer rec.Release()
		err := w.WriteBatch(ctx, rec, sinktest.CP(n*10+10))
		if err == nil {
			n++
		}
		return err
	}
	// Short outages, one after the other, over 12 s.
	start := time.Now()
	next := start
	for time.Since(start) < 12*time.Second {
		if time.Now().After(next) {
			e.FailVendsFor(time.Second)
			next = next.Add(2500 * time.Millisecond)
		}
		require.NoError(t, write(), "a short vend outage goes unnoticed")
	}
	require.Positive(t, e.Stats().FailedVends)

	// A long outage: commits fail with UNAVAILABLE once the credentials run out.
	e.FailVends(true)
	deadline := time.Now().Add(60 * time.Second)
	for err == nil && time.Now().Before(deadline) {
		err = write()
	}
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.ErrorContains(t, err, "expire")
	require.True(t, flightline.IsRetryable(err))
	require.Zero(t, e.Stats().ExpiredRejected, "refused before sending, not by S3")
	_ = w.Close(ctx)

	// The catalog is back: the pipeline resumes where it stopped.
	e.FailVends(false)
	deadline = time.Now().Add(60 * time.Second)
	var cp []byte
	for {
		w, cp, err = c.Open(ctx, p)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, err)
	require.Equal(t, string(sinktest.CP(n*10)), string(cp))
	require.NoError(t, write())
	require.NoError(t, w.Close(ctx))
	require.Len(t, readIDs(t, e, loc), int(n*10))
}

// An S3 403 with vended credentials (a session policy narrower than the
// table) is PERMISSION_DENIED.
func TestIntegrationS3AccessDenied(t *testing.T) {
	e := uctest.NewMotoEnv(t)
	loc := fmt.Sprintf("s3://%s/denied-%d", uctest.Bucket, time.Now().UnixNano())
	e.AddExternal("main.flightline.denied", loc)
	e.DenyS3("main.flightline.denied", true)
	s := newSink(t, e, "main.flightline.denied")
	_, _, err := s.Open(context.Background(), flightsink.Pipeline{ID: "denied"})
	require.ErrorIs(t, err, flightline.ErrPermissionDenied)
	require.Positive(t, e.Stats().DeniedRejected)
}
