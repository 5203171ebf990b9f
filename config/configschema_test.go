package config

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestConfigSchemaJSON(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, WriteSchema(&out))
	var s configSchema
	require.NoError(t, json.Unmarshal(out.Bytes(), &s))
	require.Equal(t, schemaVersion, s.Version)
	for _, sec := range []string{secSources, secSinks, secDeadLetters} {
		for _, k := range mainKinds(sec) {
			require.Contains(t, s.Sections[sec], k, "every kind of %s", sec)
		}
	}
	pg := s.Sections[secSinks]["postgres"]
	require.Equal(t, "dsn", pg.Location)
	require.NotNil(t, pg.Extra)
	require.Contains(t, pg.Extra.Secret, "password", "postgres' password is a secret pass-through key")
	var token *keySchema
	for i, f := range s.Sections[secSinks]["grpc"].Fields {
		if f.Name == "token" {
			token = &s.Sections[secSinks]["grpc"].Fields[i]
		}
	}
	require.NotNil(t, token)
	require.True(t, token.Secret)
	kafka := s.Sections[secSources]["kafka"]
	for _, f := range kafka.Fields {
		switch f.Name {
		case "brokers":
			require.Equal(t, "list", f.Type)
			require.True(t, f.Required)
		case "isolation":
			require.Equal(t, "enum", f.Type)
			require.Equal(t, []string{"read_committed", "read_uncommitted"}, f.Enum)
			require.Equal(t, "read_committed", f.Default)
		}
	}
	require.Contains(t, s.Sections[secSchemaSinks], "glue")
	require.Equal(t, pipelineKeys, s.PipelineKeys)
}
