package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline/internal/testkit/pgtest"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

func writeConfig(t *testing.T, yml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "flightline.yml")
	require.NoError(t, os.WriteFile(path, []byte(yml), 0o600))
	return path
}

func TestConfigShowCommand(t *testing.T) {
	t.Setenv("WAREHOUSE_PASSWORD", "hunter2-secret")
	path := writeConfig(t, "sinks:\n  w:\n    postgres: {dsn: 'postgres://u@h/db', password: '${WAREHOUSE_PASSWORD}'}\n")
	var out bytes.Buffer
	require.NoError(t, configCommand([]string{"show", "--config", path}, &out))
	require.Contains(t, out.String(), "password: '********'")
	require.NotContains(t, out.String(), "hunter2")

	out.Reset()
	err := configCommand([]string{"show", "--config", filepath.Join(t.TempDir(), "missing.yml")}, &out)
	require.ErrorContains(t, err, "missing.yml")
}

// check prints one line per endpoint and fails when any cannot be reached.
func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := lis.Addr().String()
	require.NoError(t, lis.Close()) // nothing listens there now

	good := writeConfig(t, `
sources:
  gen: 'generator:?rows=10'
sinks:
  out:
    dir: {path: `+dir+`}
deadletter_sinks:
  rejects: 'memory:'
pipelines:
  p:
    source: gen
    sink: out
`)
	var out bytes.Buffer
	require.NoError(t, checkCommand(context.Background(), []string{"--config", good, "--once"}, &out), out.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 5, out.String())
	require.Contains(t, lines[1], "ok    sources.gen")
	require.Contains(t, lines[1], "streams: orders")
	require.Contains(t, lines[2], "ok    sinks.out")
	require.Contains(t, lines[2], "p: no checkpoint yet")
	require.Contains(t, lines[3], "ok    deadletter_sinks.rejects")
	require.Contains(t, lines[4], "ok    pipelines.p")
	require.Contains(t, lines[4], "stream orders; sync --once reads to row 10")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "check writes nothing")

	// What sync refuses at start, check refuses: dead letters from a source
	// that does not hand them over, and --once on an unbounded source.
	refused := writeConfig(t, `
sources:
  gen: 'generator:?rows=10'
  endless: 'generator:'
sinks:
  out:
    dir: {path: `+dir+`}
deadletter_sinks:
  rejects: 'memory:'
pipelines:
  dl:
    source: gen
    sink: out
    deadletter_sink: rejects
  forever:
    source: endless
    sink: out
`)
	out.Reset()
	err = checkCommand(context.Background(), []string{"--config", refused, "--once"}, &out)
	require.ErrorContains(t, err, "2 endpoint(s) failed")
	require.Regexp(t, `FAIL  pipelines.dl +pipeline +the generator source sources.gen does not hand over undecodable records`, out.String())
	require.Regexp(t, `FAIL  pipelines.forever +pipeline +sync --once: .*unbounded \(rows=0\) and has no end: give it rows=N`, out.String())
	out.Reset()
	err = checkCommand(context.Background(), []string{"--config", refused}, &out)
	require.ErrorContains(t, err, "1 endpoint(s) failed")
	require.Regexp(t, `ok    pipelines.forever +pipeline +stream orders; sync --once would fail`, out.String())

	bad := writeConfig(t, `
sources:
  gen: 'generator:?rows=10'
  far: grpc://`+dead+`
sinks:
  out:
    dir: {path: `+dir+`}
pipelines:
  p:
    source: gen
    sink: out
    stream: nope
`)
	out.Reset()
	err = checkCommand(context.Background(), []string{"--config", bad, "--timeout", "5s"}, &out)
	require.ErrorContains(t, err, "2 endpoint(s) failed")
	require.Regexp(t, `FAIL  sources.far +grpc +.*`, out.String())
	require.Regexp(t, `FAIL  sources.gen +generator +stream "nope" is not among the source's streams \(orders\)`, out.String())
	require.Contains(t, out.String(), "ok    sinks.out")

	out.Reset()
	err = checkCommand(context.Background(), []string{"--config", writeConfig(t, "sinks:\n  a:\n    dri: {path: /x}\n")}, &out)
	require.Error(t, err)
	require.Contains(t, out.String(), `FAIL`)
	require.Contains(t, out.String(), `did you mean "dir"?`)
}

