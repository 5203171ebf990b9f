package deltalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/objstore"
)

// ErrVersionExists is returned by Commit when another writer committed the
// version first. Re-read the log (Snapshot.Update) and retry.
var ErrVersionExists = fmt.Errorf("delta: log version already exists: %w", flightline.ErrConflict)

// ErrUnsupportedFeature marks a table using a protocol version or table
// feature this package does not implement. The message names it.
var ErrUnsupportedFeature = fmt.Errorf("delta: unsupported table feature: %w", flightline.ErrInvalidInput)

const logDir = "_delta_log/"

// Table is a Delta table in an object store. It is safe for concurrent use;
// it holds no state besides the store.
type Table struct {
	store objstore.Store
	mem   memory.Allocator
}

// NewTable returns the table rooted at store. mem is used for checkpoint
// Parquet (nil: Go allocator).
func NewTable(store objstore.Store, mem memory.Allocator) *Table {
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return &Table{store: store, mem: mem}
}

// Store returns the table's object store.
func (t *Table) Store() objstore.Store { return t.store }

// URL is the table's location.
func (t *Table) URL() string { return t.store.URL() }

// CommitKey is the object key of the commit file of version v.
func CommitKey(v int64) string { return fmt.Sprintf("%s%020d.json", logDir, v) }

func checkpointKey(v int64) string { return fmt.Sprintf("%s%020d.checkpoint.parquet", logDir, v) }

// ReadVersion returns the actions of commit v, or an error wrapping
// objstore.ErrNotExist.
func (t *Table) ReadVersion(ctx context.Context, v int64) ([]Action, error) {
	b, err := t.store.Get(ctx, CommitKey(v))
	if err != nil {
		return nil, err
	}
	return DecodeActions(b)
}

// Commit writes actions as version v, put-if-absent: it never replaces an
// existing log entry. ErrVersionExists means another writer won v.
// Any other error leaves the outcome unknown; read v back to find out.
func (t *Table) Commit(ctx context.Context, v int64, actions []Action) error {
	b, err := EncodeActions(actions)
	if err != nil {
		return err
	}
	err = t.store.PutIfAbsent(ctx, CommitKey(v), b)
	if errors.Is(err, objstore.ErrExists) {
		return fmt.Errorf("version %d of %s: %w", v, t.URL(), ErrVersionExists)
	}
	return err
}

// Snapshot is the state of a table at one version. Version is -1 for a
// table that does not exist yet. A Snapshot is not safe for concurrent
// mutation.
type Snapshot struct {
	Version  int64
	Protocol *Protocol
	Metadata *Metadata
	Schema   *Schema
	// Files are the active data files by path.
	Files map[string]*Add
	// Tombstones are the removed files by path (a later add of the path
	// drops its tombstone); checkpoints keep those whose retention has not
	// expired, so that VACUUM by other engines spares files that readers
	// of older versions may still need.
	Tombstones map[string]*Remove
	Txns       map[string]Txn
	Domains    map[string]DomainMetadata
	// CheckpointVersion is the version of the Delta checkpoint the
	// snapshot was loaded from, or that WriteCheckpoint last wrote of a
	// lean snapshot (-1: none).
	CheckpointVersion int64
	checkpointParts   int64
	// lean: see Table.LeanSnapshot; streamed (lean too): see
	// Table.StreamedSnapshot.
	lean, streamed bool
	// Of a streamed snapshot: the active files of the checkpoint at
	// CheckpointVersion that no commit since removed or re-added (Files
	// holds those), and of them the small ones (under smallBelow bytes,
	// without a deletion vector).
	baseFiles, baseSmall, smallBelow int64
	// overlaySmall counts the small files of Files (smallBelow > 0).
	overlaySmall int64
	// tracked holds the paths removed since Track (nil: not tracking).
	tracked map[string]bool
}

