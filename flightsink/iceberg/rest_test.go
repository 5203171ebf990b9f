package iceberg_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	icesink "github.com/flightline/flightline/flightsink/iceberg"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// restURI is the REST catalog the services script starts (Apache
// Iceberg's RESTCatalogServer over a JDBC catalog, its warehouse a local
// directory, so iceberg-go writes the data files there itself).
func restURI(t *testing.T) string {
	t.Helper()
	return servicetest.Need(t, "FLIGHTLINE_ICEBERG_REST_URI", "the Iceberg REST catalog (services.sh up icebergrest)")
}

// The server keeps its catalog for as long as it runs: each test has a
// namespace of its own.
func restNamespace() string { return fmt.Sprintf("rest%d", rand.IntN(1e9)) }

func TestIntegrationRESTConformance(t *testing.T) {
	uri := restURI(t)
	h := harness(icesink.Config{Catalog: "rest", URI: uri, Table: restNamespace() + ".events"})
	h.Parallel = true // the REST catalog serves both passes at once
	sinktest.Run(t, h)
}

// commitRecorder keeps the bodies of the REST catalog's table-update
// requests (POST .../namespaces/NS/tables/T).
type commitRecorder struct {
	mu        sync.Mutex
	bodies    []string
	conflicts int            // answers 409 Conflict
	auth      map[string]int // Authorization headers of table requests
}

func (c *commitRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, "/namespaces") {
		c.mu.Lock()
		if c.auth == nil {
			c.auth = map[string]int{}
		}
		c.auth[r.Header.Get("Authorization")]++
		c.mu.Unlock()
	}
	if r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/tables/") && r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(b))
		c.mu.Lock()
		c.bodies = append(c.bodies, string(b))
		c.mu.Unlock()
	}
	rsp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && rsp.StatusCode == http.StatusConflict {
		c.mu.Lock()
		c.conflicts++
		c.mu.Unlock()
	}
	return rsp, err
}

func (c *commitRecorder) refused() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conflicts
}

func (c *commitRecorder) last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.bodies) == 0 {
		return ""
	}
	return c.bodies[len(c.bodies)-1]
}

// On the REST catalog: a table created, appends with the checkpoint in the
// snapshot summary, each commit a REST update carrying the requirement
// assert-ref-snapshot-id on main, a replay, a zombie writer fenced by a
// newer claim, resume; a commit built on a stale head refused by the
// server itself (409); read back by iceberg-go's scan and by pyiceberg's
// RestCatalog, every id exactly once.
func TestIntegrationRESTCatalog(t *testing.T) {
	uri := restURI(t)
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ns := restNamespace()
	rec := &commitRecorder{}
	cfg := icesink.Config{Catalog: "rest", URI: uri, Table: ns + ".orders"}
	opts := []icesink.Option{icesink.RESTTransport(rec), icesink.Allocator(mem)}
	p := flightsink.Pipeline{ID: "orders"}
	write := func(w flightsink.Writer, from, to int64) error {
		b := sinktest.Batch(mem, from, to)
		defer b.Release()
		return w.WriteBatch(ctx, b, sinktest.CP(to))
	}
	s := newSink(t, cfg, opts...)
	old, cp, err := s.Open(ctx, p)
	require.NoError(t, err)
	require.Nil(t, cp)
	require.NoError(t, write(old, 0, 10))

	// The commit as sent: the requirement that main still points at the
	// snapshot the writer built on, and the checkpoint in the summary.
	var body struct {
		Requirements []map[string]any `json:"requirements"`
		Updates      []map[string]any `json:"updates"`
	}
	require.NoError(t, json.Unmarshal([]byte(rec.last()), &body), rec.last())
	var asserted bool
	for _, r := range body.Requirements {
		if r["type"] == "assert-ref-snapshot-id" && r["ref"] == "main" && r["snapshot-id"] != nil {
			asserted = true
		}
	}
	require.True(t, asserted, "the commit asserts main's head: %s", rec.last())
	require.Contains(t, rec.last(), icesink.Key(p.ID))

	require.NoError(t, write(old, 10, 20))
	require.NoError(t, write(old, 10, 20), "a replay")
	s2 := newSink(t, cfg, opts...)
	w, cp, err := s2.Open(ctx, p)
	require.NoError(t, err)
	require.Equal(t, sinktest.CP(20), cp)
	refused := rec.refused()
	require.ErrorIs(t, write(old, 20, 30), flightline.ErrFenced, "the zombie is fenced")
	require.Greater(t, rec.refused(), refused, "by the server's refusal of its commit (409)")
	require.NoError(t, write(w, 20, 30))
	require.ElementsMatch(t, span(0, 30), readIDs(t, s2, s2.CatalogForTest(), p))

	// The server's refusal: a commit asserting the head it loaded, after
	// another commit moved it.
	ident, err := s2.Ident("")
	require.NoError(t, err)
	cat := s2.CatalogForTest()
	stale, err := cat.LoadTable(ctx, ident)
	require.NoError(t, err)
	head := stale.CurrentSnapshot().SnapshotID
	require.NoError(t, write(w, 30, 40))
	_, _, err = cat.CommitTable(ctx, ident, []table.Requirement{table.AssertRefSnapshotID("main", &head)},
		[]table.Update{table.NewSetPropertiesUpdate(iceberg.Properties{"zombie": "yes"})})
	require.ErrorIs(t, err, table.ErrCommitFailed, "the server refuses a commit on a moved branch (409)")
	t.Logf("the server's refusal: %v", err)
	now, err := cat.LoadTable(ctx, ident)
	require.NoError(t, err)
	require.NotContains(t, now.Properties(), "zombie", "the refused commit changed nothing")
	require.NoError(t, w.Close(ctx))
	require.NoError(t, old.Close(ctx))

	py := servicetest.Need(t, "FLIGHTLINE_PYICEBERG_PYTHON", "pyiceberg 0.12")
	out, err := exec.Command(py, "testdata/read_pyiceberg_rest.py", uri, ns+".orders").CombinedOutput()
	require.NoError(t, err, string(out))
	var got struct {
		IDs       []int64           `json:"ids"`
		Snapshots int               `json:"snapshots"`
		Location  string            `json:"location"`
		Summary   map[string]string `json:"summary"`
	}
	require.NoError(t, json.Unmarshal(out, &got), string(out))
	require.Equal(t, span(0, 40), got.IDs, "pyiceberg reads every row once")
	key := icesink.Key(p.ID)
	require.Contains(t, got.Summary, key)
	var st struct{ Checkpoint string }
	require.NoError(t, json.Unmarshal([]byte(got.Summary[key]), &st), got.Summary[key])
	require.Equal(t, string(sinktest.CP(40)), st.Checkpoint, "the checkpoint in the snapshot summary")
	if wh := os.Getenv("FLIGHTLINE_ICEBERG_REST_WAREHOUSE"); wh != "" {
		require.Contains(t, got.Location, wh, "the table is in the server's warehouse")
	}
	t.Logf("pyiceberg: %d snapshots at %s, %s=%s", got.Snapshots, got.Location, key, got.Summary[key])
}