// check against the real services: a reachable PostgreSQL sink and Kafka
// source pass; a wrong SASL password and a closed port fail, each with
// its reason.
func TestCheckRealServices(t *testing.T) {
	dsn := servicetest.Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	brokers := servicetest.Need(t, "FLIGHTLINE_KAFKA_SASL_BROKERS", "Kafka with SASL")
	t.Setenv("CHECK_KAFKA_PW", os.Getenv("FLIGHTLINE_KAFKA_SASL_PASSWORD"))
	t.Setenv("CHECK_WRONG_PW", "not-the-password")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := lis.Addr().String()
	require.NoError(t, lis.Close())
	topic := createTopic(t, "check", 1)
	// A role with a password (the test cluster trusts only postgres).
	role := pgtest.Name("check_role")
	pgtest.Exec(t, pgtest.Conn(t), "CREATE ROLE "+role+" LOGIN PASSWORD 'right-pw'")
	t.Setenv("CHECK_PG_RIGHT", "right-pw")
	t.Setenv("CHECK_PG_WRONG", "wrong-pw")
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.User = url.User(role)
	roleDSN := u.String()
	path := writeConfig(t, `
sources:
  k:
    kafka: {brokers: [`+brokers+`], sasl: plain, user: '${FLIGHTLINE_KAFKA_SASL_USER}', password_env: CHECK_KAFKA_PW, topics: [`+topic+`]}
  k_wrong:
    kafka: {brokers: [`+brokers+`], sasl: plain, user: '${FLIGHTLINE_KAFKA_SASL_USER}', password_env: CHECK_WRONG_PW, topics: [t]}
sinks:
  pg:
    postgres: {dsn: '`+dsn+`', table: check_orders}
  pg_role:
    postgres: {dsn: '`+roleDSN+`', password: '${CHECK_PG_RIGHT}', table: check_orders, checkpoint_table: `+role+`_cps}
  pg_wrong_pw:
    postgres: {dsn: '`+roleDSN+`', password: '${CHECK_PG_WRONG}', table: check_orders}
  pg_closed:
    postgres: {dsn: 'postgres://postgres@`+dead+`/postgres?sslmode=disable&connect_timeout=5', table: check_orders}
`)
	var out bytes.Buffer
	err = checkCommand(context.Background(), []string{"--config", path, "--timeout", "30s"}, &out)
	t.Log("\n" + out.String())
	require.ErrorContains(t, err, "3 endpoint(s) failed")
	require.Regexp(t, `ok    sources.k +kafka +asked for its streams \(read-only\); streams: `+topic, out.String())
	require.Regexp(t, `ok    sinks.pg_role +postgres +connected and pinged the database; checkpoint read`, out.String())
	require.Regexp(t, `FAIL  sinks.pg_wrong_pw +postgres +.*password authentication failed`, out.String())
	require.NotContains(t, out.String(), "wrong-pw")
	require.NotContains(t, out.String(), "right-pw")
	require.Regexp(t, `FAIL  sources.k_wrong +kafka +.*(SASL|sasl|authentication|Authentication)`, out.String())
	require.Regexp(t, `ok    sinks.pg +postgres +connected and pinged the database; checkpoint read`, out.String())
	require.Regexp(t, `FAIL  sinks.pg_closed +postgres +.*`, out.String())
}

// createTopic creates a fresh topic on the real broker.
func createTopic(t *testing.T, prefix string, parts int32) string {
	t.Helper()
	brokers := servicetest.Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka")
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	require.NoError(t, err)
	defer cl.Close()
	topic := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	resp, err := kadm.NewClient(cl).CreateTopic(context.Background(), parts, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	return topic
}

// config schema has one form, --json (config's TestConfigSchemaJSON checks
// the schema itself).
func TestConfigSchemaWantsJSON(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, configCommand([]string{"schema", "--json"}, &out))
	require.Contains(t, out.String(), `"version"`)
	require.Error(t, configCommand([]string{"schema"}, &out), "only --json")
}
