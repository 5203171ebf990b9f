package deltalog

import (
	"context"
	"fmt"
	"time"
)

// StreamedSnapshot is Snapshot for a long-lived appender of a table of
// any size: it keeps nothing per file of the checkpoint it was loaded from
// (those files stay in the checkpoint, read again when needed: by
// WriteCheckpoint, which streams them into the next checkpoint, and by
// EachFile), only their number. Files and Tombstones hold what the commits
// since that checkpoint added and removed, as in a LeanSnapshot; after
// WriteCheckpoint both are empty again. So the snapshot's memory is that
// of the commits since the last checkpoint, whatever the table's size.
//
// Files is therefore not the table's file set: FileCount counts it, and
// EachFile visits it. Files of smallBelow bytes or more (or with a
// deletion vector) are not counted by SmallFiles; smallBelow 0 counts
// none. A snapshot whose checkpoint is deleted (a cleanup) before it
// writes the next one cannot checkpoint again (WriteCheckpoint fails);
// load a new one.
func (t *Table) StreamedSnapshot(ctx context.Context, smallBelow int64) (*Snapshot, error) {
	s := newStreamed(smallBelow)
	return s, t.load(ctx, s)
}

// StreamedSnapshotAt is SnapshotAt with StreamedSnapshot's memory.
func (t *Table) StreamedSnapshotAt(ctx context.Context, v int64, smallBelow int64) (*Snapshot, error) {
	s := newStreamed(smallBelow)
	return s, t.loadAt(ctx, s, v)
}

func newStreamed(smallBelow int64) *Snapshot {
	s := newSnapshot()
	s.lean, s.streamed, s.smallBelow = true, true, smallBelow
	return s
}

// Streamed reports whether s is a StreamedSnapshot.
func (s *Snapshot) Streamed() bool { return s.streamed }

// small reports whether a counts as a small file (see StreamedSnapshot).
func (s *Snapshot) small(a *Add) bool {
	return a.Size < s.smallBelow && len(a.DeletionVector) == 0
}

// FileCount is the number of active files (len(Files) but for a streamed
// snapshot, which counts the checkpoint's too).
func (s *Snapshot) FileCount() int64 { return s.baseFiles + int64(len(s.Files)) }

// SmallFiles is the number of active files under the smallBelow of a
// streamed snapshot (0 for the others). The checkpoint's files removed
// since by a remove without a size are still counted, so it may be high
// until the next checkpoint; EachFile tells.
func (s *Snapshot) SmallFiles() int64 { return s.baseSmall + s.overlaySmall }

// Track starts recording the paths that the commits applied from now on
// remove, for Removed: a compaction planned on s (or on a Clone of it)
// checks with it that its inputs are still active when it commits. It
// restarts the record if one was running.
func (s *Snapshot) Track() { s.tracked = map[string]bool{} }

// Untrack stops the record Track started.
func (s *Snapshot) Untrack() { s.tracked = nil }

// Removed reports whether a commit applied since Track removed path; ok is
// false when s is not tracking (the answer is unknown).
func (s *Snapshot) Removed(path string) (removed, ok bool) {
	if s.tracked == nil {
		return false, false
	}
	return s.tracked[path], true
}

// scanColumns are the columns EachFile reads of a checkpoint: the add's
// fields but its stats and tags.
var scanColumns = []string{"add.path", "add.partitionValues", "add.size", "add.modificationTime", "add.deletionVector"}

// loadColumns are the columns a streamed snapshot loads of its checkpoint:
// the table's state and its files' sizes (for SmallFiles).
var loadColumns = []string{"txn", "metaData", "protocol", "domainMetadata", "add.path", "add.size", "add.deletionVector"}