func newSnapshot() *Snapshot {
	return &Snapshot{Version: -1, CheckpointVersion: -1, Files: map[string]*Add{}, Tombstones: map[string]*Remove{},
		Txns: map[string]Txn{}, Domains: map[string]DomainMetadata{}}
}

type lastCheckpoint struct {
	Version       int64  `json:"version"`
	Size          int64  `json:"size"`
	Parts         *int64 `json:"parts,omitempty"`
	SizeInBytes   int64  `json:"sizeInBytes,omitempty"`
	NumOfAddFiles int64  `json:"numOfAddFiles,omitempty"`
	// V2Checkpoint is set when the checkpoint is a v2 checkpoint
	// (N.checkpoint.<uuid>.json|parquet with sidecars), which this package
	// refuses.
	V2Checkpoint json.RawMessage `json:"v2Checkpoint,omitempty"`
}

// errV2Checkpoint refuses a table whose checkpoint is a v2 checkpoint.
func (t *Table) errV2Checkpoint(what string) error {
	return fmt.Errorf("%w: v2Checkpoint (%s of %s is a v2 checkpoint, delta.checkpointPolicy=v2)", ErrUnsupportedFeature, what, t.URL())
}

// isV2Checkpoint reports whether name (under _delta_log/) is a v2
// checkpoint file of version v: NNN.checkpoint.<uuid>.json|parquet.
func isV2Checkpoint(name string) (v int64, ok bool) {
	fs := strings.Split(name, ".")
	if len(fs) != 4 || fs[1] != "checkpoint" || (fs[3] != "json" && fs[3] != "parquet") || len(fs[2]) != 36 {
		return 0, false
	}
	v, err := strconv.ParseInt(fs[0], 10, 64)
	return v, err == nil
}

// v2CheckpointAt reports whether the log holds a v2 checkpoint of version v.
func (t *Table) v2CheckpointAt(ctx context.Context, v int64) bool {
	keys, err := t.store.List(ctx, fmt.Sprintf("%s%020d.checkpoint.", logDir, v), "")
	if err != nil {
		return false
	}
	for _, k := range keys {
		if _, ok := isV2Checkpoint(strings.TrimPrefix(k, logDir)); ok {
			return true
		}
	}
	return false
}

// Snapshot loads the latest state: _last_checkpoint, then the checkpoint
// Parquet it names, then the JSON commits after it. Without
// _last_checkpoint, the log is listed to find the newest checkpoint.
func (t *Table) Snapshot(ctx context.Context) (*Snapshot, error) {
	return t.snapshot(ctx, false)
}

// LeanSnapshot is Snapshot for a long-lived writer: its memory per active
// file is the path, size, partition values and times, not the file's
// stats; it keeps no tombstones of the checkpoint it was loaded from.
// Files and Tombstones hold what commits applied since add (with stats)
// and remove. WriteCheckpoint of a lean snapshot streams the stats and the
// unexpired tombstones of that checkpoint into the new one, then drops
// them from memory again: the snapshot's memory stays that of the active
// files' paths plus the commits since the last checkpoint.
func (t *Table) LeanSnapshot(ctx context.Context) (*Snapshot, error) {
	return t.snapshot(ctx, true)
}

func (t *Table) snapshot(ctx context.Context, lean bool) (*Snapshot, error) {
	s := newSnapshot()
	s.lean = lean
	return s, t.load(ctx, s)
}

