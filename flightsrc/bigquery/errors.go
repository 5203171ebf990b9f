package bigquery

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/bqerr"
)

// retryable reports whether err is worth retrying: a read behind its bound
// query, or one of BigQuery's quota and transient errors (bqerr.Retryable).
func retryable(err error) bool {
	return errors.As(err, new(behind)) || bqerr.Retryable(err)
}

// behind is a read that returned fewer rows than its bound query counted
// under the bound: the read session's snapshot is older than the query's
// view. Retried; never emitted.
type behind struct{ error }

func (b behind) Unwrap() error { return b.error }

// classify wraps a BigQuery error in the flightline error it means
// (bqerr.Classify holds the mapping the sink and the source share).
func classify(err error, what string) error { return bqerr.Classify(err, "bigquery source", what) }

// emulatorBusy reports an error of the emulator's one SQLite database held
// by another writer ("database is locked"; it comes back as HTTP 400 or a
// gRPC error without a useful code). Only retried against an emulator.
func emulatorBusy(err error) bool {
	return strings.Contains(err.Error(), "database is locked")
}

// retry runs f until it succeeds, fails with an error that is not
// retryable, or has run s.o.retries times, each attempt bounded by
// s.o.attempt, with jittered backoff doubling from s.o.backoff (capped at
// 10s). An attempt that timed out while ctx is live counts as retryable: the
// clients retry some errors by themselves until their context ends. A
// retryable error on the last attempt is ErrUnavailable.
func (s *Source) retry(ctx context.Context, what string, f func(context.Context) error) error {
	wait := s.o.backoff
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, s.o.attempt)
		err := f(actx)
		timedOut := actx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("bigquery source: %s: %w (last error: %v)", what, ctx.Err(), err)
		}
		if !timedOut && !retryable(err) && !(s.conn != nil && emulatorBusy(err)) {
			return classify(err, what)
		}
		if attempt >= s.o.retries {
			return fmt.Errorf("%w: bigquery source: %s: still failing after %d attempts: %v", flightline.ErrUnavailable, what, attempt, err)
		}
		s.o.log.Warn("bigquery source: retrying", "what", what, "attempt", attempt, "err", err)
		t := time.NewTimer(wait/2 + rand.N(wait))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("bigquery source: %s: %w (last error: %v)", what, ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, 10*time.Second)
	}
}
