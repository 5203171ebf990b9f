package config

import (
	"encoding/json"
	"io"
	"slices"
	"strings"

	"github.com/flightline/flightline/internal/spec"
)

// schemaVersion is the version of what `flightline config schema --json`
// prints; it changes only when a field is removed or changes meaning.
const schemaVersion = 1

// configSchema is the machine-readable form of docs/config.md: every
// section's kinds and their keys, from the kinds' own declarations
// (internal/spec). The Python package generates its typed classes from
// it, so Python, the CLI, YAML and the reference cannot disagree.
type configSchema struct {
	Version int `json:"version"`
	// Sections maps sources, sinks, deadletter_sinks and schema_sinks to
	// their kinds, by name.
	Sections map[string]map[string]kindSchema `json:"sections"`
	// PipelineKeys are the keys of a pipelines entry.
	PipelineKeys []string `json:"pipeline_keys"`
}

type kindSchema struct {
	Kind string `json:"kind"`
	Form string `json:"form"`
	Doc  string `json:"doc"`
	// Location is the key holding what the URL form writes between KIND:
	// and ? ("" when the kind has none), with its doc.
	Location    string      `json:"location"`
	LocationDoc string      `json:"location_doc,omitempty"`
	Fields      []keySchema `json:"fields"`
	// Extra are the pass-through keys (storage or driver options).
	Extra *extraSchema `json:"extra,omitempty"`
}

type keySchema struct {
	Name string `json:"name"`
	// Type is string, integer, bool, duration, size, list or enum.
	Type     string   `json:"type"`
	Enum     []string `json:"enum,omitempty"`
	Default  string   `json:"default,omitempty"`
	Required bool     `json:"required"`
	Secret   bool     `json:"secret"`
	Doc      string   `json:"doc"`
}

type extraSchema struct {
	Doc    string   `json:"doc"`
	Keys   []string `json:"keys"`
	Secret []string `json:"secret"`
}

// typeName is t as the schema names it.
func typeName(t spec.Type) string {
	switch t {
	case spec.Int:
		return "integer"
	case spec.SizeType:
		return "size"
	}
	return strings.ToLower(t.String())
}

func kindSchemaOf(d *decl) kindSchema {
	k := kindSchema{Kind: d.kind, Form: d.form, Doc: d.doc, Location: d.loc, LocationDoc: d.locDoc, Fields: []keySchema{}}
	for _, f := range d.fields {
		k.Fields = append(k.Fields, keySchema{Name: f.Name, Type: typeName(f.Type), Enum: f.Enum, Default: f.Default,
			// The declarations mark a required option in its doc; the
			// kind's own code enforces it.
			Required: strings.Contains(f.Doc, "(required)"), Secret: f.Secret, Doc: f.Doc})
	}
	if d.extra != nil {
		k.Extra = &extraSchema{Doc: d.extra.Doc, Keys: slices.Clone(d.extra.Keys), Secret: append([]string{}, d.extra.Secret...)}
	}
	return k
}

// buildConfigSchema collects every section's kinds, aliases left out.
func buildConfigSchema() configSchema {
	s := configSchema{Version: schemaVersion, Sections: map[string]map[string]kindSchema{}, PipelineKeys: slices.Clone(pipelineKeys)}
	for _, sec := range []string{secSources, secSinks, secDeadLetters} {
		kinds := kindsOf(sec)
		m := map[string]kindSchema{}
		for _, name := range mainKinds(sec) {
			m[name] = kindSchemaOf(kinds[name])
		}
		s.Sections[sec] = m
	}
	s.Sections[secSchemaSinks] = map[string]kindSchema{"glue": kindSchemaOf(glueSchemaDecl)}
	return s
}

// WriteSchema writes every kind's keys, by section, as indented JSON to w
// (`flightline config schema --json`): the Python package's typed classes
// are generated from it. Its "version" changes when its form does.
func WriteSchema(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(buildConfigSchema())
}
