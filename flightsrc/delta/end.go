package delta

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/deltalog"
)

var _ flightsrc.Ender = (*Source)(nil)

// End implements flightsrc.Ender: the end of the table is its version V
// when End is called. A checkpoint covers it when no data of versions up
// to V is left to read after it: its position is at the end of its file
// list (the snapshot's, or its commit's adds), and every version between
// it and V adds no data. Row counts come from the add actions' stats
// (numRecords), which Flightline's Delta sink, delta-rs and Spark write;
// a file without them makes Covered fail rather than guess.
func (s *Source) End(ctx context.Context, stream string) (flightsrc.End, error) {
	if stream != s.stream {
		return flightsrc.End{}, fmt.Errorf("%w: no stream %q (this source serves %q)", flightline.ErrNotFound, stream, s.stream)
	}
	snap, _, err := s.snapshot(ctx)
	if err != nil {
		return flightsrc.End{}, err
	}
	end := snap.Version
	e := &ender{s: s, end: end, data: map[int64][]*deltalog.Add{}}
	return flightsrc.End{Desc: fmt.Sprintf("version %d", end), Covered: e.covered}, nil
}

type ender struct {
	s   *Source
	end int64

	mu   sync.Mutex
	data map[int64][]*deltalog.Add // a version's data adds (versions are immutable)
}

// adds returns the files commit v adds with dataChange, as a tail read
// lists them.
func (e *ender) adds(ctx context.Context, v int64) ([]*deltalog.Add, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a, ok := e.data[v]; ok {
		return a, nil
	}
	acts, err := e.s.t.ReadVersion(ctx, v)
	if err != nil {
		return nil, err
	}
	var out []*deltalog.Add
	for _, a := range acts {
		if a.Add != nil && a.Add.DataChange {
			out = append(out, a.Add)
		}
	}
	e.data[v] = out
	return out, nil
}

// atEnd reports whether position (file, row) is past every row of files.
func atEnd(files []*deltalog.Add, file int, row int64) (bool, error) {
	if file >= len(files) {
		return true, nil
	}
	if file < len(files)-1 {
		return false, nil
	}
	var st struct {
		NumRecords *int64 `json:"numRecords"`
	}
	f := files[file]
	if err := json.Unmarshal([]byte(f.Stats), &st); err != nil || st.NumRecords == nil {
		return false, fmt.Errorf("%w: delta source: %s has no numRecords stats: cannot tell where the table ends", flightline.ErrInvalidInput, f.Path)
	}
	return row >= *st.NumRecords, nil
}

func (e *ender) covered(ctx context.Context, cp []byte) (bool, error) {
	var pos Position
	var files []*deltalog.Add
	if len(cp) == 0 {
		// Nothing read: covered only when the table holds no data at V.
		snap, err := e.s.t.SnapshotAt(ctx, e.end)
		if err != nil {
			return false, err
		}
		return len(snap.SortedFiles()) == 0, nil
	}
	pos, err := ParsePosition(cp)
	if err != nil {
		return false, err
	}
	if !pos.Snapshot && pos.Version > e.end {
		return true, nil // tail positions past V: every earlier version read
	}
	if pos.Snapshot {
		snap, err := e.s.t.SnapshotAt(ctx, pos.Version)
		if err != nil {
			return false, err
		}
		files = snap.SortedFiles()
	} else if files, err = e.adds(ctx, pos.Version); err != nil {
		return false, err
	}
	done, err := atEnd(files, pos.File, pos.Row)
	if err != nil || !done {
		return false, err
	}
	for v := pos.Version + 1; v <= e.end; v++ {
		a, err := e.adds(ctx, v)
		if err != nil {
			return false, err
		}
		if len(a) > 0 {
			return false, nil
		}
	}
	return true, nil
}
