package checkpoint

import "bytes"

// The functions below take checkpoints as the bytes a sink stores, opaque
// or Positions alike: the sinks' replay and merge rules, in one place.

// Replayed reports whether a batch carrying cp was already committed by a
// pipeline whose last committed checkpoint is last: cp equals last, or both
// are mergeable Positions and last covers cp. A nil last (nothing
// committed) covers nothing. Sinks call it (through flightsink.Begin) to
// make replays no-ops.
func Replayed(last, cp []byte) bool {
	if last == nil {
		return false
	}
	if bytes.Equal(last, cp) {
		return true
	}
	l, err := Parse(last)
	if err != nil {
		return false
	}
	c, err := Parse(cp)
	if err != nil {
		return false
	}
	return Covers(l, c)
}

// Next returns the checkpoint an exactly-once sink stores when it commits a
// batch carrying cp on top of last: the per-key maximum of the two when both
// are mergeable Positions (canonically encoded), otherwise cp itself. This
// is the contract's merge rule: a source instance that owns only some of
// the partitions (after a rebalance, or while a dead predecessor still
// holds the others) never erases the positions of the rest. The result is
// a new slice; neither argument is kept.
func Next(last, cp []byte) []byte {
	if last != nil {
		l, errL := Parse(last)
		c, errC := Parse(cp)
		if errL == nil && errC == nil {
			return Merge(l, c).Encode()
		}
	}
	return bytes.Clone(cp)
}

// Same reports whether a and b name the same position: equal bytes, or
// both mergeable Positions with equal positions (whatever their encoding).
// The DoPut resume_after check uses it.
func Same(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	pa, errA := Parse(a)
	pb, errB := Parse(b)
	return errA == nil && errB == nil && Covers(pa, pb) && Covers(pb, pa)
}
