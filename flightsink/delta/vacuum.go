package delta

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
)

// DefaultVacuumInterval is how often at most a sink with Config.Vacuum "auto"
// cleans its table up.
const DefaultVacuumInterval = time.Hour

// VacuumInterval sets how often at most the background cleanup runs
// (default 1h).
func VacuumInterval(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: vacuum interval %v <= 0", flightline.ErrInvalidInput, d)
		}
		o.vacuumEvery = d
		return nil
	}
}

// LogRetention overrides the table's delta.logRetentionDuration (default
// 30 days) for cleanups of this sink; 0 keeps the table's.
func LogRetention(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: log retention %v < 0", flightline.ErrInvalidInput, d)
		}
		o.logRet = d
		return nil
	}
}

// FileRetention overrides the table's delta.deletedFileRetentionDuration
// (default 7 days) for cleanups of this sink; 0 keeps the table's.
func FileRetention(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: file retention %v < 0", flightline.ErrInvalidInput, d)
		}
		o.fileRet = d
		return nil
	}
}

// VacuumResult says what a cleanup deleted (or, dry, would delete).
type VacuumResult struct {
	DryRun bool
	// Oldest is the oldest version readers can still load after the
	// cleanup (-1: the table does not exist).
	Oldest int64
	// LogFiles and DataFiles are the deleted keys.
	LogFiles  []string
	DataFiles []string
	// Note says why a part was skipped ("" when none was).
	Note string
}

// Vacuum cleans the table of target up, in this order:
//
//  1. The log: with R the log retention, the newest classic checkpoint
//     whose commit is older than now−R becomes the oldest version kept
//     (E); commits, checkpoints and checksums of versions before E are
//     deleted, oldest first. Without such a checkpoint nothing is.
//  2. Data files, once E is at least the deleted-file retention D old: a
//     .parquet file outside hidden directories is deleted when no version
//     from E on references it: it is not active now nor at E, and it was
//     last written before E's commit time minus D (so an append or
//     compaction still on its way to a commit, or one that committed
//     after E, keeps its file; a file written before that and not active
//     at E was removed at or before E, so at least D ago). Files removed
//     by a compaction go after about R+D then; files no commit ever
//     referenced (a killed compaction's) likewise.
//
// txn and domain metadata (the pipelines' checkpoints) are never expired:
// every checkpoint holds all of them. Data cleanup needs the store to list
// modification times (objstore.InfoLister); without it only the log is
// cleaned. With dryRun nothing is deleted.
func (s *Sink) Vacuum(ctx context.Context, target string, dryRun bool) (VacuumResult, error) {
	t, err := s.table(target)
	if err != nil {
		return VacuumResult{}, err
	}
	return vacuumTable(ctx, t, time.Now(), s.o.logRet, s.o.fileRet, dryRun)
}