// EachFile calls fn with every active file of s: of a streamed snapshot,
// the files of its checkpoint that no later commit removed or re-added
// (read from the store, a row group at a time; without their stats and
// tags), then Files (in no order). fn's Add is valid only during the call,
// and its strings may alias the decoder's buffers (strings.Clone what is
// kept). s must not change during the call: use a Clone of a snapshot
// that a writer keeps applying commits to.
func (t *Table) EachFile(ctx context.Context, s *Snapshot, fn func(*Add) error) error {
	if s.streamed && s.CheckpointVersion >= 0 {
		err := t.eachCheckpointAction(ctx, s.CheckpointVersion, s.checkpointParts, scanColumns, func(a Action) error {
			if a.Add == nil || s.overlays(a.Add.Path) {
				return nil
			}
			return fn(a.Add)
		})
		if err != nil {
			return fmt.Errorf("delta: the files of checkpoint %d: %w", s.CheckpointVersion, err)
		}
	}
	for _, a := range s.Files {
		if err := fn(a); err != nil {
			return err
		}
	}
	return nil
}

// overlays reports whether a commit since the checkpoint of streamed s
// added or removed path: the checkpoint's row for it is stale.
func (s *Snapshot) overlays(path string) bool {
	if _, ok := s.Files[path]; ok {
		return true
	}
	_, ok := s.Tombstones[path]
	return ok
}

// streamedCheckpointActions is checkpointActions of a streamed snapshot:
// the files and unexpired tombstones of its checkpoint that no commit
// since removed or re-added, streamed from it with every column, then
// those of the commits since. Without its checkpoint it fails: the
// snapshot does not know the checkpoint's files.
func (t *Table) streamedCheckpointActions(ctx context.Context, s *Snapshot, expired func(*Remove) bool, yield func(*Action) error) error {
	if s.CheckpointVersion >= 0 {
		err := t.eachCheckpointAction(ctx, s.CheckpointVersion, s.checkpointParts, fileActionColumns, func(a Action) error {
			switch {
			case a.Add != nil:
				if s.overlays(a.Add.Path) {
					return nil
				}
				a.Add.DataChange = false
				return yield(&a)
			case a.Remove != nil:
				if s.overlays(a.Remove.Path) || expired(a.Remove) {
					return nil
				}
				a.Remove.DataChange = false
				return yield(&a)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("delta: checkpoint %d of a streamed snapshot needs the files of checkpoint %d: %w", s.Version, s.CheckpointVersion, err)
		}
	}
	return yieldSince(s, nil, expired, yield)
}

// yieldSince yields the files of s (but those skip says; nil: none) and
// its unexpired tombstones, by path, as copies with dataChange false: the
// commits since a lean or streamed snapshot's checkpoint.
func yieldSince(s *Snapshot, skip func(*Add) bool, expired func(*Remove) bool, yield func(*Action) error) error {
	var add Add
	act := Action{Add: &add}
	for _, k := range sortedKeys(s.Files) {
		if a := s.Files[k]; skip == nil || !skip(a) {
			add = *a
			add.DataChange = false
			if err := yield(&act); err != nil {
				return err
			}
		}
	}
	var r Remove
	act = Action{Remove: &r}
	for _, k := range sortedKeys(s.Tombstones) {
		if r = *s.Tombstones[k]; !expired(&r) {
			r.DataChange = false
			if err := yield(&act); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkpointed resets streamed s after WriteCheckpoint wrote its
// checkpoint, holding files active files of which small small ones: they
// are the checkpoint's now.
func (s *Snapshot) checkpointed(files, small int64) {
	s.Files, s.Tombstones = map[string]*Add{}, map[string]*Remove{}
	s.baseFiles, s.baseSmall, s.overlaySmall = files, small, 0
	s.CheckpointVersion, s.checkpointParts = s.Version, 0
}

// expiredBefore returns the test of a tombstone the checkpoints of s
// written at now leave out: deleted before the table's retention.
func (s *Snapshot) expiredBefore(now time.Time) func(*Remove) bool {
	retention, known := s.DeletedFileRetention()
	minTS := now.Add(-retention).UnixMilli()
	return func(r *Remove) bool {
		// A tombstone without deletionTimestamp counts as deleted at 0.
		return known && (r.DeletionTimestamp == nil || *r.DeletionTimestamp <= minTS)
	}
}
