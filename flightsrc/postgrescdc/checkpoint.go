package postgrescdc

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pglogrepl"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/incsrc"
)

// Checkpoint is the source's checkpoint, as JSON:
//
//	{"lsn":"0/1A2B3C8"}                                   streaming
//	{"lsn":"0/1A2B3C8","tx":"0/1A2C000","skip":5000}      inside a large transaction
//	{"lsn":"0/1A2B3C8","snapshot":{"after":["42"]}}       inside the initial snapshot
//
// plus "filters" after a snapshot was resumed (below).
//
// Streaming: every transaction whose commit LSN is at most LSN has been
// read; the read resumes with the first later one. Tx and Skip: the first
// Skip changes of the transaction committing at Tx have been read too (a
// transaction larger than a batch is sent in several batches; memory stays
// bounded and the resume is exact).
//
// Snapshot: LSN is the slot's consistent point (the LSN of its exported
// snapshot) and Snapshot.After the primary key, as text, of the last row
// read; the snapshot goes on with the rows after it, then streaming starts
// at LSN.
//
// The exported snapshot dies with the connection that created the slot, so
// a snapshot resumed after a restart reads the rest of the table (keys after
// After) in a new snapshot, taken later. The changes committed between the
// slot's consistent point and that new snapshot are then streamed although
// the new snapshot already holds some of them. A Filter records the new
// snapshot (its xmin, xmax and in-progress transaction ids, as
// pg_current_snapshot says) with the key range it covers: while streaming,
// a change to a key in that range made by a transaction the snapshot
// already saw is skipped, every other change is applied, so each change
// reaches the output exactly once. A filter is dropped once the stream is
// past Until, the WAL position taken inside that snapshot (every
// transaction it saw committed before Until).
type Checkpoint struct {
	LSN      string    `json:"lsn"`
	Tx       string    `json:"tx,omitempty"`
	Skip     int64     `json:"skip,omitempty"`
	Snapshot *SnapPos  `json:"snapshot,omitempty"`
	Filters  []*Filter `json:"filters,omitempty"`
}

// SnapPos is a position inside the initial snapshot.
type SnapPos struct {
	// After is the primary key (text form, in key column order) of the last
	// row read; empty before the first.
	After []string `json:"after"`
}

// Filter is a snapshot taken when a snapshot read resumed (see Checkpoint).
type Filter struct {
	// From is the key after which this snapshot's range starts; the range
	// ends at the next filter's From.
	From  []string `json:"from"`
	Xmin  uint64   `json:"xmin"`
	Xmax  uint64   `json:"xmax"`
	Xip   []uint64 `json:"xip,omitempty"`
	Until string   `json:"until"`
}

// state is a Checkpoint decoded.
type state struct {
	lsn     pglogrepl.LSN
	tx      pglogrepl.LSN
	skip    int64
	snap    *SnapPos
	filters []*Filter
	until   []pglogrepl.LSN // filters' Until, parsed
}

func (s state) encode() []byte {
	c := Checkpoint{LSN: s.lsn.String(), Snapshot: s.snap, Filters: s.filters}
	if s.tx != 0 {
		c.Tx, c.Skip = s.tx.String(), s.skip
	}
	b, _ := json.Marshal(c) // strings, numbers and slices of them: cannot fail
	return b
}

// ParseCheckpoint decodes a checkpoint made by the source. Anything else is
// flightline.ErrInvalidInput.
func ParseCheckpoint(b []byte) (Checkpoint, error) {
	var c Checkpoint
	if !incsrc.DecodeCheckpoint(b, &c) || c.LSN == "" {
		return Checkpoint{}, fmt.Errorf("%w: not a postgres-cdc checkpoint: %q", flightline.ErrInvalidInput, b)
	}
	return c, nil
}

func parseState(b []byte) (state, error) {
	c, err := ParseCheckpoint(b)
	if err != nil {
		return state{}, err
	}
	bad := func(what string, err error) error {
		return fmt.Errorf("%w: postgres-cdc checkpoint %q: %s: %v", flightline.ErrInvalidInput, b, what, err)
	}
	var s state
	if s.lsn, err = pglogrepl.ParseLSN(c.LSN); err != nil {
		return state{}, bad("lsn", err)
	}
	if c.Tx != "" {
		if s.tx, err = pglogrepl.ParseLSN(c.Tx); err != nil {
			return state{}, bad("tx", err)
		}
		if c.Skip < 0 {
			return state{}, bad("skip", fmt.Errorf("negative"))
		}
		s.skip = c.Skip
	}
	s.snap = c.Snapshot
	s.filters = c.Filters
	for _, f := range c.Filters {
		u, err := pglogrepl.ParseLSN(f.Until)
		if err != nil {
			return state{}, bad("filter until", err)
		}
		s.until = append(s.until, u)
	}
	return s, nil
}

// prune drops the filters the stream has passed.
func (s *state) prune() {
	var f []*Filter
	var u []pglogrepl.LSN
	for i := range s.filters {
		if s.lsn < s.until[i] {
			f, u = append(f, s.filters[i]), append(u, s.until[i])
		}
	}
	s.filters, s.until = f, u
}

// sees reports whether the snapshot of f saw transaction xid committed.
// Transaction ids compare modulo 2^32 (pgoutput sends 32-bit ids).
func (f *Filter) sees(xid uint32) bool {
	before := func(a uint32, b uint64) bool { return int32(a-uint32(b)) < 0 }
	if before(xid, f.Xmin) {
		return true
	}
	if !before(xid, f.Xmax) {
		return false
	}
	for _, x := range f.Xip {
		if uint32(x) == xid {
			return false
		}
	}
	return true
}

// parseSnapshot parses pg_current_snapshot()'s text: xmin:xmax:xip,xip.
func parseSnapshot(s string) (*Filter, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return nil, fmt.Errorf("snapshot %q: not xmin:xmax:xip", s)
	}
	f := &Filter{}
	var err error
	if f.Xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return nil, err
	}
	if f.Xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return nil, err
	}
	if parts[2] != "" {
		for _, x := range strings.Split(parts[2], ",") {
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return nil, err
			}
			f.Xip = append(f.Xip, v)
		}
	}
	return f, nil
}
