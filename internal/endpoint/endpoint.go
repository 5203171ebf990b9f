// Package endpoint builds the gRPC servers and client connections every
// Flightline endpoint uses: TLS and mTLS, bearer-token authentication, the
// gRPC health service, message-size limits and endpoint URLs.
//
// Secrets (tokens, keys) are never logged and never echoed in errors.
package endpoint

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/flightwire"
)

// MaxMessageSize bounds one gRPC message (one record batch) in both
// directions. gRPC's 4 MiB default is too small for 64k-row batches.
const MaxMessageSize = flightline.MaxMessageSize

// MaxNameSize bounds the names a client sends: stream names, pipeline ids,
// targets and action types. Longer ones are refused with INVALID_ARGUMENT
// (docs/protocol.md) instead of travelling into status messages and logs.
const MaxNameSize = 1024

// ServerConfig configures a Flightline gRPC server. The zero value serves
// plaintext without authentication (loopback and tests only).
type ServerConfig struct {
	// CertFile and KeyFile enable TLS.
	CertFile, KeyFile string
	// ClientCAFile enables mTLS: clients must present a certificate signed
	// by one of these CAs. Requires CertFile and KeyFile. The TLS handshake
	// itself accepts any client (a refused handshake reaches the client as
	// UNAVAILABLE, which it would retry forever); every call, the health
	// service included, without a verified client certificate is refused
	// with UNAUTHENTICATED.
	ClientCAFile string
	// Token, when set, requires "authorization: Bearer <Token>" on every
	// call except the health service.
	Token string
	// Logger receives refusals; nil means slog.Default().
	Logger *slog.Logger
}

// NewServer returns a gRPC server configured by cfg with the health service
// registered (status SERVING) and the Health server for callers that want
// to flip it.
func NewServer(cfg ServerConfig) (*grpc.Server, *health.Server, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	opts := []grpc.ServerOption{
		// Stop and GracefulStop return only once every handler has: a
		// sink's writer is closed before the process moves on.
		grpc.WaitForHandlers(true),
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.MaxSendMsgSize(MaxMessageSize),
		// Clients ping every KeepaliveTime while they wait (see Dial); the
		// server allows it, and pings a silent client itself, closing the
		// connection of one that does not answer: a handler serving a
		// client that a partition cut off ends instead of waiting on TCP.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveTime / 2, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: KeepaliveTime, Timeout: 2 * KeepaliveTimeout}),
	}
	var checks []func(ctx context.Context, method string) error
	if cfg.CertFile != "" || cfg.KeyFile != "" {
		tc, err := serverTLS(cfg)
		if err != nil {
			return nil, nil, err
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
		if cfg.ClientCAFile != "" {
			pool, err := loadPool(cfg.ClientCAFile)
			if err != nil {
				return nil, nil, err
			}
			checks = append(checks, (&clientCertAuth{roots: pool, log: log}).check)
		}
	} else if cfg.ClientCAFile != "" {
		return nil, nil, errors.New("endpoint: mTLS (client CA) needs a server certificate and key")
	}
	if cfg.Token != "" {
		checks = append(checks, (&tokenAuth{want: []byte("Bearer " + cfg.Token), log: log}).check)
	}
	if len(checks) > 0 {
		a := authChain(checks)
		opts = append(opts, grpc.ChainUnaryInterceptor(a.unary), grpc.ChainStreamInterceptor(a.stream))
	}
	// FlightData moves without copying IPC bodies (internal/flightwire);
	// the bytes on the wire are ordinary protobuf.
	opts = append(opts, flightwire.ServerOptions()...)
	s := grpc.NewServer(opts...)
	h := health.NewServer()
	healthpb.RegisterHealthServer(s, h)
	return s, h, nil
}

func serverTLS(cfg ServerConfig) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("endpoint: loading server certificate: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if cfg.ClientCAFile != "" {
		// Ask for the client's certificate but let the handshake finish
		// whatever it sends: clientCertAuth verifies it per call and
		// refuses with a status the client can act on. The CAs are not
		// advertised, so a client sends the certificate it has and learns
		// it is wrong, rather than silently sending none.
		tc.ClientAuth = tls.RequestClientCert
	}
	return tc, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("endpoint: reading CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("endpoint: no certificates in CA file %s", file)
	}
	return pool, nil
}

type tokenAuth struct {
	want []byte
	log  *slog.Logger
}

func (a *tokenAuth) check(ctx context.Context, method string) error {
	if strings.HasPrefix(method, "/grpc.health.v1.Health/") {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
		if subtle.ConstantTimeCompare([]byte(v), a.want) == 1 {
			return nil
		}
	}
	a.log.Warn("refused unauthenticated call", "method", method, "had_authorization", len(md.Get("authorization")) > 0)
	if len(md.Get("authorization")) == 0 {
		return status.Error(codes.Unauthenticated, "missing bearer token: this endpoint requires one: give the client the endpoint's token (flightline run: --sink-token-file, --source-token-file or --transform-token-file; config file: token_file or token under grpc:)")
	}
	return status.Error(codes.Unauthenticated, "invalid bearer token: the client's token is not this endpoint's")
}

