package config

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Glue table's default location is where the s3 sink writes: the
// target's directory (objsink's layout), or the pipeline's directory with
// commit=at-least-once; other sinks must give one.
func TestSchemaLocation(t *testing.T) {
	for _, tc := range []struct {
		kind, commit, target, want string
	}{
		{"s3", "", "", "s3://b/lake/default/"},
		{"s3", "exactly-once", "orders", "s3://b/lake/orders/"},
		{"s3", "at-least-once", "", "s3://b/lake/p1/"},
		{"s3", "at-least-once", "orders", "s3://b/lake/orders/p1/"},
	} {
		q := url.Values{}
		if tc.commit != "" {
			q.Set("commit", tc.commit)
		}
		p := &pipelineConf{id: "p1", target: tc.target, sink: &endpointConf{kind: tc.kind, loc: "b/lake/", q: q},
			schemaSink: &schemaSinkConf{name: "catalog"}}
		got, err := schemaLocation(p)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, "%+v", tc)
	}
	_, err := schemaLocation(&pipelineConf{id: "p1", sink: &endpointConf{kind: "gcs", loc: "b/lake"}, schemaSink: &schemaSinkConf{name: "catalog"}})
	require.ErrorContains(t, err, "give location")
}