// load loads the latest state into s, a new snapshot of its mode.
func (t *Table) load(ctx context.Context, s *Snapshot) error {
	start, parts := int64(-1), int64(0)
	b, err := t.store.Get(ctx, logDir+"_last_checkpoint")
	switch {
	case err == nil:
		var lc lastCheckpoint
		if err := json.Unmarshal(b, &lc); err != nil {
			return fmt.Errorf("delta: %s: bad _last_checkpoint: %w", t.URL(), err)
		}
		if len(lc.V2Checkpoint) > 0 && string(lc.V2Checkpoint) != "null" {
			return t.errV2Checkpoint(fmt.Sprintf("_last_checkpoint (version %d)", lc.Version))
		}
		start = lc.Version
		if lc.Parts != nil {
			parts = *lc.Parts
		}
	case errors.Is(err, objstore.ErrNotExist):
		start, parts, err = t.findCheckpoint(ctx)
		if err != nil {
			return err
		}
	default:
		return fmt.Errorf("delta: %s: %w", t.URL(), err)
	}
	if start >= 0 {
		if err := t.readCheckpoint(ctx, s, start, parts); err != nil {
			return err
		}
	}
	if _, err := s.Update(ctx, t); err != nil {
		return err
	}
	return nil
}

// findCheckpoint lists the log for the newest complete checkpoint.
func (t *Table) findCheckpoint(ctx context.Context) (int64, int64, error) {
	keys, err := t.store.List(ctx, logDir, "")
	if err != nil {
		return -1, 0, fmt.Errorf("delta: %s: list log: %w", t.URL(), err)
	}
	best, bestParts, bestV2 := int64(-1), int64(0), int64(-1)
	multi := map[string]int{} // "v/parts" -> parts seen
	for _, k := range keys {
		name := strings.TrimPrefix(k, logDir)
		if v, ok := isV2Checkpoint(name); ok {
			bestV2 = max(bestV2, v)
			continue
		}
		fs := strings.Split(name, ".")
		if len(fs) < 3 || fs[1] != "checkpoint" || fs[len(fs)-1] != "parquet" {
			continue
		}
		v, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			continue
		}
		switch len(fs) {
		case 3: // classic single file
			if v > best {
				best, bestParts = v, 0
			}
		case 5: // v.checkpoint.part.parts.parquet
			n, _ := strconv.ParseInt(fs[3], 10, 64)
			id := fs[0] + "/" + fs[3]
			multi[id]++
			if int64(multi[id]) == n && v > best {
				best, bestParts = v, n
			}
		}
	}
	if bestV2 >= 0 && bestV2 >= best {
		return -1, 0, t.errV2Checkpoint(fmt.Sprintf("the newest checkpoint (version %d)", bestV2))
	}
	return best, bestParts, nil
}

// Update reads the commits after s.Version and applies them, returning
// them by version order. It stops at the first missing version.
func (s *Snapshot) Update(ctx context.Context, t *Table) ([][]Action, error) {
	var out [][]Action
	for {
		acts, err := t.ReadVersion(ctx, s.Version+1)
		if errors.Is(err, objstore.ErrNotExist) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("delta: %s: read version %d: %w", t.URL(), s.Version+1, err)
		}
		if err := s.Apply(s.Version+1, acts); err != nil {
			return out, err
		}
		out = append(out, acts)
	}
}

// noPartitionValues is the empty partitionValues the files of an
// unpartitioned table share in a Snapshot. Added files are never mutated,
// so it is never written to.
var noPartitionValues = NullStrMap{}

// Apply applies the actions of version v (which must be s.Version+1, or
// the checkpoint version when loading one).
func (s *Snapshot) Apply(v int64, actions []Action) error {
	for i := range actions {
		if err := s.apply(actions[i]); err != nil {
			return err
		}
	}
	s.Version = v
	return nil
}