// clientCertAuth refuses calls whose connection has no client certificate
// chaining to roots (mTLS). Unlike the token, it guards the health service
// too: under mTLS nothing is served to an unverified client.
type clientCertAuth struct {
	roots *x509.CertPool
	log   *slog.Logger
}

func (a *clientCertAuth) check(ctx context.Context, method string) error {
	var certs []*x509.Certificate
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			certs = ti.State.PeerCertificates
		}
	}
	if len(certs) == 0 {
		a.log.Warn("refused call without a client certificate", "method", method)
		return status.Error(codes.Unauthenticated, "flightline: this endpoint requires a client certificate (mTLS)")
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: a.roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		a.log.Warn("refused call with an unverified client certificate", "method", method, "subject", certs[0].Subject.String(), "err", err)
		return status.Error(codes.Unauthenticated, "flightline: client certificate not signed by a trusted CA: "+err.Error())
	}
	return nil
}

// authChain runs each check in order before a call; the first refusal wins.
type authChain []func(ctx context.Context, method string) error

func (a authChain) check(ctx context.Context, method string) error {
	for _, c := range a {
		if err := c(ctx, method); err != nil {
			return err
		}
	}
	return nil
}

func (a authChain) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := a.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (a authChain) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := a.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}

// ClientConfig configures a connection to a Flightline endpoint. It is
// public as flightline.ClientConfig, so users can read its documentation.
type ClientConfig = flightline.ClientConfig

// ParseURL splits a Flightline endpoint URL, grpc://host:port or
// grpc+tls://host:port, into its address and whether it uses TLS.
func ParseURL(raw string) (addr string, useTLS bool, err error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", false, fmt.Errorf("endpoint: %q is not an endpoint URL: want grpc://host:port or grpc+tls://host:port", raw)
	}
	switch u.Scheme {
	case "grpc", "grpc+tcp":
		return u.Host, false, nil
	case "grpc+tls":
		return u.Host, true, nil
	}
	return "", false, fmt.Errorf("endpoint: unsupported scheme %q in %q: want grpc:// or grpc+tls://", u.Scheme, raw)
}

// ReconnectMaxDelay bounds the wait between two attempts to reconnect to an
// endpoint that went away. gRPC's default (1 s growing by 1.6× up to 120 s)
// left a coordinator unable to reach a restarted source or sink for tens
// of seconds after an outage of a minute: while the channel waits, every
// call fails at once. Flightline's peers are few and near; one connection
// attempt per second to a peer that is down costs nothing.
const ReconnectMaxDelay = time.Second

// KeepaliveTime and KeepaliveTimeout: a client that has heard nothing from
// its server for KeepaliveTime while a call is open pings it, and closes
// the connection when the ping is not answered within KeepaliveTimeout
// (the server does the same for a silent client, with twice the timeout).
// KeepaliveTime is the least gRPC allows a client (it raises anything
// shorter to 10 s). Without
// them, a connection across a network partition stayed open, and after the
// link healed the pipeline waited for TCP's next retransmission, whose
// interval doubles up to two minutes: 13.4 s after a 40 s cut in
// integration.TestIntegrationPartitions. With them, the call fails during
// the partition, and a new connection is made as soon as the link is back.
const (
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 5 * time.Second
)

// ConnectTimeout bounds one attempt to connect (TCP and TLS handshakes).
// An attempt started during a partition waits for SYN retransmissions
// (after 1, 3, 7, 15 s …); a bound of a few seconds starts a fresh attempt
// (and SYN) soon after the link heals instead of waiting for the next
// retransmission. gRPC's default is 20 s.
const ConnectTimeout = 5 * time.Second

// WaitReconnected waits for conn to come back. When conn is ready it
// returns false at once: there is nothing to wait for. Otherwise it asks
// conn to connect now, without the rest of its reconnect backoff, and
// returns true as soon as conn is ready, false when ctx ends first or conn
// is closed. A caller that retries after a failure on a timer (the
// coordinator) uses it to retry the moment a restarted peer listens again
// instead of at the end of a wait that grew while the peer was down.
func WaitReconnected(ctx context.Context, conn *grpc.ClientConn) bool {
	s := conn.GetState()
	if s == connectivity.Ready {
		return false
	}
	conn.ResetConnectBackoff()
	for {
		switch s {
		case connectivity.Ready:
			return true
		case connectivity.Shutdown:
			return false
		case connectivity.Idle:
			conn.Connect()
		}
		if !conn.WaitForStateChange(ctx, s) {
			return false
		}
		s = conn.GetState()
	}
}

