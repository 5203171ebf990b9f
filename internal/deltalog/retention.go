package deltalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flightline/flightline/internal/objstore"
)

// DefaultLogRetention is how long a table without
// delta.logRetentionDuration keeps its log history (the protocol's
// default).
const DefaultLogRetention = 30 * 24 * time.Hour

// LogRetention returns the table's log retention
// (delta.logRetentionDuration). ok is false when the property is set but
// not understood: clean up nothing then.
func (s *Snapshot) LogRetention() (d time.Duration, ok bool) {
	if s.Metadata == nil {
		return DefaultLogRetention, true
	}
	v, set := s.Metadata.Configuration["delta.logRetentionDuration"]
	if !set {
		return DefaultLogRetention, true
	}
	return parseInterval(v)
}

// LogFile is an entry of _delta_log/ a cleanup may delete: a commit
// (N.json), a classic checkpoint or a part of one, or a checksum (N.crc).
type LogFile struct {
	Key     string
	Version int64
	// Kind is "commit", "checkpoint" or "crc".
	Kind string
}

// LogFiles lists the commits, classic checkpoints and checksums of the log
// by version order. Other entries (_last_checkpoint, v2 checkpoints, temp
// files) are left out.
func (t *Table) LogFiles(ctx context.Context) ([]LogFile, error) {
	keys, err := t.store.List(ctx, logDir, "")
	if err != nil {
		return nil, fmt.Errorf("delta: %s: list log: %w", t.URL(), err)
	}
	var out []LogFile
	for _, k := range keys {
		name := strings.TrimPrefix(k, logDir)
		if strings.Contains(name, "/") {
			continue
		}
		fs := strings.Split(name, ".")
		v, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil || len(fs[0]) != 20 {
			continue
		}
		switch {
		case len(fs) == 2 && fs[1] == "json":
			out = append(out, LogFile{Key: k, Version: v, Kind: "commit"})
		case len(fs) == 2 && fs[1] == "crc":
			out = append(out, LogFile{Key: k, Version: v, Kind: "crc"})
		case (len(fs) == 3 || len(fs) == 5) && fs[1] == "checkpoint" && fs[len(fs)-1] == "parquet":
			out = append(out, LogFile{Key: k, Version: v, Kind: "checkpoint"})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// LastCheckpointVersion returns the version _last_checkpoint names (-1:
// none).
func (t *Table) LastCheckpointVersion(ctx context.Context) (int64, error) {
	b, err := t.store.Get(ctx, logDir+"_last_checkpoint")
	if errors.Is(err, objstore.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return -1, fmt.Errorf("delta: %s: %w", t.URL(), err)
	}
	var lc lastCheckpoint
	if err := json.Unmarshal(b, &lc); err != nil {
		return -1, fmt.Errorf("delta: %s: bad _last_checkpoint: %w", t.URL(), err)
	}
	return lc.Version, nil
}

// CommitTime returns the commitInfo timestamp of version v (ok false when
// the commit has none or is gone).
func (t *Table) CommitTime(ctx context.Context, v int64) (time.Time, bool) {
	acts, err := t.ReadVersion(ctx, v)
	if err != nil {
		return time.Time{}, false
	}
	for _, a := range acts {
		if a.CommitInfo == nil {
			continue
		}
		if ts, ok := a.CommitInfo["timestamp"].(float64); ok && ts > 0 {
			return time.UnixMilli(int64(ts)), true
		}
	}
	return time.Time{}, false
}
