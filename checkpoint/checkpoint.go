// Package checkpoint defines the one structured checkpoint form Flightline
// understands: Positions, a map from a partition key to the next position to
// read in that partition.
//
// Every other checkpoint is opaque bytes that only its source reads. A source
// whose position is per partition (Kafka, the generator) encodes its
// checkpoints as Positions so that sinks shared by several source instances
// can merge them per partition, to the maximum, without knowing anything else
// about the source. The encoding is canonical JSON (see Encode) so clients in
// any language can build and read it; docs/protocol.md specifies it.
package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Positions maps a partition key, such as "orders/3", to the next position
// (offset, row number) to read in that partition.
//
// A Positions value is a plain map: not safe for concurrent mutation.
type Positions map[string]int64

// ErrNotPositions is returned by Parse for bytes that are not in the
// mergeable form. Such checkpoints are opaque: compare them only for equality.
var ErrNotPositions = errors.New("checkpoint: not a mergeable positions checkpoint")

const prefix = `{"positions":{`

// Encode returns the canonical encoding of p:
//
//	{"positions":{"<key>":<next>,...}}
//
// with keys in byte order and no white space, so equal Positions encode to
// equal bytes. An empty p encodes to {"positions":{}}.
func (p Positions) Encode() []byte {
	keys := slices.Sorted(maps.Keys(p))
	b := make([]byte, 0, len(prefix)+len(keys)*24+2)
	b = append(b, prefix...)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		kq, _ := json.Marshal(k) // string marshalling cannot fail
		b = append(b, kq...)
		b = append(b, ':')
		b = strconv.AppendInt(b, p[k], 10)
	}
	return append(b, "}}"...)
}

// Parse decodes a mergeable checkpoint. It returns ErrNotPositions (wrapped)
// for anything else, including nil, so callers can fall back to treating the
// checkpoint as opaque.
func Parse(b []byte) (Positions, error) {
	if !bytes.HasPrefix(bytes.TrimSpace(b), []byte(`{`)) {
		return nil, ErrNotPositions
	}
	var doc struct {
		Positions map[string]json.Number `json:"positions"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil || doc.Positions == nil {
		return nil, fmt.Errorf("%w: %v", ErrNotPositions, err)
	}
	p := make(Positions, len(doc.Positions))
	for k, v := range doc.Positions {
		n, err := v.Int64()
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: position %q = %s is not a non-negative int64", ErrNotPositions, k, v)
		}
		p[k] = n
	}
	return p, nil
}

// Merge returns a new Positions holding, for every key of a or b, the larger
// position. It is how a sink written by several source instances combines
// their checkpoints: no instance can move another's partitions backwards.
func Merge(a, b Positions) Positions {
	out := make(Positions, len(a)+len(b))
	maps.Copy(out, a)
	for k, v := range b {
		if cur, ok := out[k]; !ok || v > cur {
			out[k] = v
		}
	}
	return out
}

// MergeAll combines the checkpoints of a pipeline's several writers (its
// instances): nil when every one is nil, the one non-nil checkpoint as it
// is (Positions or opaque) when there is one, else the Merge of all of
// them, which needs each to be Positions — Parse's error otherwise.
func MergeAll(cps ...[]byte) ([]byte, error) {
	var one []byte
	n := 0
	for _, cp := range cps {
		if cp != nil {
			one = cp
			n++
		}
	}
	if n < 2 {
		return one, nil
	}
	var acc Positions
	for _, cp := range cps {
		if cp == nil {
			continue
		}
		p, err := Parse(cp)
		if err != nil {
			return nil, err
		}
		acc = Merge(acc, p)
	}
	return acc.Encode(), nil
}

// Covers reports whether every position of p is at or behind the matching
// position of committed, i.e. a batch ending at p has already been committed
// by a writer that reached committed. A key absent from committed is not
// covered.
func Covers(committed, p Positions) bool {
	for k, v := range p {
		c, ok := committed[k]
		if !ok || v > c {
			return false
		}
	}
	return true
}

// Moved is the check that keeps two writers of one partition from both
// committing it, for sinks whose checkpoint is merged over several
// instances (each holding the positions it wrote). base is the merged
// checkpoint a writer resumed from at its claim; others is the merge of
// the other instances' positions now; p is what the writer's batch
// commits. It returns the first key of p (in byte order) whose position in
// others is past its position in base, or which base lacks: another
// instance moved that partition since the claim, so the writer's batch
// may overlap what that instance wrote, and the writer must re-open and
// resume from the merged checkpoint. ok is false when no key of p moved.
// Callers check replay (Covers) first: a batch the others cover is a
// replay, not a conflict.
func Moved(base, others, p Positions) (key string, at int64, was int64, ok bool) {
	for _, k := range slices.Sorted(maps.Keys(p)) {
		v, in := others[k]
		if !in {
			continue
		}
		if b, had := base[k]; !had || v > b {
			return k, v, b, true
		}
	}
	return "", 0, 0, false
}
