package configedit

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
)

// kinds is a small declaration set: postgres (a secret password), kafka
// (a list of brokers), delta.
func kinds(section, kind string) (Kind, bool) {
	switch kind {
	case "postgres":
		return Kind{Keys: map[string]Key{"dsn": {}, "table": {}, "password": {Secret: true}}}, true
	case "kafka":
		return Kind{Keys: map[string]Key{"location": {}, "brokers": {List: true}, "topics": {List: true}, "format": {}}}, true
	case "delta":
		return Kind{Keys: map[string]Key{"uri": {}, "AWS_SECRET_ACCESS_KEY": {Secret: true}}}, true
	}
	return Kind{}, false
}

const commented = `# Orders from Kafka into the warehouse.
sources:
  # the broker of the staging cluster
  orders: {kafka: {brokers: [127.0.0.1:9092], topics: [orders]}} # flow style stays
sinks:
  warehouse:
    postgres:
      dsn: postgres://loader@db/analytics # the loader role
      table: raw.orders
pipelines:
  orders:
    source: sources.orders
    sink: sinks.warehouse # data sink
    window: 8
`

func TestApplyKeepsCommentsAndOrder(t *testing.T) {
	out, err := Apply([]byte(commented), Change{Entries: []Entry{
		{Section: "sinks", Name: "warehouse", Kind: "postgres", Fields: map[string]any{"table": "raw.orders_v2", "password": "${PGPASS}"}},
		{Section: "sinks", Name: "lake", Kind: "delta", Fields: map[string]any{"uri": "/data/orders"}, Pipeline: "orders"},
	}}, kinds)
	require.NoError(t, err)
	s := string(out)
	for _, c := range []string{"# Orders from Kafka into the warehouse.", "# the broker of the staging cluster", "# flow style stays", "# the loader role", "# data sink"} {
		require.Contains(t, s, c, "comment kept")
	}
	require.Contains(t, s, "table: raw.orders_v2")
	require.Contains(t, s, "password: ${PGPASS}")
	// yaml.v3's encoder quotes a flow item holding a colon; the value is
	// the same.
	require.Contains(t, s, "orders: {kafka: {brokers: ['127.0.0.1:9092'], topics: [orders]}} # flow style stays", "an untouched flow entry keeps its style")
	// Order: the new sink after the old one, the pipeline's keys in place,
	// its sink repointed on the same line as its comment.
	require.Less(t, strings.Index(s, "warehouse:"), strings.Index(s, "lake:"))
	require.Contains(t, s, "sink: sinks.lake # data sink")
	require.Less(t, strings.Index(s, "source: sources.orders"), strings.Index(s, "sink: sinks.lake"))
	require.Less(t, strings.Index(s, "sink: sinks.lake"), strings.Index(s, "window: 8"))

	// Applying the same change again changes nothing.
	again, err := Apply(out, Change{Entries: []Entry{
		{Section: "sinks", Name: "lake", Kind: "delta", Fields: map[string]any{"uri": "/data/orders"}, Pipeline: "orders"},
	}}, kinds)
	require.NoError(t, err)
	require.Equal(t, s, string(again))
}

func TestApplyNewFile(t *testing.T) {
	out, err := Apply(nil, Change{Entries: []Entry{
		{Section: "sinks", Name: "lake", Kind: "delta", Fields: map[string]any{"uri": "/data/orders"}, Pipeline: "p"},
		{Section: "sources", Name: "k", Kind: "kafka", Fields: map[string]any{"brokers": []string{"a:1", "b:2"}, "topics": "orders"}, Pipeline: "p"},
	}, Pipelines: []Pipeline{{Name: "p", Keys: map[string]any{"id": "orders-to-delta", "window": "8"}}}}, kinds)
	require.NoError(t, err)
	require.Equal(t, `sources:
  k:
    kafka:
      brokers: ['a:1', 'b:2']
      topics: orders
sinks:
  lake:
    delta:
      uri: /data/orders
pipelines:
  p:
    sink: sinks.lake
    source: sources.k
    id: orders-to-delta
    window: 8
`, string(out), "sections in their usual order, before pipelines")
}

func TestApplyKeepsCommentsOfAnEmptyFile(t *testing.T) {
	out, err := Apply([]byte("# new\n# file\n"), Change{Pipelines: []Pipeline{{Name: "p", Keys: map[string]any{"id": "x"}}}}, kinds)
	require.NoError(t, err)
	require.Equal(t, "# new\n# file\n\npipelines:\n  p:\n    id: x\n", string(out))
}