// With credential, the sink exchanges the client credentials at the
// server's token endpoint (OAuth2 client_credentials) and sends the token
// with every catalog request. The test server hands a token to anyone and
// checks none, so this shows the client side only.
func TestIntegrationRESTCredential(t *testing.T) {
	uri := restURI(t)
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := &commitRecorder{}
	s := newSink(t, icesink.Config{Catalog: "rest", URI: uri, REST: map[string]string{"credential": "flightline:s3cr3t"}, Table: restNamespace() + ".events"},
		icesink.RESTTransport(rec), icesink.Allocator(mem))
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	b := sinktest.Batch(mem, 0, 5)
	defer b.Release()
	require.NoError(t, w.WriteBatch(ctx, b, sinktest.CP(5)))
	require.NoError(t, w.Close(ctx))
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, []string{"Bearer client-credentials-token:sub=flightline"}, slices.Collect(maps.Keys(rec.auth)),
		"every catalog request carries the token the server issued for the credential")
}

func TestRESTConfigChecked(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		uri   string
		props map[string]string
		want  string
	}{
		{"", nil, "want http(s)://HOST"},
		{"127.0.0.1:8181", nil, "want http(s)://HOST"},
		{"http://127.0.0.1:1", map[string]string{"colour": "blue"}, `unknown REST catalog property "colour"`},
		{"http://127.0.0.1:1", map[string]string{"rest.sigv4-enabled": "maybe"}, "want true or false"},
	} {
		_, err := icesink.New(ctx, icesink.Config{Catalog: "rest", URI: c.uri, REST: c.props})
		require.ErrorIs(t, err, flightline.ErrInvalidInput, c.uri)
		require.ErrorContains(t, err, c.want, c.uri)
	}
	_, err := icesink.New(ctx, icesink.Config{Catalog: "rest", URI: "http://127.0.0.1:1", SQLite: "/x.db"})
	require.ErrorContains(t, err, "neither the Glue catalog nor a SQLite path")
	// Nothing listens on port 1: New asks the server for its config.
	_, err = icesink.New(ctx, icesink.Config{Catalog: "rest", URI: "http://127.0.0.1:1"})
	require.ErrorIs(t, err, flightline.ErrUnavailable)
}
