package deltalog

import (
	"fmt"
	"slices"
	"strings"
)

// Table features by kind (Delta protocol, "Table Features"). A reader-writer
// feature is listed in both readerFeatures and writerFeatures.
var readerWriterFeatures = []string{"columnMapping", "deletionVectors", "timestampNtz", "v2Checkpoint",
	"typeWidening", "typeWidening-preview", "variantType", "variantType-preview", "vacuumProtocolCheck"}

// legacyWriterFeatures are the features a legacy writer version (1-6)
// implies; legacyReaderFeatures the same for reader versions 1-2.
var legacyWriterFeatures = [][]string{
	1: nil,
	2: {"appendOnly", "invariants"},
	3: {"appendOnly", "invariants", "checkConstraints"},
	4: {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"},
	5: {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping"},
	6: {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "columnMapping", "identityColumns"},
}
var legacyReaderFeatures = [][]string{1: nil, 2: {"columnMapping"}}

// MetadataFeatures returns the table features that a table with md (whose
// schema is schema; nil: parsed from md) uses, which its protocol must
// therefore support for Spark, delta-rs and the protocol to accept it:
//
//	invariants        a NOT NULL field anywhere (nested ones too), or a
//	                  delta.invariants expression
//	timestampNtz      a timestamp_ntz field anywhere (reader and writer)
//	variantType       a variant field anywhere (reader and writer)
//	generatedColumns  delta.generationExpression field metadata
//	identityColumns   delta.identity.* field metadata
//	appendOnly        delta.appendOnly=true
//	checkConstraints  a delta.constraints.* property
//	changeDataFeed    delta.enableChangeDataFeed=true
//	columnMapping     delta.columnMapping.mode other than none (reader and writer)
//	deletionVectors   delta.enableDeletionVectors=true (reader and writer)
//	rowTracking       delta.enableRowTracking=true (with domainMetadata)
//	v2Checkpoint      delta.checkpointPolicy=v2 (reader and writer)
//	inCommitTimestamp delta.enableInCommitTimestamps=true
//	typeWidening      delta.enableTypeWidening=true (reader and writer)
//	icebergCompatV1/2 delta.enableIcebergCompatV1/2=true
//
// reader lists the reader-writer features among them; writer lists all of
// them. Both are sorted.
func MetadataFeatures(md *Metadata, schema *Schema) (reader, writer []string, err error) {
	if md == nil {
		return nil, nil, nil
	}
	if schema == nil {
		if schema, err = ParseSchema(md.SchemaString); err != nil {
			return nil, nil, err
		}
	}
	set := map[string]bool{}
	schemaFeatures(*schema, set)
	on := func(k string) bool { return strings.EqualFold(md.Configuration[k], "true") }
	if on("delta.appendOnly") {
		set["appendOnly"] = true
	}
	for k := range md.Configuration {
		if strings.HasPrefix(k, "delta.constraints.") {
			set["checkConstraints"] = true
		}
	}
	if on("delta.enableChangeDataFeed") {
		set["changeDataFeed"] = true
	}
	if m := md.Configuration["delta.columnMapping.mode"]; m != "" && !strings.EqualFold(m, "none") {
		set["columnMapping"] = true
	}
	if on("delta.enableDeletionVectors") {
		set["deletionVectors"] = true
	}
	if on("delta.enableRowTracking") {
		set["rowTracking"], set["domainMetadata"] = true, true
	}
	if strings.EqualFold(md.Configuration["delta.checkpointPolicy"], "v2") {
		set["v2Checkpoint"] = true
	}
	if on("delta.enableInCommitTimestamps") {
		set["inCommitTimestamp"] = true
	}
	if on("delta.enableTypeWidening") {
		set["typeWidening"] = true
	}
	if on("delta.enableIcebergCompatV1") {
		set["icebergCompatV1"] = true
	}
	if on("delta.enableIcebergCompatV2") {
		set["icebergCompatV2"] = true
	}
	for _, f := range sortedKeys(set) {
		writer = append(writer, f)
		if slices.Contains(readerWriterFeatures, f) {
			reader = append(reader, f)
		}
	}
	return reader, writer, nil
}

// schemaFeatures adds the features the types and field metadata of t use.
func schemaFeatures(t DataType, set map[string]bool) {
	switch t.Name {
	case "timestamp_ntz":
		set["timestampNtz"] = true
	case "variant":
		set["variantType"] = true
	case "struct":
		for _, f := range t.Fields {
			if !f.Nullable {
				set["invariants"] = true
			}
			for k := range f.Metadata {
				switch {
				case k == "delta.invariants":
					set["invariants"] = true
				case k == "delta.generationExpression":
					set["generatedColumns"] = true
				case strings.HasPrefix(k, "delta.identity."):
					set["identityColumns"] = true
				}
			}
			schemaFeatures(f.Type, set)
		}
	case "array":
		if t.Element != nil {
			schemaFeatures(*t.Element, set)
		}
	case "map":
		if t.Key != nil {
			schemaFeatures(*t.Key, set)
		}
		if t.Value != nil {
			schemaFeatures(*t.Value, set)
		}
	}
}

// SupportsWriterFeature reports whether p lets writers use feature f: it
// is listed (writer version 7) or implied by the legacy writer version.
func (p *Protocol) SupportsWriterFeature(f string) bool {
	if p == nil {
		return false
	}
	if p.MinWriterVersion >= 7 {
		return slices.Contains(p.WriterFeatures, f)
	}
	return p.MinWriterVersion > 0 && p.MinWriterVersion < len(legacyWriterFeatures) &&
		slices.Contains(legacyWriterFeatures[p.MinWriterVersion], f)
}

// SupportsReaderFeature reports whether p tells readers about feature f:
// listed (reader version 3) or implied by the legacy reader version.
func (p *Protocol) SupportsReaderFeature(f string) bool {
	if p == nil {
		return false
	}
	if p.MinReaderVersion >= 3 {
		return slices.Contains(p.ReaderFeatures, f)
	}
	return p.MinReaderVersion > 0 && p.MinReaderVersion < len(legacyReaderFeatures) &&
		slices.Contains(legacyReaderFeatures[p.MinReaderVersion], f)
}

// Require returns p widened to support the given reader-writer features
// (reader) and writer features (writer): a missing writer feature moves
// the writer version to 7, listing the features the legacy version
// implied; a missing reader feature moves the reader version to 3 the same
// way, and every reader feature is also listed as a writer feature, as
// the protocol requires. It returns p itself when p already supports them
// all; nil p is a new table (versions 1, 1).
func (p *Protocol) Require(reader, writer []string) *Protocol {
	if p == nil {
		p = &Protocol{MinReaderVersion: 1, MinWriterVersion: 1}
	}
	var missR, missW []string
	for _, f := range reader {
		if !p.SupportsReaderFeature(f) && !slices.Contains(missR, f) {
			missR = append(missR, f)
		}
	}
	for _, f := range append(slices.Clone(writer), reader...) {
		if !p.SupportsWriterFeature(f) && !slices.Contains(missW, f) {
			missW = append(missW, f)
		}
	}
	if len(missR) == 0 && len(missW) == 0 {
		return p
	}
	np := &Protocol{MinReaderVersion: p.MinReaderVersion, MinWriterVersion: 7}
	if p.MinReaderVersion >= 3 {
		np.ReaderFeatures = slices.Clone(p.ReaderFeatures)
	}
	if len(missR) > 0 && p.MinReaderVersion < 3 {
		np.MinReaderVersion = 3
		if p.MinReaderVersion > 0 && p.MinReaderVersion < len(legacyReaderFeatures) {
			np.ReaderFeatures = slices.Clone(legacyReaderFeatures[p.MinReaderVersion])
		}
	}
	np.ReaderFeatures = append(np.ReaderFeatures, missR...)
	if p.MinWriterVersion >= 7 {
		np.WriterFeatures = slices.Clone(p.WriterFeatures)
	} else if p.MinWriterVersion > 0 && p.MinWriterVersion < len(legacyWriterFeatures) {
		np.WriterFeatures = slices.Clone(legacyWriterFeatures[p.MinWriterVersion])
	}
	for _, f := range append(slices.Clone(np.ReaderFeatures), missW...) {
		if !slices.Contains(np.WriterFeatures, f) {
			np.WriterFeatures = append(np.WriterFeatures, f)
		}
	}
	return np
}

// ProtocolFor returns the protocol a writer commits together with md: p
// (nil: a new table) widened by the features md uses (MetadataFeatures)
// and the writer features the writer itself uses. It returns p itself when
// nothing is missing, so a commit carries a protocol action only when
// the result differs from p.
func ProtocolFor(p *Protocol, md *Metadata, schema *Schema, writerFeatures ...string) (*Protocol, error) {
	r, w, err := MetadataFeatures(md, schema)
	if err != nil {
		return nil, err
	}
	return p.Require(r, append(w, writerFeatures...)), nil
}

// MissingFeatures returns the features the snapshot's metadata uses that
// its protocol does not support: what makes Spark refuse a table with
// DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH. Empty for a consistent table.
func (s *Snapshot) MissingFeatures() ([]string, error) {
	r, w, err := MetadataFeatures(s.Metadata, s.Schema)
	if err != nil {
		return nil, err
	}
	var miss []string
	for _, f := range r {
		if !s.Protocol.SupportsReaderFeature(f) {
			miss = append(miss, f+" (reader)")
		}
	}
	for _, f := range w {
		if !s.Protocol.SupportsWriterFeature(f) {
			miss = append(miss, f)
		}
	}
	return miss, nil
}

// writableMetadataFeatures are the metadata-enabled features this package
// writes correctly: it only appends (appendOnly), checks NOT NULL before
// committing (invariants without delta.invariants expressions, which
// CheckWrite refuses separately) and writes timestamp_ntz as such.
var writableMetadataFeatures = []string{"appendOnly", "invariants", "timestampNtz", "domainMetadata"}

// checkMetadataFeatures refuses, by name, a table whose metadata enables a
// feature this package cannot write, whatever its protocol says.
func (s *Snapshot) checkMetadataFeatures() error {
	_, w, err := MetadataFeatures(s.Metadata, s.Schema)
	if err != nil {
		return err
	}
	for _, f := range w {
		if !slices.Contains(writableMetadataFeatures, f) {
			return fmt.Errorf("%w: %s (enabled by the table's metadata)", ErrUnsupportedFeature, f)
		}
	}
	return nil
}