func (s *Snapshot) apply(act Action) error {
	a := &act
	{
		switch {
		case a.Protocol != nil:
			s.Protocol = a.Protocol
		case a.MetaData != nil:
			sc, err := ParseSchema(a.MetaData.SchemaString)
			if err != nil {
				return err
			}
			s.Metadata, s.Schema = a.MetaData, sc
		case a.Add != nil:
			if a.Add.PartitionValues != nil && len(a.Add.PartitionValues) == 0 {
				// An unpartitioned table's files all have {}: one
				// shared map instead of one per file (48 bytes each).
				a.Add.PartitionValues = noPartitionValues
			}
			if old, ok := s.Files[a.Add.Path]; ok && s.small(old) {
				s.overlaySmall--
			}
			if s.small(a.Add) {
				s.overlaySmall++
			}
			s.Files[a.Add.Path] = a.Add
			delete(s.Tombstones, a.Add.Path)
		case a.Remove != nil:
			p := a.Remove.Path
			if old, ok := s.Files[p]; ok {
				if s.small(old) {
					s.overlaySmall--
				}
				delete(s.Files, p)
			} else if _, gone := s.Tombstones[p]; !gone && s.streamed {
				// A file of the checkpoint (as far as a valid log
				// tells: only active files are removed).
				s.baseFiles--
				if r := a.Remove; r.Size != nil && *r.Size < s.smallBelow {
					s.baseSmall--
				}
			}
			s.Tombstones[p] = a.Remove
			if s.tracked != nil {
				s.tracked[p] = true
			}
		case a.Txn != nil:
			s.Txns[a.Txn.AppID] = *a.Txn
		case a.DomainMetadata != nil:
			if a.DomainMetadata.Removed {
				delete(s.Domains, a.DomainMetadata.Domain)
			} else {
				s.Domains[a.DomainMetadata.Domain] = *a.DomainMetadata
			}
		}
	}
	return nil
}

// Clone returns a deep enough copy: maps are copied, actions shared (they
// are never mutated once applied).
func (s *Snapshot) Clone() *Snapshot {
	c := *s
	c.Files = make(map[string]*Add, len(s.Files))
	for k, v := range s.Files {
		c.Files[k] = v
	}
	c.Tombstones = make(map[string]*Remove, len(s.Tombstones))
	for k, v := range s.Tombstones {
		c.Tombstones[k] = v
	}
	c.Txns = make(map[string]Txn, len(s.Txns))
	for k, v := range s.Txns {
		c.Txns[k] = v
	}
	c.Domains = make(map[string]DomainMetadata, len(s.Domains))
	for k, v := range s.Domains {
		c.Domains[k] = v
	}
	c.tracked = nil
	return &c
}

// SortedFiles returns the active files ordered by path.
func (s *Snapshot) SortedFiles() []*Add {
	out := make([]*Add, 0, len(s.Files))
	for _, k := range sortedKeys(s.Files) {
		out = append(out, s.Files[k])
	}
	return out
}

// Reader and writer features this package implements.
var (
	readFeatures  = []string{"timestampNtz", "vacuumProtocolCheck", "domainMetadata", "appendOnly", "invariants"}
	writeFeatures = []string{"timestampNtz", "domainMetadata", "appendOnly", "vacuumProtocolCheck"}
)

// CheckRead returns an error wrapping ErrUnsupportedFeature, naming the
// feature, if this package cannot read the table correctly.
func (s *Snapshot) CheckRead() error {
	p := s.Protocol
	if p == nil {
		return nil
	}
	if p.MinReaderVersion > 3 {
		return fmt.Errorf("%w: reader version %d (supported: 1-3)", ErrUnsupportedFeature, p.MinReaderVersion)
	}
	if p.MinReaderVersion == 2 || slices.Contains(p.ReaderFeatures, "columnMapping") {
		if m := s.Metadata; m != nil && m.Configuration["delta.columnMapping.mode"] != "" && m.Configuration["delta.columnMapping.mode"] != "none" {
			return fmt.Errorf("%w: columnMapping (mode %s)", ErrUnsupportedFeature, m.Configuration["delta.columnMapping.mode"])
		}
	}
	for _, f := range p.ReaderFeatures {
		if f != "columnMapping" && !slices.Contains(readFeatures, f) {
			return fmt.Errorf("%w: reader feature %q", ErrUnsupportedFeature, f)
		}
	}
	return nil
}

