package main

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
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
)

// writeCert writes a certificate (a CA when parent is nil) and its key as
// PEM files in dir and returns them with the parsed certificate and key.
func writeCert(t *testing.T, dir, name string, serial int64, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (string, string, *x509.Certificate, *ecdsa.PrivateKey) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
		parent, parentKey = tmpl, k
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, parentKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	kb, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	c, kf := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	require.NoError(t, os.WriteFile(c, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(kf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600))
	return c, kf, cert, k
}

// A run whose client certificate is missing or from another CA stops at
// once with ErrUnauthenticated, instead of retrying a refused handshake
// (UNAVAILABLE) for ever; with the right certificate it runs.
func TestRunAgainstMTLSSink(t *testing.T) {
	logs := captureLogs(t)
	dir := t.TempDir()
	caFile, _, ca, caKey := writeCert(t, dir, "ca", 1, nil, nil)
	srvCert, srvKey, _, _ := writeCert(t, dir, "server", 2, ca, caKey)
	cliCert, cliKey, _, _ := writeCert(t, dir, "client", 3, ca, caKey)
	_, _, other, otherKey := writeCert(t, dir, "other-ca", 4, nil, nil)
	rogueCert, rogueKey, _, _ := writeCert(t, dir, "rogue", 5, other, otherKey)

	sctx, stopSink := context.WithCancel(context.Background())
	sinkDone := make(chan error, 1)
	go func() {
		sinkDone <- serveSink(sctx, []string{"--sink", "memory:", "--listen", "127.0.0.1:0",
			"--tls-cert", srvCert, "--tls-key", srvKey, "--tls-client-ca", caFile})
	}()
	defer func() {
		stopSink()
		require.NoError(t, <-sinkDone)
	}()
	addr := regexp.MustCompile(`msg=listening addr=(\S+)`)
	var url string
	require.Eventually(t, func() bool {
		m := addr.FindStringSubmatch(logs.String())
		if m != nil {
			url = "grpc+tls://" + m[1]
		}
		return m != nil
	}, 10*time.Second, 10*time.Millisecond)

	run := func(extra ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		args := append([]string{"--source", "generator:?rows=2000&batch_rows=500", "--sink", url, "--sink-tls-ca", caFile,
			"--pipeline", "mtls"}, extra...)
		start := time.Now()
		err := runPipeline(ctx, args)
		require.Less(t, time.Since(start), 10*time.Second, "no retrying")
		return err
	}
	require.ErrorIs(t, run(), flightline.ErrUnauthenticated, "no client certificate")
	require.ErrorIs(t, run("--sink-tls-cert", rogueCert, "--sink-tls-key", rogueKey), flightline.ErrUnauthenticated, "a certificate from another CA")
	require.NoError(t, run("--sink-tls-cert", cliCert, "--sink-tls-key", cliKey))
	require.Contains(t, logs.String(), `msg="run finished" pipeline=mtls rows=2000`)
}

// A transport mismatch is a configuration error naming the fix, at once,
// not a connection error retried for ever: grpc:// against a TLS server,
// grpc+tls:// against a plaintext one, a certificate from an unknown CA.
// A sink that is down at start is a warning saying so, then retried.
func TestRunTransportMistakesSayWhatToDo(t *testing.T) {
	logs := captureLogs(t)
	dir := t.TempDir()
	caFile, _, ca, caKey := writeCert(t, dir, "ca", 1, nil, nil)
	srvCert, srvKey, _, _ := writeCert(t, dir, "server", 2, ca, caKey)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 2)
	tlsAddr, plainAddr := freeAddr(t), freeAddr(t)
	go func() {
		done <- serveSink(ctx, []string{"--sink", "memory:", "--listen", tlsAddr, "--tls-cert", srvCert, "--tls-key", srvKey})
	}()
	go func() { done <- serveSink(ctx, []string{"--sink", "memory:", "--listen", plainAddr}) }()
	defer func() { stop(); require.NoError(t, <-done); require.NoError(t, <-done) }()
	require.Eventually(t, func() bool { return strings.Count(logs.String(), "msg=listening") == 2 }, 20*time.Second, 10*time.Millisecond)

	run := func(args ...string) error {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		err := runPipeline(rctx, append([]string{"--source", "generator:?rows=100", "--pipeline", "p", "--max-attempts", "2"}, args...))
		require.Less(t, time.Since(start), 15*time.Second, "no retrying")
		return err
	}
	err := run("--sink", "grpc://"+tlsAddr)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.ErrorContains(t, err, "speaks TLS: write grpc+tls://"+tlsAddr)
	err = run("--sink", "grpc+tls://"+tlsAddr)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.ErrorContains(t, err, "signed by an unknown authority: give the CA that signed it with --sink-tls-ca")
	err = run("--sink", "grpc+tls://"+plainAddr, "--sink-tls-ca", caFile)
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
	require.ErrorContains(t, err, "does not speak TLS: write grpc://"+plainAddr)
	require.NoError(t, run("--sink", "grpc+tls://"+tlsAddr, "--sink-tls-ca", caFile))

	down := freeAddr(t)
	require.Error(t, run("--sink", "grpc://"+down))
	require.Contains(t, logs.String(), `msg="--sink grpc://`+down+` does not answer at start; retrying until it does"`)
}
