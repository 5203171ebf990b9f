package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/internal/testkit/uctest"
)

// The Databricks (Unity Catalog) endpoints run as flightline processes
// against the fake catalog in this test process (internal/unitycatalog/
// uctest), which vends moto STS credentials; S3 requests go through its
// proxy, which refuses a vended key after its expiry. Nothing here has run
// against a real workspace: see docs/sinks/databricks.md.

// databricksSpec registers an external table at a fresh location and
// returns the --sink/--source spec reaching it (the token goes through
// DATABRICKS_TOKEN in the children's environment), the table location and
// the fake catalog.
func databricksSpec(t *testing.T, name string, credLife time.Duration) (spec, uri string, e *uctest.Env) {
	spec, uri, e, env := databricksSpecEnv(t, name, credLife)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return spec, uri, e
}

// databricksSpecEnv is databricksSpec returning the children's
// environment instead of setting it (for tests that run in parallel).
func databricksSpecEnv(t *testing.T, name string, credLife time.Duration) (spec, uri string, e *uctest.Env, env []string) {
	e = uctest.NewMotoEnv(t)
	table := "main.flightline." + strings.NewReplacer("-", "_").Replace(name)
	uri = fmt.Sprintf("s3://%s/%s/orders", uctest.Bucket, name)
	e.AddExternal(table, uri)
	e.SetCredentialLife(credLife)
	env = []string{"DATABRICKS_TOKEN=" + e.Token, "DATABRICKS_CLIENT_ID=", "DATABRICKS_CLIENT_SECRET="}
	spec = fmt.Sprintf("databricks:%s?host=%s&vend_margin=1ms&AWS_ENDPOINT_URL=%s&AWS_ALLOW_HTTP=true&AWS_REGION=us-east-1",
		table, e.URL, e.Proxy)
	return spec, uri, e, env
}

// databricksKillDest is the Databricks sink of the split kill tests, with
// credentials that live 8 s (re-vended every ~4 s while processes die);
// the check also fails if any request reached S3 with an expired key.
func databricksKillDest(t *testing.T, _ context.Context, name string) killDest {
	Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	spec, uri, e, env := databricksSpecEnv(t, name, 8*time.Second)
	read := pythonKeys(t, "delta", uri, e.DirectOptions())
	return killDest{spec: spec + "&checkpoint_interval=10", env: env, read: func(ctx context.Context) ([]string, error) {
		if st := e.Stats(); st.ExpiredRejected > 0 {
			return nil, fmt.Errorf("%d S3 requests were signed with expired vended credentials (%+v)", st.ExpiredRejected, st)
		}
		return read(ctx)
	}}
}

// databricksFaultDest is databricksKillDest with startFaultProxy between
// the sink and S3 (in front of the catalog's credential-checking proxy).
func databricksFaultDest(t *testing.T, name string) (killDest, *faultProxy) {
	Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	spec, uri, e := databricksSpec(t, name, 8*time.Second)
	proxy := startFaultProxy(t, e.Proxy)
	via := strings.Replace(spec, "AWS_ENDPOINT_URL="+e.Proxy+"&", "AWS_ENDPOINT_URL="+proxy.url+"&", 1)
	require.NotEqual(t, spec, via)
	read := pythonKeys(t, "delta", uri, e.DirectOptions())
	return killDest{spec: via + "&checkpoint_interval=10", read: read}, proxy
}

// TestIntegrationKafkaDatabricks runs `flightline run --source kafka:…
// --sink databricks:…` on the real broker with records arriving and
// credentials that live 4 s, to the end of the topic; delta-rs must find
// every record exactly once, and no S3 request may carry an expired key.
// Then `flightline run --source databricks:…?once=true` copies the table
// to a local Delta table, read again by delta-rs.
func TestIntegrationKafkaDatabricks(t *testing.T) {
	brokers := Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker")
	Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
	bin := flightlineBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adm, topic := kafkaTopic(t, ctx, brokers, "kdbx", 3)
	spec, uri, e := databricksSpec(t, topic, 4*time.Second)
	const n = 12_000
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		produceKeys(t, brokers, topic, n, 1000, 700*time.Millisecond)
	}()
	pipeline := topic + "-pipe"
	p := start(t, bin, "run", "--source",
		fmt.Sprintf("kafka:?brokers=%s&topics=%s&group=%s-g&batch_rows=300&batch_wait=50ms", brokers, topic, topic),
		"--sink", spec, "--stream", topic, "--pipeline", pipeline, "--log-level", "warn")
	<-produced
	want := endPositions(t, ctx, adm, topic)
	direct, err := sinkdelta.New(ctx, sinkdelta.Config{URI: uri, Storage: e.DirectOptions()})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		cp, err := direct.Checkpoint(ctx, flightsink.Pipeline{ID: pipeline})
		require.NoError(t, err)
		c, err := checkpoint.Parse(cp)
		return err == nil && checkpoint.Covers(c, want)
	}, 3*time.Minute, 200*time.Millisecond, "the run did not reach the end of the topic %s:\n%s", want.Encode(), p.log)
	if done, err := p.exited(); done {
		t.Fatalf("the run exited (%v):\n%s", err, p.log)
	}
	p.kill()
	st := e.Stats()
	t.Logf("catalog: %+v", st)
	require.GreaterOrEqual(t, st.Vends, 3, "credentials were re-vended during the run")
	require.Zero(t, st.ExpiredRejected, "no request signed with expired credentials")
	verifyDeltaKeys(t, uri, e.DirectOptions(), "key", n, "k")

	// The source: the table, copied to a local Delta table.
	out := filepath.Join(t.TempDir(), "copy")
	src := strings.Replace(spec, "?", "?once=true&batch_rows=5000&stream=orders&", 1)
	stream := "orders"
	c := start(t, bin, "run", "--source", src, "--sink", "delta:"+out, "--stream", stream, "--pipeline", "copy", "--log-level", "warn")
	require.Eventually(t, func() bool { done, _ := c.exited(); return done }, 2*time.Minute, 100*time.Millisecond, "the copy did not end:\n%s", c.log)
	_, err = c.exited()
	require.NoError(t, err, c.log.String())
	verifyDeltaKeys(t, out, nil, "key", n, "k")
}
