package bigquery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/bqerr"
)

// retryable reports whether err is worth retrying: a transient error the
// sink marks itself, or one of BigQuery's quota and transient errors
// (bqerr.Retryable).
func retryable(err error) bool {
	return errors.As(err, new(transient)) || bqerr.Retryable(err)
}

// classify wraps a BigQuery error in the flightline error it means
// (bqerr.Classify holds the mapping the sink and the source share).
func classify(err error, what string) error { return bqerr.Classify(err, "bigquery", what) }

// retry runs f until it succeeds, fails with an error that is not
// retryable, or has failed s.o.retries times with backoff doubling from
// s.o.backoff (capped at 10s); a retryable error that outlasts the
// attempts is ErrUnavailable. Every error is classified.
func (s *Sink) retry(ctx context.Context, what string, f func() error) error {
	wait := s.o.backoff
	for attempt := 1; ; attempt++ {
		if s.conn != nil {
			emulatorMu.Lock()
		}
		err := f()
		if s.conn != nil {
			emulatorMu.Unlock()
		}
		if err == nil {
			return nil
		}
		if !retryable(err) {
			return classify(err, what)
		}
		if attempt >= s.o.retries {
			return fmt.Errorf("%w: bigquery: %s: still failing after %d attempts: %v", flightline.ErrUnavailable, what, attempt, err)
		}
		s.o.logger.Warn("bigquery: retrying", "what", what, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("bigquery: %s: %w (last error: %v)", what, ctx.Err(), err)
		case <-time.After(wait/2 + rand.N(wait)): // jittered: concurrent writers spread out
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// transient marks an error the sink knows is safe and worth retrying (a
// stream whose batch commit failed: nothing of it is visible).
type transient struct{ error }

func (t transient) Unwrap() error { return t.error }

// emulatorMu serializes every call of every Sink pointed at an emulator
// (Config.EmulatorEndpoint): the emulator keeps its tables in one SQLite database and
// fails concurrent writers with "database is locked" — as an HTTP 400 for
// a query job, so it cannot be told from a real error. BigQuery itself
// takes concurrent calls; there, a MERGE that loses a race with another
// transaction is retried (retryable).
var emulatorMu sync.Mutex
