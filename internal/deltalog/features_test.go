package deltalog

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRequireWidensProtocols(t *testing.T) {
	for _, tc := range []struct {
		name           string
		p              *Protocol
		reader, writer []string
		want           *Protocol
	}{
		{"new table", nil, nil, []string{"invariants", "domainMetadata"},
			&Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"invariants", "domainMetadata"}}},
		{"new table with ntz", nil, []string{"timestampNtz"}, []string{"timestampNtz", "domainMetadata"},
			&Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz"}, WriterFeatures: []string{"timestampNtz", "domainMetadata"}}},
		{"legacy 1/2 keeps its implied features", &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, nil, []string{"invariants", "domainMetadata"},
			&Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly", "invariants", "domainMetadata"}}},
		{"legacy reader 2 lists columnMapping", &Protocol{MinReaderVersion: 2, MinWriterVersion: 5}, []string{"timestampNtz"}, nil,
			&Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"columnMapping", "timestampNtz"},
				WriterFeatures: []string{"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping", "timestampNtz"}}},
		{"features appended", &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz"}, WriterFeatures: []string{"timestampNtz", "domainMetadata"}},
			nil, []string{"invariants"},
			&Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"timestampNtz"}, WriterFeatures: []string{"timestampNtz", "domainMetadata", "invariants"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.p.Require(tc.reader, tc.writer))
		})
	}
	p := &Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	require.Same(t, p, p.Require(nil, []string{"invariants", "appendOnly"}), "nothing missing: p itself")
}

func TestMetadataFeatures(t *testing.T) {
	schema := `{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},` +
		`{"name":"a","type":{"type":"array","elementType":{"type":"struct","fields":[{"name":"x","type":"timestamp_ntz","nullable":false,"metadata":{}}]},"containsNull":true},"nullable":true,"metadata":{}},` +
		`{"name":"g","type":"long","nullable":true,"metadata":{"delta.generationExpression":"id + 1"}}]}`
	md := &Metadata{SchemaString: schema, Configuration: StrMap{"delta.appendOnly": "TRUE", "delta.checkpointPolicy": "v2",
		"delta.constraints.pos": "id > 0", "delta.enableDeletionVectors": "false"}}
	r, w, err := MetadataFeatures(md, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"timestampNtz", "v2Checkpoint"}, r)
	require.Equal(t, []string{"appendOnly", "checkConstraints", "generatedColumns", "invariants", "timestampNtz", "v2Checkpoint"}, w)

	s := &Snapshot{Version: 0, Protocol: &Protocol{MinReaderVersion: 1, MinWriterVersion: 7, WriterFeatures: []string{"appendOnly"}}, Metadata: md}
	s.Schema, _ = ParseSchema(schema)
	require.ErrorIs(t, s.CheckWrite(), ErrUnsupportedFeature)
	require.ErrorContains(t, s.CheckWrite(), "checkConstraints")
}