// Dial connects to the endpoint at rawURL. The connection is lazy: errors
// reaching the server surface on the first call. After the connection
// breaks, reconnection is attempted after 100 ms, growing to at most
// ReconnectMaxDelay between attempts, each attempt bounded by
// ConnectTimeout, so a restarted server, or one behind a healed link, is
// reached within a few seconds. An open call whose server stops answering
// (a partition) fails after KeepaliveTime + KeepaliveTimeout.
func Dial(rawURL string, cfg ClientConfig) (*grpc.ClientConn, error) {
	addr, useTLS, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)),
		grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: ConnectTimeout, Backoff: backoff.Config{
			BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: ReconnectMaxDelay}}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
	}
	opts = append(opts, flightwire.DialOptions()...)
	if useTLS {
		tc, err := clientTLS(cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	} else {
		if cfg.CertFile != "" || cfg.CAFile != "" {
			return nil, fmt.Errorf("endpoint: TLS files given for plaintext URL %q: use grpc+tls://", rawURL)
		}
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if cfg.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: cfg.Token, secure: useTLS}))
	}
	return grpc.NewClient(addr, opts...)
}

// clientTLS is the TLS configuration Dial uses for cfg.
func clientTLS(cfg ClientConfig) (*tls.Config, error) {
	tc := &tls.Config{ServerName: cfg.ServerName, MinVersion: tls.VersionTLS12}
	if cfg.CAFile != "" {
		pool, err := loadPool(cfg.CAFile)
		if err != nil {
			return nil, err
		}
		tc.RootCAs = pool
	}
	if cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("endpoint: loading client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Probe checks the transport to the endpoint at rawURL once, before a
// pipeline uses it, so that a mistake in the configuration is an error
// saying what to change rather than a connection error retried for ever:
//
//   - grpc:// to a server that speaks TLS, grpc+tls:// to one that does
//     not, a server certificate no configured CA trusts, or one issued for
//     another name: ErrInvalidInput naming the fix (caFlag names the
//     setting that gives the CA, e.g. --sink-tls-ca);
//   - nothing listening (or no answer within ctx): ErrUnavailable, which
//     callers report and then retry, since the endpoint may come up later.
//
// It sends nothing but a TLS handshake; nil means the transport matches.
func Probe(ctx context.Context, rawURL string, cfg ClientConfig, caFlag string) error {
	addr, useTLS, err := ParseURL(rawURL)
	if err != nil {
		return err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("endpoint: %s does not answer (%v): is the server running, and is the address right? %w", rawURL, err, flightline.ErrUnavailable)
	}
	defer conn.Close()
	if !useTLS {
		// A TLS handshake that completes means the server speaks TLS. It
		// verifies nothing: it only tells the two protocols apart.
		tconn := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}) //nolint:gosec // detection only; no data is sent
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if tconn.HandshakeContext(hctx) == nil {
			return fmt.Errorf("endpoint: %s speaks TLS: write grpc+tls://%s (with %s if its CA is not a system one): %w", rawURL, addr, caFlag, flightline.ErrInvalidInput)
		}
		return nil
	}
	tc, err := clientTLS(cfg)
	if err != nil {
		return err
	}
	if tc.ServerName == "" {
		host, _, _ := net.SplitHostPort(addr)
		tc.ServerName = host
	}
	err = tls.Client(conn, tc).HandshakeContext(ctx)
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var header tls.RecordHeaderError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &unknown):
		return fmt.Errorf("endpoint: %s: its certificate is signed by an unknown authority: give the CA that signed it with %s: %w", rawURL, caFlag, flightline.ErrInvalidInput)
	case errors.As(err, &hostname):
		return fmt.Errorf("endpoint: %s: its certificate is not for this name (%v): connect by a name or IP it holds, or set the server name to check (tls-server-name): %w", rawURL, err, flightline.ErrInvalidInput)
	case errors.As(err, &invalid):
		return fmt.Errorf("endpoint: %s: its certificate is not valid (%v): %w", rawURL, err, flightline.ErrInvalidInput)
	case errors.As(err, &header):
		return fmt.Errorf("endpoint: %s does not speak TLS: write grpc://%s: %w", rawURL, addr, flightline.ErrInvalidInput)
	case ctx.Err() != nil:
		return fmt.Errorf("endpoint: %s: no TLS handshake in time: %w", rawURL, flightline.ErrUnavailable)
	}
	return nil // anything else: leave it to the calls, and their retries
}

type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity is false so tokens also work on loopback
// plaintext; operators crossing hosts should use grpc+tls.
func (b bearer) RequireTransportSecurity() bool { return false }

// String hides the token from %v.
func (b bearer) String() string { return "bearer(redacted)" }
