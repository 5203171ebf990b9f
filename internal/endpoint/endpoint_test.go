package endpoint

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

type pki struct {
	dir                   string
	caCert, caKey         string
	serverCert, serverKey string
	clientCert, clientKey string
	rogueCert, rogueKey   string
	otherCert, otherKey   string
}

// newPKI writes a CA, a server certificate for 127.0.0.1, a client
// certificate signed by the CA, a self-signed rogue client certificate, and
// a client certificate signed by another CA.
func newPKI(t *testing.T) pki {
	dir := t.TempDir()
	p := pki{dir: dir}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "flightline test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, _ := x509.ParseCertificate(caDER)
	p.caCert, p.caKey = write(t, dir, "ca", caDER, caKey)

	leaf := func(name string, serial int64, usage x509.ExtKeyUsage, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (string, string) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		if parent == nil {
			parent, parentKey = tmpl, k
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, parentKey)
		require.NoError(t, err)
		return write(t, dir, name, der, k)
	}
	p.serverCert, p.serverKey = leaf("server", 2, x509.ExtKeyUsageServerAuth, ca, caKey)
	p.clientCert, p.clientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth, ca, caKey)
	p.rogueCert, p.rogueKey = leaf("rogue", 4, x509.ExtKeyUsageClientAuth, nil, nil)
	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherTmpl := &x509.Certificate{SerialNumber: big.NewInt(5), Subject: pkix.Name{CommonName: "another CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	otherDER, err := x509.CreateCertificate(rand.Reader, otherTmpl, otherTmpl, &otherKey.PublicKey, otherKey)
	require.NoError(t, err)
	other, _ := x509.ParseCertificate(otherDER)
	p.otherCert, p.otherKey = leaf("other", 6, x509.ExtKeyUsageClientAuth, other, otherKey)
	return p
}

func write(t *testing.T, dir, name string, der []byte, k *ecdsa.PrivateKey) (string, string) {
	kb, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	c, kf := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	require.NoError(t, os.WriteFile(c, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(kf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return c, kf
}

// start serves cfg with the health service and a Flight service whose
// methods are unimplemented: the token interceptor guards them all.
func start(t *testing.T, cfg ServerConfig) string {
	gs, _, err := NewServer(cfg)
	require.NoError(t, err)
	flight.RegisterFlightServiceServer(gs, &flight.BaseFlightServer{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

// serveAt serves a plain endpoint (health service only) at addr until the
// test ends.
func serveAt(t *testing.T, addr string) {
	t.Helper()
	gs, _, err := NewServer(ServerConfig{})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
}

func healthy(ctx context.Context, conn *grpc.ClientConn) error {
	_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// streamCall makes a streaming call that the token interceptor guards; the
// server does not implement the method, so an authenticated call gets
// Unimplemented and an unauthenticated one Unauthenticated.
func streamCall(ctx context.Context, conn *grpc.ClientConn) error {
	s, err := flight.NewClientFromConn(conn, nil).ListFlights(ctx, &flight.Criteria{})
	if err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

func TestBearerToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addr := start(t, ServerConfig{Token: "tok-123"})

	noTok, err := Dial("grpc://"+addr, ClientConfig{})
	require.NoError(t, err)
	defer noTok.Close()
	require.NoError(t, healthy(ctx, noTok), "health needs no token")
	err = streamCall(ctx, noTok)
	require.Equal(t, codes.Unauthenticated, status.Code(err))
	require.NotContains(t, err.Error(), "tok-123")

	wrong, _ := Dial("grpc://"+addr, ClientConfig{Token: "tok-124"})
	defer wrong.Close()
	require.Equal(t, codes.Unauthenticated, status.Code(streamCall(ctx, wrong)))

	good, _ := Dial("grpc://"+addr, ClientConfig{Token: "tok-123"})
	defer good.Close()
	require.Equal(t, codes.Unimplemented, status.Code(streamCall(ctx, good)), "authenticated: reaches the service")
}

func TestTLSAndMTLS(t *testing.T) {
	p := newPKI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	tlsAddr := start(t, ServerConfig{CertFile: p.serverCert, KeyFile: p.serverKey})
	c, err := Dial("grpc+tls://"+tlsAddr, ClientConfig{CAFile: p.caCert})
	require.NoError(t, err)
	require.NoError(t, healthy(ctx, c))
	c.Close()

	plain, _ := Dial("grpc://"+tlsAddr, ClientConfig{})
	require.Error(t, healthy(ctx, plain), "plaintext to a TLS server fails")
	plain.Close()

	mtlsAddr := start(t, ServerConfig{CertFile: p.serverCert, KeyFile: p.serverKey, ClientCAFile: p.caCert})
	good, _ := Dial("grpc+tls://"+mtlsAddr, ClientConfig{CAFile: p.caCert, CertFile: p.clientCert, KeyFile: p.clientKey})
	require.NoError(t, healthy(ctx, good))
	good.Close()
	good, _ = Dial("grpc+tls://"+mtlsAddr, ClientConfig{CAFile: p.caCert, CertFile: p.clientCert, KeyFile: p.clientKey})
	require.Equal(t, codes.Unimplemented, status.Code(streamCall(ctx, good)), "a verified client reaches the service")
	good.Close()
	// A client without a valid certificate is refused with UNAUTHENTICATED
	// (fix credentials), not UNAVAILABLE (retry): a refused handshake would
	// make a misconfigured client retry forever.
	for name, cfg := range map[string]ClientConfig{
		"no client cert": {CAFile: p.caCert},
		"rogue cert":     {CAFile: p.caCert, CertFile: p.rogueCert, KeyFile: p.rogueKey},
		"other CA":       {CAFile: p.caCert, CertFile: p.otherCert, KeyFile: p.otherKey},
	} {
		c, err := Dial("grpc+tls://"+mtlsAddr, cfg)
		require.NoError(t, err)
		require.Equal(t, codes.Unauthenticated, status.Code(healthy(ctx, c)), "%s: health", name)
		require.Equal(t, codes.Unauthenticated, status.Code(streamCall(ctx, c)), "%s: stream call", name)
		_, err = flight.NewClientFromConn(c, nil).GetFlightInfo(ctx, &flight.FlightDescriptor{})
		require.Equal(t, codes.Unauthenticated, status.Code(err), "%s: unary call", name)
		c.Close()
	}

	// mTLS and a token together: both are required.
	bothAddr := start(t, ServerConfig{CertFile: p.serverCert, KeyFile: p.serverKey, ClientCAFile: p.caCert, Token: "tok"})
	certOnly, _ := Dial("grpc+tls://"+bothAddr, ClientConfig{CAFile: p.caCert, CertFile: p.clientCert, KeyFile: p.clientKey})
	defer certOnly.Close()
	require.Equal(t, codes.Unauthenticated, status.Code(streamCall(ctx, certOnly)))
	tokOnly, _ := Dial("grpc+tls://"+bothAddr, ClientConfig{CAFile: p.caCert, Token: "tok"})
	defer tokOnly.Close()
	require.Equal(t, codes.Unauthenticated, status.Code(streamCall(ctx, tokOnly)))
	both, _ := Dial("grpc+tls://"+bothAddr, ClientConfig{CAFile: p.caCert, CertFile: p.clientCert, KeyFile: p.clientKey, Token: "tok"})
	defer both.Close()
	require.Equal(t, codes.Unimplemented, status.Code(streamCall(ctx, both)))
}

func TestConfigErrors(t *testing.T) {
	_, _, err := NewServer(ServerConfig{ClientCAFile: "ca.pem"})
	require.ErrorContains(t, err, "needs a server certificate")
	_, _, err = NewServer(ServerConfig{CertFile: "missing.crt", KeyFile: "missing.key"})
	require.Error(t, err)
	for _, u := range []string{"http://x:1", "127.0.0.1:80", "grpc://"} {
		_, _, err := ParseURL(u)
		require.Error(t, err, u)
	}
	_, err = Dial("grpc://127.0.0.1:1", ClientConfig{CAFile: "ca.pem"})
	require.ErrorContains(t, err, "grpc+tls://")
	addr, tls, err := ParseURL("grpc+tls://example.org:443")
	require.NoError(t, err)
	require.True(t, tls)
	require.Equal(t, "example.org:443", addr)
}

// TestReconnectAfterOutage: a client that kept calling a server which was
// down for 20 s reaches it within a few seconds of its listening again. With
// gRPC's default reconnect backoff (1 s ×1.6 up to 120 s) the next attempt
// after a 20 s outage comes about 6 s after the server is back.
func TestReconnectAfterOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("20 s outage: skipped in -short mode")
	}
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close()) // nobody listens: the outage
	conn, err := Dial("grpc://"+addr, ClientConfig{})
	require.NoError(t, err)
	defer conn.Close()
	call := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return healthy(ctx, conn)
	}
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		require.Error(t, call())
	}
	serveAt(t, addr)
	up := time.Now()
	for call() != nil {
		time.Sleep(50 * time.Millisecond)
		require.Less(t, time.Since(up), 30*time.Second)
	}
	took := time.Since(up)
	t.Logf("reached the server %v after it listened again", took.Round(10*time.Millisecond))
	require.Less(t, took, 2500*time.Millisecond, "reconnecting took too long")
}

// TestWaitReconnected: on a connection whose server is down,
// WaitReconnected returns true soon after the server listens again, even
// after the connection's reconnect backoff had grown; on a ready
// connection it returns false at once; with nobody listening it returns
// false when its context ends.
func TestWaitReconnected(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := lis.Addr().String()
	require.NoError(t, lis.Close()) // nobody listens
	conn, err := Dial("grpc://"+addr, ClientConfig{})
	require.NoError(t, err)
	defer conn.Close()

	// Down: failed calls grow the backoff; the wait ends with its context.
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		require.Error(t, healthy(ctx, conn))
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	require.False(t, WaitReconnected(ctx, conn), "nobody listens")
	cancel()

	// Back: true soon after the server listens.
	done := make(chan bool, 1)
	wctx, wcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer wcancel()
	go func() { done <- WaitReconnected(wctx, conn) }()
	time.Sleep(300 * time.Millisecond)
	serveAt(t, addr)
	up := time.Now()
	require.True(t, <-done)
	t.Logf("ready %v after the server listened", time.Since(up).Round(10*time.Millisecond))
	require.Less(t, time.Since(up), 5*time.Second)

	// Ready: nothing to wait for.
	start := time.Now()
	require.False(t, WaitReconnected(wctx, conn))
	require.Less(t, time.Since(start), time.Second)
	require.NoError(t, healthy(wctx, conn))

	// Closed: false.
	require.NoError(t, conn.Close())
	require.False(t, WaitReconnected(wctx, conn))
}