func vacuumTable(ctx context.Context, t *deltalog.Table, now time.Time, logRet, fileRet time.Duration, dryRun bool) (VacuumResult, error) {
	res := VacuumResult{DryRun: dryRun, Oldest: -1}
	snap, err := t.StreamedSnapshot(ctx, 0)
	if err != nil || snap.Version < 0 {
		return res, err
	}
	if err := snap.CheckRead(); err != nil {
		return res, fmt.Errorf("delta vacuum %s: %w", t.URL(), err)
	}
	if logRet == 0 {
		d, ok := snap.LogRetention()
		if !ok {
			res.Note = "delta.logRetentionDuration not understood: nothing deleted"
			return res, nil
		}
		logRet = d
	}
	if fileRet == 0 {
		d, ok := snap.DeletedFileRetention()
		if !ok {
			res.Note = "delta.deletedFileRetentionDuration not understood: nothing deleted"
			return res, nil
		}
		fileRet = d
	}
	logs, err := t.LogFiles(ctx)
	if err != nil {
		return res, err
	}
	// The classic single-file checkpoints, oldest first, and the oldest
	// commit still in the log.
	var cps []int64
	oldestCommit := int64(-1)
	for _, f := range logs {
		if f.Kind == "checkpoint" && strings.HasSuffix(f.Key, fmt.Sprintf("%020d.checkpoint.parquet", f.Version)) && f.Version <= snap.Version {
			cps = append(cps, f.Version)
		}
		if f.Kind == "commit" && oldestCommit < 0 {
			oldestCommit = f.Version
		}
	}
	// E: the newest checkpoint older than the log retention (binary
	// search: commit times grow with versions).
	cut := now.Add(-logRet)
	i := sort.Search(len(cps), func(i int) bool {
		ts, ok := t.CommitTime(ctx, cps[i])
		return !ok || ts.After(cut)
	})
	oldest := int64(-1)
	if i > 0 {
		oldest = cps[i-1]
		for _, f := range logs {
			if f.Version >= oldest {
				break
			}
			res.LogFiles = append(res.LogFiles, f.Key)
		}
	} else {
		// Nothing expires: the oldest loadable version is version 0 when
		// its commit is there, else the oldest checkpoint.
		switch {
		case oldestCommit == 0:
			oldest = 0
		case len(cps) > 0:
			oldest = cps[0]
		default:
			res.Note = "the log has neither version 0 nor a checkpoint: no data file deleted"
			return res, nil
		}
	}
	res.Oldest = oldest
	if !dryRun {
		for _, k := range res.LogFiles {
			if err := t.Store().Delete(ctx, k); err != nil {
				return res, fmt.Errorf("delta vacuum %s: delete %s: %w", t.URL(), k, err)
			}
		}
	}
	// Data files.
	oldestTS, ok := t.CommitTime(ctx, oldest)
	if !ok {
		res.Note = fmt.Sprintf("version %d has no commit timestamp: no data file deleted", oldest)
		return res, nil
	}
	if oldestTS.After(now.Add(-fileRet)) {
		res.Note = fmt.Sprintf("the oldest version kept (%d) is younger than the deleted-file retention (%v): no data file deleted", oldest, fileRet)
		return res, nil
	}
	atOldest, err := t.StreamedSnapshotAt(ctx, oldest, 0)
	if err != nil {
		return res, err
	}
	// The files of both versions, as 64-bit hashes of their paths: 8
	// bytes a file however long its path. A collision only keeps a file.
	var protected pathSet
	for _, s := range []*deltalog.Snapshot{snap, atOldest} {
		if err := t.EachFile(ctx, s, func(a *deltalog.Add) error {
			protected.add(filePath(a.Path))
			return nil
		}); err != nil {
			return res, fmt.Errorf("delta vacuum %s: %w", t.URL(), err)
		}
	}
	protected.seal()
	before := oldestTS.Add(-fileRet)
	// The listing is walked a page at a time: only what is deleted is
	// kept.
	ok, err = objstore.WalkInfo(ctx, t.Store(), "", func(in objstore.ObjectInfo) error {
		if !hidden(in.Key) && strings.HasSuffix(in.Key, ".parquet") && !protected.has(in.Key) && in.ModTime.Before(before) {
			res.DataFiles = append(res.DataFiles, in.Key)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("delta vacuum %s: list: %w", t.URL(), err)
	}
	if !ok {
		res.Note = "the store cannot list modification times: no data file deleted"
		return res, nil
	}
	slices.Sort(res.DataFiles)
	if !dryRun {
		for _, k := range res.DataFiles {
			if err := t.Store().Delete(ctx, k); err != nil {
				return res, fmt.Errorf("delta vacuum %s: delete %s: %w", t.URL(), k, err)
			}
		}
	}
	return res, nil
}

// hidden reports whether a key is in or is a hidden file or directory
// (_delta_log, _flightline, .tmp files), which Delta's VACUUM leaves alone.
func hidden(key string) bool {
	for _, seg := range strings.Split(key, "/") {
		if strings.HasPrefix(seg, "_") || strings.HasPrefix(seg, ".") {
			return true
		}
	}
	return false
}

// pathSet is a set of paths kept as sorted 64-bit FNV-1a hashes.
type pathSet struct{ h []uint64 }

func hashPath(p string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(p))
	return h.Sum64()
}

func (s *pathSet) add(p string) { s.h = append(s.h, hashPath(p)) }

// seal sorts the set; has needs it.
func (s *pathSet) seal() { slices.Sort(s.h) }

func (s *pathSet) has(p string) bool {
	_, ok := slices.BinarySearch(s.h, hashPath(p))
	return ok
}
