package deltalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// Action is one line of a Delta commit file: exactly one field is set.
// Actions this package does not model (cdc, checkpointMetadata, sidecar)
// are kept in Other so a reader can refuse them knowingly.
type Action struct {
	CommitInfo     map[string]any  `json:"commitInfo,omitempty"`
	Protocol       *Protocol       `json:"protocol,omitempty"`
	MetaData       *Metadata       `json:"metaData,omitempty"`
	Add            *Add            `json:"add,omitempty"`
	Remove         *Remove         `json:"remove,omitempty"`
	Txn            *Txn            `json:"txn,omitempty"`
	DomainMetadata *DomainMetadata `json:"domainMetadata,omitempty"`
	CDC            json.RawMessage `json:"cdc,omitempty"`
}

// Protocol is the protocol action: the versions and table features a
// client must support to read or write the table.
type Protocol struct {
	MinReaderVersion int      `json:"minReaderVersion"`
	MinWriterVersion int      `json:"minWriterVersion"`
	ReaderFeatures   []string `json:"readerFeatures,omitempty"`
	WriterFeatures   []string `json:"writerFeatures,omitempty"`
}

// Metadata is the metaData action.
type Metadata struct {
	ID               string   `json:"id"`
	Name             *string  `json:"name,omitempty"`
	Description      *string  `json:"description,omitempty"`
	Format           Format   `json:"format"`
	SchemaString     string   `json:"schemaString"`
	PartitionColumns []string `json:"partitionColumns"`
	Configuration    StrMap   `json:"configuration"`
	CreatedTime      *int64   `json:"createdTime,omitempty"`
}

// Format is the data file format of a table (always parquet).
type Format struct {
	Provider string `json:"provider"`
	Options  StrMap `json:"options"`
}

// Add adds a data file.
type Add struct {
	Path             string          `json:"path"`
	PartitionValues  NullStrMap      `json:"partitionValues"`
	Size             int64           `json:"size"`
	ModificationTime int64           `json:"modificationTime"`
	DataChange       bool            `json:"dataChange"`
	Stats            string          `json:"stats,omitempty"`
	Tags             StrMap          `json:"tags,omitempty"`
	DeletionVector   json.RawMessage `json:"deletionVector,omitempty"`
	// statsElided marks a lean snapshot's file whose stats were left in
	// the checkpoint it came from; seen is WriteCheckpoint's mark.
	statsElided, seen bool
}

// Remove removes a data file. Until its retention expires it is a
// tombstone that checkpoints keep (see Snapshot.Tombstones).
type Remove struct {
	Path                 string     `json:"path"`
	DeletionTimestamp    *int64     `json:"deletionTimestamp,omitempty"`
	DataChange           bool       `json:"dataChange"`
	ExtendedFileMetadata *bool      `json:"extendedFileMetadata,omitempty"`
	PartitionValues      NullStrMap `json:"partitionValues,omitempty"`
	Size                 *int64     `json:"size,omitempty"`
}

// Txn records the latest version of an application's transactions, the
// idempotence marker of streaming writers (kafka-delta-ingest, Spark).
type Txn struct {
	AppID       string `json:"appId"`
	Version     int64  `json:"version"`
	LastUpdated *int64 `json:"lastUpdated,omitempty"`
}

// DomainMetadata holds a writer's configuration string for a named domain
// (the domainMetadata writer feature). It survives checkpoints.
type DomainMetadata struct {
	Domain        string `json:"domain"`
	Configuration string `json:"configuration"`
	Removed       bool   `json:"removed"`
}

// StrMap is a string map that also decodes from the [{"key":..,"value":..}]
// form Arrow gives maps read from checkpoint Parquet.
type StrMap map[string]string

func (m *StrMap) UnmarshalJSON(b []byte) error {
	var n NullStrMap
	if err := n.UnmarshalJSON(b); err != nil {
		return err
	}
	if n == nil {
		*m = nil
		return nil
	}
	*m = make(StrMap, len(n))
	for k, v := range n {
		if v != nil {
			(*m)[k] = *v
		}
	}
	return nil
}

// NullStrMap is a map whose values may be null (partition values).
type NullStrMap map[string]*string

func (m *NullStrMap) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*m = nil
		return nil
	case len(b) > 0 && b[0] == '[':
		var kvs []struct {
			Key   string  `json:"key"`
			Value *string `json:"value"`
		}
		if err := json.Unmarshal(b, &kvs); err != nil {
			return err
		}
		*m = make(NullStrMap, len(kvs))
		for _, kv := range kvs {
			(*m)[kv.Key] = kv.Value
		}
		return nil
	}
	var o map[string]*string
	if err := json.Unmarshal(b, &o); err != nil {
		return err
	}
	*m = o
	return nil
}

// EncodeActions returns the newline-delimited JSON of a commit file.
func EncodeActions(actions []Action) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, a := range actions {
		if err := enc.Encode(a); err != nil {
			return nil, fmt.Errorf("delta: encode action: %w", err)
		}
	}
	return buf.Bytes(), nil
}

// DecodeActions parses a commit file.
func DecodeActions(b []byte) ([]Action, error) {
	var out []Action
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		line := b
		if i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var a Action
		if err := json.Unmarshal(line, &a); err != nil {
			return nil, fmt.Errorf("delta: bad action %.80q: %w", line, err)
		}
		out = append(out, a)
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
