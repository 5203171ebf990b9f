package flighterr_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/endpoint"
	"github.com/flightline/flightline/internal/testkit/certtest"
	"github.com/flightline/flightline/internal/testkit/flighttest"
)

// Against real Flight servers, in process: the TLS configuration problems
// a client meets are configuration errors, not retried, saying what to
// change; a plaintext client against a TLS server, a server that is down
// and one that restarts stay retryable. The handshake's typed errors do not
// survive gRPC (the reason flighterr reads the text): if they ever do, this
// test says so.
func TestTLSClassified(t *testing.T) {
	ca, other := certtest.NewCA(t, "ca"), certtest.NewCA(t, "another CA")
	serve := func(cert, key string) string {
		addr, _ := flighttest.ServeAt(t, "127.0.0.1:0", flightsink.NewServer(flightsink.NewMemory()), endpoint.ServerConfig{CertFile: cert, KeyFile: key})
		return addr
	}
	goodCert, goodKey := ca.Server(t, "server", "127.0.0.1")
	good := serve(goodCert, goodKey)
	rogue := serve(other.Server(t, "rogue", "127.0.0.1"))
	elsewhere := serve(ca.Server(t, "elsewhere", "10.9.9.9"))
	plain := serve("", "")
	down, stopDown := flighttest.ServeAt(t, "127.0.0.1:0", flightsink.NewServer(flightsink.NewMemory()), endpoint.ServerConfig{})
	stopDown()

	checkpoint := func(url string) error {
		var cc flightsink.ClientConfig
		if strings.HasPrefix(url, "grpc+tls://") {
			cc.CAFile = ca.CertFile
		}
		c, err := flightsink.Dial(url, cc)
		require.NoError(t, err)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = c.Checkpoint(ctx, flightsink.Pipeline{ID: "p"})
		return err
	}
	require.NoError(t, checkpoint("grpc+tls://"+good))
	for _, tc := range []struct {
		name, url, hint string
	}{
		{"a certificate from another CA", "grpc+tls://" + rogue, "x509: certificate signed by unknown authority\": a TLS configuration error, not retried: the endpoint's certificate is signed by a CA this client does not trust"},
		{"a certificate for another address", "grpc+tls://" + elsewhere, "x509: certificate is valid for 10.9.9.9, not 127.0.0.1\": a TLS configuration error, not retried"},
		{"TLS to a plaintext server", "grpc+tls://" + plain, "tls: first record does not look like a TLS handshake\": a TLS configuration error, not retried: the endpoint does not speak TLS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkpoint(tc.url)
			require.ErrorIs(t, err, flightline.ErrInvalidInput)
			require.False(t, flightline.IsRetryable(err))
			require.Equal(t, codes.Unavailable, status.Code(err))
			require.ErrorContains(t, err, tc.hint)
			var unknown x509.UnknownAuthorityError
			var hostname x509.HostnameError
			var header tls.RecordHeaderError
			require.False(t, errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &header),
				"the handshake's typed error survived gRPC: classify by type in flighterr.tlsHandshake")
		})
	}
	for _, tc := range []struct {
		name, url, hint string
	}{
		{"plaintext to a TLS server", "grpc://" + good, "if it persists, the server may speak TLS"},
		{"a server that is down", "grpc://" + down, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkpoint(tc.url)
			require.ErrorIs(t, err, flightline.ErrUnavailable)
			require.True(t, flightline.IsRetryable(err))
			require.ErrorContains(t, err, tc.hint)
		})
	}

	t.Run("a server restarting", func(t *testing.T) {
		// A connection in use when its TLS server stops, then a call while
		// it is down, then one after it is back: retryable, then served.
		addr, stop := flighttest.ServeAt(t, "127.0.0.1:0", flightsink.NewServer(flightsink.NewMemory()), endpoint.ServerConfig{CertFile: goodCert, KeyFile: goodKey})
		c, err := flightsink.Dial("grpc+tls://"+addr, flightsink.ClientConfig{CAFile: ca.CertFile})
		require.NoError(t, err)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err = c.Checkpoint(ctx, flightsink.Pipeline{ID: "p"})
		require.NoError(t, err)
		stop()
		_, err = c.Checkpoint(ctx, flightsink.Pipeline{ID: "p"})
		require.True(t, flightline.IsRetryable(err), err)
		require.False(t, strings.Contains(err.Error(), "not retried"), err)
		flighttest.ServeAt(t, addr, flightsink.NewServer(flightsink.NewMemory()), endpoint.ServerConfig{CertFile: goodCert, KeyFile: goodKey})
		require.Eventually(t, func() bool {
			_, err = c.Checkpoint(ctx, flightsink.Pipeline{ID: "p"})
			require.True(t, err == nil || flightline.IsRetryable(err), err)
			return err == nil
		}, 15*time.Second, 50*time.Millisecond)
	})
}