func TestApplyReplaceDropsOtherKeys(t *testing.T) {
	out, err := Apply([]byte(commented), Change{Entries: []Entry{
		{Section: "sinks", Name: "warehouse", Kind: "postgres", Fields: map[string]any{"dsn": "postgres://x@db/a"}, Replace: true},
	}}, kinds)
	require.NoError(t, err)
	require.NotContains(t, string(out), "raw.orders")
	require.Contains(t, string(out), "dsn: postgres://x@db/a # the loader role")
}

func TestApplyRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    Entry
		want error
		not  string // must not appear in the error
	}{
		{"plaintext secret", Entry{Section: "sinks", Name: "warehouse", Kind: "postgres", Fields: map[string]any{"password": "hunter2"}}, ErrPlaintextSecret, "hunter2"},
		{"secret with text around the variable", Entry{Section: "sinks", Name: "w", Kind: "postgres", Fields: map[string]any{"password": "x${PGPASS}"}}, ErrPlaintextSecret, ""},
		{"plaintext extra secret", Entry{Section: "sinks", Name: "l", Kind: "delta", Fields: map[string]any{"AWS_SECRET_ACCESS_KEY": "abc"}}, ErrPlaintextSecret, "abc"},
		{"kind change", Entry{Section: "sinks", Name: "warehouse", Kind: "delta", Fields: map[string]any{"uri": "/x"}}, ErrKindChange, ""},
		{"unknown key", Entry{Section: "sinks", Name: "w", Kind: "postgres", Fields: map[string]any{"tabel": "x"}}, ErrUnknown, ""},
		{"unknown kind", Entry{Section: "sinks", Name: "w", Kind: "oracle"}, ErrUnknown, ""},
		{"unknown section", Entry{Section: "sink", Name: "w", Kind: "postgres"}, ErrUnknown, ""},
		{"list for a single value", Entry{Section: "sinks", Name: "w", Kind: "postgres", Fields: map[string]any{"table": []string{"a", "b"}}}, flightline.ErrInvalidInput, ""},
		{"bad name", Entry{Section: "sinks", Name: "a b", Kind: "postgres"}, flightline.ErrInvalidInput, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Apply([]byte(commented), Change{Entries: []Entry{tc.e}}, kinds)
			require.Error(t, err)
			require.True(t, errors.Is(err, tc.want), "%v", err)
			require.ErrorIs(t, err, flightline.ErrInvalidInput)
			if tc.not != "" {
				require.NotContains(t, err.Error(), tc.not, "a refused secret is not echoed")
			}
		})
	}
	_, err := Apply([]byte("sinks:\n  w: postgres://x@db/a\n"), Change{Entries: []Entry{{Section: "sinks", Name: "w", Kind: "postgres"}}}, kinds)
	require.ErrorContains(t, err, "written as a URL")
}

func TestApplyDeadLetterSinkReplacesMode(t *testing.T) {
	src := "pipelines:\n  p:\n    source: sources.a\n    sink: sinks.b\n    deadletter: fail\n"
	out, err := Apply([]byte(src), Change{Entries: []Entry{{Section: "deadletter_sinks", Name: "rej", Kind: "delta", Fields: map[string]any{"uri": "/r"}, Pipeline: "p"}}}, kinds)
	require.NoError(t, err)
	require.NotContains(t, string(out), "deadletter: fail")
	require.Contains(t, string(out), "deadletter_sink: deadletter_sinks.rej")
	require.Less(t, strings.Index(string(out), "deadletter_sinks:"), strings.Index(string(out), "pipelines:"))
}

func TestPrune(t *testing.T) {
	src := "pipelines:\n  whole:\n    source: sources.a\n    sink: sinks.b\n  half:\n    source: sources.a\n"
	out, pruned, err := Prune([]byte(src))
	require.NoError(t, err)
	require.Equal(t, []string{"half"}, pruned)
	require.NotContains(t, string(out), "half")
	require.Contains(t, string(out), "whole")
	same, pruned, err := Prune([]byte("pipelines:\n  whole:\n    source: a\n    sink: b\n"))
	require.NoError(t, err)
	require.Nil(t, pruned)
	require.Equal(t, "pipelines:\n  whole:\n    source: a\n    sink: b\n", string(same))
}

func TestApplyRefusesNonMappingFile(t *testing.T) {
	_, err := Apply([]byte("- a\n- b\n"), Change{}, kinds)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = Apply([]byte("a: [\n"), Change{}, kinds)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}
