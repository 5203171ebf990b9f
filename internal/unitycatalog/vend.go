package unitycatalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/flightline/flightline"
)

// VendOptions tune a Vended.
type VendOptions struct {
	// Margin: credentials are re-vended when Margin or half their life
	// (whichever is longer) is left. Default DefaultMargin.
	Margin time.Duration
	// MaxBackoff bounds the wait between failed vends. Default 10 s.
	MaxBackoff time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultMargin is the default VendOptions.Margin.
const DefaultMargin = 5 * time.Minute

// Vended is an aws.CredentialsProvider holding temporary credentials of one
// table, re-vended in the background before they expire: when Margin or
// half their life is left, whichever is longer. A vend that fails is
// retried with capped exponential backoff, also past the expiry (so that a
// catalog that comes back is used again). Retrieve answers from memory; it
// fails only when the credentials held have run out (less than a quarter
// of their life, at most a minute, left: a request signed now could arrive
// after the expiry; renewal starts long before), with an error wrapping
// flightline.ErrUnavailable, or the last vend's sentinel when that was an
// authentication or permission refusal (the grant was revoked: retrying
// will not help). Credentials without expiration_time never expire and are
// never re-vended.
type Vended struct {
	c     *Client
	table *Table
	op    Operation
	o     VendOptions

	mu      sync.Mutex
	cur     aws.Credentials
	issued  time.Time
	exp     time.Time // zero: no expiry
	lastErr error
	vends   int

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Vend vends credentials for table once (returning that error) and starts
// renewing them in the background until Close.
func (c *Client) Vend(ctx context.Context, table *Table, op Operation, o VendOptions) (*Vended, error) {
	if o.Margin <= 0 {
		o.Margin = DefaultMargin
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	v := &Vended{c: c, table: table, op: op, o: o, stop: make(chan struct{}), done: make(chan struct{})}
	if err := v.vend(ctx); err != nil {
		return nil, err
	}
	go v.loop()
	return v, nil
}

func (v *Vended) vend(ctx context.Context) error {
	tc, err := v.c.TemporaryTableCredentials(ctx, v.table.TableID, v.op)
	now := time.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	if err != nil {
		v.lastErr = err
		return fmt.Errorf("table %s: %w", v.table.FullName, err)
	}
	v.cur = aws.Credentials{AccessKeyID: tc.AWS.AccessKeyID, SecretAccessKey: tc.AWS.SecretAccessKey,
		SessionToken: tc.AWS.SessionToken, Source: "UnityCatalogVended", CanExpire: !tc.Expiration.IsZero(), Expires: tc.Expiration}
	v.issued, v.exp, v.lastErr = now, tc.Expiration, nil
	v.vends++
	return nil
}

// refreshAt is when the held credentials are to be renewed; zero: never.
func (v *Vended) refreshAt() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.exp.IsZero() {
		return time.Time{}
	}
	life := v.exp.Sub(v.issued)
	// Never earlier than a quarter into the life: a margin longer than
	// the credentials live must not make every vend trigger the next.
	return v.exp.Add(-min(max(v.o.Margin, life/2), life*3/4))
}

func (v *Vended) loop() {
	defer close(v.done)
	for {
		at := v.refreshAt()
		if at.IsZero() {
			return // no expiry: nothing to renew
		}
		if !v.sleep(time.Until(at)) {
			return
		}
		for attempt := 0; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := v.vend(ctx)
			cancel()
			if err == nil {
				break
			}
			v.mu.Lock()
			left := time.Until(v.exp)
			v.mu.Unlock()
			v.o.Logger.Warn("unity catalog: re-vending credentials failed; retrying", "table", v.table.FullName,
				"attempt", attempt+1, "held_credentials_left", left.Round(time.Millisecond), "err", err)
			d := min(time.Duration(100<<min(attempt, 10))*time.Millisecond, v.o.MaxBackoff)
			if left > 0 {
				d = min(d, max(left/4, 50*time.Millisecond))
			}
			d = d/2 + rand.N(d/2+1)
			if !v.sleep(d) {
				return
			}
		}
	}
}

func (v *Vended) sleep(d time.Duration) bool {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-v.stop:
		return false
	case <-t.C:
		return true
	}
}

// Retrieve implements aws.CredentialsProvider.
func (v *Vended) Retrieve(ctx context.Context) (aws.Credentials, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.exp.IsZero() {
		return v.cur, nil
	}
	guard := min(v.exp.Sub(v.issued)/4, time.Minute)
	if left := time.Until(v.exp); left <= guard {
		sentinel := flightline.ErrUnavailable
		if errors.Is(v.lastErr, flightline.ErrUnauthenticated) || errors.Is(v.lastErr, flightline.ErrPermissionDenied) {
			if errors.Is(v.lastErr, flightline.ErrUnauthenticated) {
				sentinel = flightline.ErrUnauthenticated
			} else {
				sentinel = flightline.ErrPermissionDenied
			}
		}
		why := "re-vending has not succeeded yet"
		if v.lastErr != nil {
			why = "re-vending failed: " + v.lastErr.Error()
		}
		return aws.Credentials{}, fmt.Errorf("unity catalog: the %s credentials vended for table %s expire at %s and %s: %w",
			v.op, v.table.FullName, v.exp.UTC().Format(time.RFC3339Nano), why, sentinel)
	}
	return v.cur, nil
}

// Expiration is when the held credentials expire (zero: never).
func (v *Vended) Expiration() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.exp
}

// Vends counts the successful vends so far.
func (v *Vended) Vends() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.vends
}

// Table is the table the credentials are for.
func (v *Vended) Table() *Table { return v.table }

// Close stops the renewal and waits for it to end.
func (v *Vended) Close() {
	v.once.Do(func() { close(v.stop) })
	<-v.done
}

var _ aws.CredentialsProvider = (*Vended)(nil)
