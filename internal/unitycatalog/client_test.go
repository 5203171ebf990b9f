package unitycatalog_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/testkit/uctest"
	"github.com/flightline/flightline/internal/unitycatalog"
)

func pat(t *testing.T, s *uctest.Server) *unitycatalog.Client {
	c, err := unitycatalog.New(unitycatalog.Config{Host: s.URL, Token: s.Token})
	require.NoError(t, err)
	return c
}

func TestGetTable(t *testing.T) {
	ctx := context.Background()
	s := uctest.New(t, uctest.Static())
	want := s.AddExternal("main.sales.orders", "s3://lake/orders")
	c := pat(t, s)
	got, err := c.GetTable(ctx, "main.sales.orders")
	require.NoError(t, err)
	require.Equal(t, want.TableID, got.TableID)
	require.Equal(t, unitycatalog.Table{Name: "orders", CatalogName: "main", SchemaName: "sales", FullName: "main.sales.orders",
		TableID: want.TableID, TableType: "EXTERNAL", DataSourceFormat: "DELTA", StorageLocation: "s3://lake/orders"}, *got)

	_, err = c.GetTable(ctx, "main.sales.missing")
	require.ErrorIs(t, err, flightline.ErrNotFound)
	require.ErrorContains(t, err, "main.sales.missing")
	require.ErrorContains(t, err, "TABLE_DOES_NOT_EXIST")
	var ae *unitycatalog.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusNotFound, ae.Status)

	_, err = c.GetTable(ctx, "orders")
	require.ErrorIs(t, err, flightline.ErrInvalidInput, "not a three-part name")
}

func TestWrongTokenIsUnauthenticated(t *testing.T) {
	s := uctest.New(t, uctest.Static())
	s.AddExternal("main.sales.orders", "s3://lake/orders")
	c, err := unitycatalog.New(unitycatalog.Config{Host: s.URL, Token: "dapi-wrong-secret"})
	require.NoError(t, err)
	_, err = c.GetTable(context.Background(), "main.sales.orders")
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
	require.ErrorContains(t, err, "Invalid access token")
	require.NotContains(t, err.Error(), "dapi-wrong-secret")
}

func TestOAuthM2M(t *testing.T) {
	ctx := context.Background()
	s := uctest.New(t, uctest.Static())
	s.AddExternal("main.sales.orders", "s3://lake/orders")
	s.SetTokenLife(2 * time.Second) // renewed 1 s before expiry (half its life)
	c, err := unitycatalog.New(unitycatalog.Config{Host: s.URL, ClientID: s.ClientID, ClientSecret: s.ClientSecret})
	require.NoError(t, err)
	for range 3 {
		_, err = c.GetTable(ctx, "main.sales.orders")
		require.NoError(t, err)
	}
	require.Equal(t, 1, s.Stats().TokenGrants, "one token serves several calls")
	deadline := time.Now().Add(30 * time.Second)
	for s.Stats().TokenGrants < 3 && time.Now().Before(deadline) {
		_, err = c.GetTable(ctx, "main.sales.orders")
		require.NoError(t, err, "a token is renewed before it expires")
		time.Sleep(100 * time.Millisecond)
	}
	require.GreaterOrEqual(t, s.Stats().TokenGrants, 3)
	require.Zero(t, s.Stats().Unauthenticated, "never sent an expired token")

	bad, err := unitycatalog.New(unitycatalog.Config{Host: s.URL, ClientID: s.ClientID, ClientSecret: "wrong-secret-value"})
	require.NoError(t, err)
	_, err = bad.GetTable(ctx, "main.sales.orders")
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
	require.ErrorContains(t, err, "invalid_client")
	require.NotContains(t, err.Error(), "wrong-secret-value")
}