// CheckWrite returns an error wrapping ErrUnsupportedFeature if this
// package cannot append to the table without breaking a protocol rule.
func (s *Snapshot) CheckWrite() error {
	if err := s.CheckRead(); err != nil {
		return err
	}
	p := s.Protocol
	if p == nil {
		return nil
	}
	switch {
	case p.MinWriterVersion <= 2:
		// appendOnly (we only append) and invariants (refused below).
	case p.MinWriterVersion == 7:
		for _, f := range p.WriterFeatures {
			// columnMapping with mode none (CheckRead refuses the others)
			// maps no names: plain appends are correct.
			if !slices.Contains(writeFeatures, f) && f != "invariants" && f != "columnMapping" {
				return fmt.Errorf("%w: writer feature %q", ErrUnsupportedFeature, f)
			}
		}
	default:
		return fmt.Errorf("%w: writer version %d (check constraints, change data feed, generated or identity columns, column mapping)", ErrUnsupportedFeature, p.MinWriterVersion)
	}
	if err := s.checkMetadataFeatures(); err != nil {
		return err
	}
	if s.Schema != nil && hasInvariants(*s.Schema) {
		return fmt.Errorf("%w: column invariants (delta.invariants) are not enforced by this writer", ErrUnsupportedFeature)
	}
	if s.Metadata != nil && len(s.Metadata.PartitionColumns) > 0 {
		return fmt.Errorf("%w: appending to a partitioned table (partition columns %v)", ErrUnsupportedFeature, s.Metadata.PartitionColumns)
	}
	return nil
}

func hasInvariants(t DataType) bool {
	for _, f := range t.Fields {
		if _, ok := f.Metadata["delta.invariants"]; ok {
			return true
		}
		if f.Type.Name == "struct" && hasInvariants(f.Type) {
			return true
		}
	}
	return false
}

// SnapshotAt loads the state at version v: the newest checkpoint at or
// before v, then the commits up to v.
func (t *Table) SnapshotAt(ctx context.Context, v int64) (*Snapshot, error) {
	return t.snapshotAt(ctx, v, false)
}

// LeanSnapshotAt is SnapshotAt with LeanSnapshot's memory.
func (t *Table) LeanSnapshotAt(ctx context.Context, v int64) (*Snapshot, error) {
	return t.snapshotAt(ctx, v, true)
}

func (t *Table) snapshotAt(ctx context.Context, v int64, lean bool) (*Snapshot, error) {
	s := newSnapshot()
	s.lean = lean
	return s, t.loadAt(ctx, s, v)
}

// loadAt loads the state at version v into s, a new snapshot of its mode.
func (t *Table) loadAt(ctx context.Context, s *Snapshot, v int64) error {
	keys, err := t.store.List(ctx, logDir, "")
	if err != nil {
		return fmt.Errorf("delta: %s: list log: %w", t.URL(), err)
	}
	best, bestV2 := int64(-1), int64(-1)
	for _, k := range keys {
		name := strings.TrimPrefix(k, logDir)
		if cv, ok := isV2Checkpoint(name); ok && cv <= v {
			bestV2 = max(bestV2, cv)
			continue
		}
		fs := strings.Split(name, ".")
		if len(fs) == 3 && fs[1] == "checkpoint" && fs[2] == "parquet" {
			if cv, err := strconv.ParseInt(fs[0], 10, 64); err == nil && cv <= v && cv > best {
				best = cv
			}
		}
	}
	if bestV2 >= 0 && bestV2 >= best {
		return t.errV2Checkpoint(fmt.Sprintf("the newest checkpoint at or before version %d (version %d)", v, bestV2))
	}
	if best >= 0 {
		if err := t.readCheckpoint(ctx, s, best, 0); err != nil {
			return err
		}
	}
	for s.Version < v {
		acts, err := t.ReadVersion(ctx, s.Version+1)
		if err != nil {
			return fmt.Errorf("delta: %s: version %d: %w", t.URL(), s.Version+1, err)
		}
		if err := s.Apply(s.Version+1, acts); err != nil {
			return err
		}
	}
	return nil
}
