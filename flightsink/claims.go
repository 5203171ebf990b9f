package flightsink

import (
	"context"
	"fmt"
	"sync"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/flighterr"
)

// Claim says how Open claims a pipeline on a sink that keeps a record of
// its claims (the Flight server, for every sink it serves; see
// docs/protocol.md, "Rejoining a claim").
type Claim struct {
	// ID names the claimant, e.g. one run of a coordinator: opaque bytes,
	// at most endpoint.MaxNameSize of them. Empty claims anonymously.
	ID string
	// Rejoin asks to claim the pipeline again only if the newest claim the
	// sink recorded for it is ID's own, or the sink holds no record (it
	// restarted since). Otherwise Open, or the Writer's first batch, fails
	// with flightline.ErrReplaced and claims nothing: a coordinator that
	// retries after a broken stream never fences the one started after
	// it. Without Rejoin, Open claims the pipeline as usual (the newest
	// claim wins) and the claim is recorded under ID.
	Rejoin bool
}

// Claimer is implemented by sinks that take a Claim with Open: Client,
// which sends it to the sink's Flight server. The coordinator uses it
// when the sink has it, and Open otherwise.
type Claimer interface {
	OpenClaim(ctx context.Context, p Pipeline, c Claim) (Writer, []byte, error)
}

// maxClaimRecords bounds the pipelines whose newest claim a server
// remembers; past it, a record is dropped, and a rejoin of that pipeline
// claims as if the server had restarted.
const maxClaimRecords = 1 << 16

// claimRegistry is the server's record of claims: per pipeline, the
// newest claim it made and the ids of the few before it, and a lock that
// makes a rejoin's check, the sink's Open and the record one step, so
// that no claim slips between a rejoin's check and its Open.
type claimRegistry struct {
	mu    sync.Mutex
	locks map[Pipeline]*claimLock
	recs  map[Pipeline]*claimRecord
}

type claimLock struct {
	ch   chan struct{} // holds a token while the lock is held
	refs int
}

type claimRecord struct {
	n      uint64            // claims of the pipeline this server made
	newest string            // the id of the newest ("" anonymous)
	ids    map[string]uint64 // recent ids → their claim number
}

// lock takes p's claim lock, or fails when ctx ends first.
func (r *claimRegistry) lock(ctx context.Context, p Pipeline) (unlock func(), err error) {
	r.mu.Lock()
	if r.locks == nil {
		r.locks, r.recs = map[Pipeline]*claimLock{}, map[Pipeline]*claimRecord{}
	}
	l := r.locks[p]
	if l == nil {
		l = &claimLock{ch: make(chan struct{}, 1)}
		r.locks[p] = l
	}
	l.refs++
	r.mu.Unlock()
	release := func() {
		r.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(r.locks, p)
		}
		r.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// check refuses a rejoin of p by id when a newer claim is recorded.
// Callers hold p's lock.
func (r *claimRegistry) check(p Pipeline, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.recs[p]
	if rec == nil || rec.newest == id && id != "" {
		return nil
	}
	return replacedError(p, rec, id)
}

// record notes a claim of p by id and returns its number. Callers hold
// p's lock.
func (r *claimRegistry) record(p Pipeline, id string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.recs[p]
	if rec == nil {
		if len(r.recs) >= maxClaimRecords {
			for k := range r.recs {
				delete(r.recs, k)
				break
			}
		}
		rec = &claimRecord{ids: map[string]uint64{}}
		r.recs[p] = rec
	}
	rec.n++
	rec.newest = id
	if id != "" {
		if len(rec.ids) >= 8 {
			for k, n := range rec.ids {
				if n < rec.n-8 {
					delete(rec.ids, k)
				}
			}
		}
		rec.ids[id] = rec.n
	}
	return rec.n
}

// replaced returns ErrReplaced when a claim newer than claim number n
// (made by this server for id) is recorded for p by another claimant, nil
// otherwise.
func (r *claimRegistry) replaced(p Pipeline, id string, n uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.recs[p]
	if rec == nil || rec.n == n || id != "" && rec.newest == id {
		return nil
	}
	return replacedError(p, rec, id)
}

func replacedError(p Pipeline, rec *claimRecord, id string) error {
	ours := "ours is older"
	if n, ok := rec.ids[id]; ok && id != "" {
		ours = fmt.Sprintf("ours %d", n)
	}
	return fmt.Errorf("%w: pipeline %q was claimed by a newer coordinator (claim %d on this sink; %s); this run stops — start it again to take over",
		flightline.ErrReplaced, flighterr.Clip(p.ID), rec.n, ours)
}