func TestConfig(t *testing.T) {
	t.Setenv(unitycatalog.EnvHost, "example.cloud.databricks.com")
	t.Setenv(unitycatalog.EnvToken, "dapi-env")
	t.Setenv(unitycatalog.EnvClientID, "")
	t.Setenv(unitycatalog.EnvClientSecret, "")
	c := unitycatalog.Config{}.FromEnv()
	require.Equal(t, unitycatalog.Config{Host: "example.cloud.databricks.com", Token: "dapi-env"}, c)
	cl, err := unitycatalog.New(c)
	require.NoError(t, err)
	require.Equal(t, "https://example.cloud.databricks.com", cl.Host())
	require.NotContains(t, c.String(), "dapi-env")

	// Options given explicitly are not mixed with the environment's.
	c = unitycatalog.Config{ClientID: "id", ClientSecret: "sec"}.FromEnv()
	require.Equal(t, "", c.Token)
	require.NotContains(t, c.String(), "sec")

	_, err = unitycatalog.New(unitycatalog.Config{Host: "h", Token: "t", ClientID: "id", ClientSecret: "s"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = unitycatalog.New(unitycatalog.Config{Host: "h", ClientID: "id"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = unitycatalog.New(unitycatalog.Config{Host: "h"})
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
	_, err = unitycatalog.New(unitycatalog.Config{Token: "t"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	_, err = unitycatalog.New(unitycatalog.Config{Host: "https://h/path", Token: "t"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}

func TestTemporaryTableCredentials(t *testing.T) {
	ctx := context.Background()
	s := uctest.New(t, uctest.Static())
	tb := s.AddExternal("main.sales.orders", "s3://lake/orders")
	managed := s.AddTable(unitycatalog.Table{FullName: "main.sales.managed", TableType: unitycatalog.Managed,
		DataSourceFormat: unitycatalog.Delta, StorageLocation: "s3://lake/__unitystorage/x"})
	c := pat(t, s)

	before := time.Now()
	tc, err := c.TemporaryTableCredentials(ctx, tb.TableID, unitycatalog.ReadWrite)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(tc.AWS.AccessKeyID, "ASIA"))
	require.NotEmpty(t, tc.AWS.SessionToken)
	require.WithinDuration(t, before.Add(time.Hour), tc.Expiration, 5*time.Second)
	require.Equal(t, "s3://lake/orders", tc.URL)

	s.SetCredentialLife(0)
	tc, err = c.TemporaryTableCredentials(ctx, tb.TableID, unitycatalog.Read)
	require.NoError(t, err)
	require.True(t, tc.Expiration.IsZero(), "no expiration_time: no expiry")

	_, err = c.TemporaryTableCredentials(ctx, managed.TableID, unitycatalog.ReadWrite)
	require.ErrorIs(t, err, flightline.ErrPermissionDenied)
	_, err = c.TemporaryTableCredentials(ctx, "no-such-id", unitycatalog.Read)
	require.ErrorIs(t, err, flightline.ErrNotFound)
	_, err = c.TemporaryTableCredentials(ctx, tb.TableID, "WRITE")
	require.ErrorIs(t, err, flightline.ErrInvalidInput)

	s.DenyVend("main.sales.orders", true)
	_, err = c.TemporaryTableCredentials(ctx, tb.TableID, unitycatalog.Read)
	require.ErrorIs(t, err, flightline.ErrPermissionDenied)
	require.ErrorContains(t, err, "EXTERNAL USE SCHEMA")
	s.DenyVend("main.sales.orders", false)

	s.FailVends(true)
	_, err = c.TemporaryTableCredentials(ctx, tb.TableID, unitycatalog.Read)
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.True(t, flightline.IsRetryable(err))
}

func TestUnreachableCatalogIsUnavailable(t *testing.T) {
	s := uctest.New(t, uctest.Static())
	c := pat(t, s)
	s.Close()
	_, err := c.GetTable(context.Background(), "main.sales.orders")
	require.ErrorIs(t, err, flightline.ErrUnavailable)
}

// Credentials are re-vended in the background before they expire, and
// Retrieve never hands out credentials that have expired.
func TestVendedRenewsBeforeExpiry(t *testing.T) {
	ctx := context.Background()
	s := uctest.New(t, uctest.Static())
	tb := s.AddExternal("main.sales.orders", "s3://lake/orders")
	s.SetCredentialLife(2 * time.Second)
	c := pat(t, s)
	v, err := c.Vend(ctx, &tb, unitycatalog.ReadWrite, unitycatalog.VendOptions{Margin: 500 * time.Millisecond})
	require.NoError(t, err)
	defer v.Close()
	keys := map[string]bool{}
	deadline := time.Now().Add(60 * time.Second)
	for len(keys) < 4 && time.Now().Before(deadline) {
		cr, err := v.Retrieve(ctx)
		require.NoError(t, err, "never without valid credentials while the catalog works")
		require.True(t, cr.CanExpire)
		require.True(t, time.Now().Before(cr.Expires), "never an expired credential")
		keys[cr.AccessKeyID] = true
		time.Sleep(50 * time.Millisecond)
	}
	require.GreaterOrEqual(t, len(keys), 4, "re-vended in the background")
}

// An outage shorter than what is left when renewal starts goes unnoticed;
// a longer one makes Retrieve fail with ErrUnavailable once the held
// credentials run out, and the credentials come back with the catalog.
func TestVendedOutage(t *testing.T) {
	ctx := context.Background()
	s := uctest.New(t, uctest.Static())
	tb := s.AddExternal("main.sales.orders", "s3://lake/orders")
	s.SetCredentialLife(6 * time.Second) // renewal at 3 s left, unusable at 1.5 s left
	c := pat(t, s)
	v, err := c.Vend(ctx, &tb, unitycatalog.Read, unitycatalog.VendOptions{Margin: time.Millisecond})
	require.NoError(t, err)
	defer v.Close()

	// An outage of 800 ms from just before the renewal is due.
	exp := v.Expiration()
	time.Sleep(time.Until(exp.Add(-3*time.Second - 100*time.Millisecond)))
	s.FailVendsFor(800 * time.Millisecond)
	for time.Now().Before(exp.Add(time.Second)) {
		_, err := v.Retrieve(ctx)
		require.NoError(t, err, "a short outage is ridden out")
		time.Sleep(20 * time.Millisecond)
	}
	require.Positive(t, s.Stats().FailedVends, "the outage met the renewal")
	require.True(t, v.Expiration().After(exp), "renewed after the outage")

	s.FailVends(true)
	failedAt := time.Time{}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err = v.Retrieve(ctx); err != nil {
			failedAt = time.Now()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.Error(t, err)
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.ErrorContains(t, err, "TEMPORARILY_UNAVAILABLE")
	require.True(t, failedAt.Before(v.Expiration()), "refused before the actual expiry")
	require.Greater(t, s.Stats().FailedVends, 1, "retried")

	s.FailVends(false)
	deadline = time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err = v.Retrieve(ctx); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, err, "usable again once the catalog vends again")
}

// A revoked grant is reported as such once the credentials run out.
func TestVendedRevoked(t *testing.T) {
	ctx := context.Background()
	s := uctest.New(t, uctest.Static())
	tb := s.AddExternal("main.sales.orders", "s3://lake/orders")
	s.SetCredentialLife(2 * time.Second)
	c := pat(t, s)
	v, err := c.Vend(ctx, &tb, unitycatalog.Read, unitycatalog.VendOptions{Margin: time.Millisecond})
	require.NoError(t, err)
	defer v.Close()
	s.DenyVend("main.sales.orders", true)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err = v.Retrieve(ctx); err != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.ErrorIs(t, err, flightline.ErrPermissionDenied)
}

func TestVendedWithoutExpiry(t *testing.T) {
	ctx := context.Background()
	s := uctest.New(t, uctest.Static())
	tb := s.AddExternal("main.sales.orders", "s3://lake/orders")
	s.SetCredentialLife(0)
	v, err := pat(t, s).Vend(ctx, &tb, unitycatalog.Read, unitycatalog.VendOptions{})
	require.NoError(t, err)
	cr, err := v.Retrieve(ctx)
	require.NoError(t, err)
	require.False(t, cr.CanExpire)
	v.Close() // the renewal goroutine has already ended: nothing to renew
	require.Equal(t, 1, s.Stats().Vends)
}

// A margin longer than the credentials live does not turn renewal into a
// vend storm: renewal waits for at least a quarter of their life.
func TestVendedLongMarginNoStorm(t *testing.T) {
	ctx := context.Background()
	s := uctest.New(t, uctest.Static())
	tb := s.AddExternal("main.sales.orders", "s3://lake/orders")
	s.SetCredentialLife(4 * time.Second)
	v, err := pat(t, s).Vend(ctx, &tb, unitycatalog.Read, unitycatalog.VendOptions{Margin: time.Hour})
	require.NoError(t, err)
	defer v.Close()
	time.Sleep(700 * time.Millisecond)
	require.Equal(t, 1, s.Stats().Vends, "no renewal before a quarter of the life")
	require.Eventually(t, func() bool { return s.Stats().Vends >= 2 }, 30*time.Second, 20*time.Millisecond)
	_, err = v.Retrieve(ctx)
	require.NoError(t, err)
}

// An OAuth token the workspace stops honouring is replaced once.
func TestOAuthTokenRevoked(t *testing.T) {
	ctx := context.Background()
	s := uctest.New(t, uctest.Static())
	s.AddExternal("main.sales.orders", "s3://lake/orders")
	c, err := unitycatalog.New(unitycatalog.Config{Host: s.URL, ClientID: s.ClientID, ClientSecret: s.ClientSecret})
	require.NoError(t, err)
	_, err = c.GetTable(ctx, "main.sales.orders")
	require.NoError(t, err)
	s.RevokeTokens()
	_, err = c.GetTable(ctx, "main.sales.orders")
	require.NoError(t, err)
	require.Equal(t, 2, s.Stats().TokenGrants)
	require.Equal(t, 1, s.Stats().Unauthenticated)

	pat, err := unitycatalog.New(unitycatalog.Config{Host: s.URL, Token: "dapi-bad"})
	require.NoError(t, err)
	_, err = pat.GetTable(ctx, "main.sales.orders")
	require.ErrorIs(t, err, flightline.ErrUnauthenticated, "a PAT is not retried")
	require.Equal(t, 2, s.Stats().Unauthenticated)
}
