package snowconn

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	sf "github.com/snowflakedb/gosnowflake"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/flighterr"
)

const secret = "Sup3r-S3cret-pw"

func base() Config {
	return Config{Account: "acct", User: "loader", Database: "DB", Schema: "S", Warehouse: "WH", Password: secret}
}

// The error numbers are Snowflake's (and gosnowflake's) documented ones;
// the emulator accepts any credentials and has no warehouses, so these
// classifications are checked here, on the errors themselves.
func TestClassify(t *testing.T) {
	c := base()
	for _, tc := range []struct {
		err  error
		want error
		code codes.Code
		has  string
	}{
		{&sf.SnowflakeError{Number: 390100, Message: "Incorrect username or password was specified."}, flightline.ErrUnauthenticated, codes.Unauthenticated, `"loader"`},
		{&sf.SnowflakeError{Number: 390144, Message: "JWT token is invalid."}, flightline.ErrUnauthenticated, codes.Unauthenticated, "loader"},
		{&sf.SnowflakeError{Number: 390303, Message: "Invalid OAuth access token."}, flightline.ErrUnauthenticated, codes.Unauthenticated, "loader"},
		{&sf.SnowflakeError{Number: 390201, Message: "The requested warehouse does not exist or not authorized."}, flightline.ErrNotFound, codes.NotFound, `warehouse "WH"`},
		{&sf.SnowflakeError{Number: 390201, Message: "The requested database does not exist or not authorized."}, flightline.ErrNotFound, codes.NotFound, `database "DB"`},
		{&sf.SnowflakeError{Number: 606, Message: "No active warehouse selected in the current session."}, flightline.ErrNotFound, codes.NotFound, `warehouse "WH"`},
		{&sf.SnowflakeError{Number: 3001, Message: "Insufficient privileges"}, flightline.ErrPermissionDenied, codes.PermissionDenied, ""},
		{&sf.SnowflakeError{Number: 390112, Message: "Your session has expired."}, flightline.ErrUnavailable, codes.Unavailable, ""},
		{&sf.SnowflakeError{Number: 625, Message: "Statement reached its statement or warehouse timeout of 60 second(s) and was canceled."}, flightline.ErrConflict, codes.Aborted, ""},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, flightline.ErrUnavailable, codes.Unavailable, ""},
	} {
		err := c.Wrap(tc.err, "op")
		require.ErrorIs(t, err, tc.want, "%v", tc.err)
		require.Equal(t, tc.code, status.Code(flighterr.ToStatus(err)), "%v", tc.err)
		require.Contains(t, err.Error(), tc.has)
	}
	// A driver message that echoes a secret is redacted.
	err := c.Wrap(&sf.SnowflakeError{Number: 390100, Message: "bad password " + secret}, "op")
	require.NotContains(t, err.Error(), secret)
	require.NotContains(t, status.Convert(flighterr.ToStatus(err)).Message(), secret)
}

// A login refused the way Snowflake refuses it (HTTP 200, success false,
// code 390100) is UNAUTHENTICATED, names the user and never the password.
// The server is a stand-in that answers every request with Snowflake's
// documented login failure: the emulator accepts any password.
func TestWrongPasswordUnauthenticated(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"data":{"nextAction":null},"code":"390100","message":"Incorrect username or password was specified.","success":false}`))
	}))
	defer srv.Close()
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	c := base()
	c.Host, c.Protocol = host, "http"
	c.Port, _ = strconv.Atoi(port)
	c.Timeout, c.Retries = 5*time.Second, 1
	var driverLog bytes.Buffer // gosnowflake's own log (stderr by default)
	sf.GetLogger().SetOutput(&driverLog)
	defer sf.GetLogger().SetOutput(os.Stderr)
	db, err := Open(&c)
	require.NoError(t, err)
	defer db.Close()
	err = Ping(context.Background(), db, &c)
	require.Contains(t, driverLog.String(), "Authentication FAILED")
	require.NotContains(t, driverLog.String(), secret)
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
	require.Equal(t, codes.Unauthenticated, status.Code(flighterr.ToStatus(err)))
	require.Contains(t, err.Error(), "loader")
	require.NotContains(t, err.Error(), secret)
}

// A dead endpoint fails within the configured timeout, not gosnowflake's
// default minute of retries, as ErrUnavailable.
func TestDeadEndpointUnavailableInTime(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().(*net.TCPAddr)
	l.Close()
	c := base()
	c.Host, c.Port, c.Protocol = "127.0.0.1", addr.Port, "http"
	c.Timeout, c.Retries = 3*time.Second, 1
	db, err := Open(&c)
	require.NoError(t, err)
	defer db.Close()
	start := time.Now()
	err = Retry(context.Background(), 4*time.Second, func(ctx context.Context) error { return Ping(ctx, db, &c) })
	took := time.Since(start)
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.Equal(t, codes.Unavailable, status.Code(flighterr.ToStatus(err)))
	require.Less(t, took, 30*time.Second, "the retries must be bounded by Timeout and the retry budget")
	require.NotContains(t, err.Error(), secret)
}

func TestConfigRefusals(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Account = "" }, "account"},
		{func(c *Config) { c.Database = "" }, "database"},
		{func(c *Config) { c.Password = "" }, "without a password"},
		{func(c *Config) { c.Auth = AuthOAuth }, "without a token"},
		{func(c *Config) { c.Auth = "kerberos" }, "unknown authentication"},
	} {
		c := base()
		tc.mod(&c)
		_, err := Open(&c)
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
		require.ErrorContains(t, err, tc.want)
	}
}

// Key-pair authentication reads PKCS#8, PKCS#1 and encrypted PKCS#8 keys
// (made by openssl, as Snowflake's documentation says to); a wrong
// passphrase is refused without echoing it.
func TestParsePrivateKey(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	p8 := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	got, err := ParsePrivateKey(p8, nil)
	require.NoError(t, err)
	require.True(t, got.Equal(key))
	p1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	got, err = ParsePrivateKey(p1, nil)
	require.NoError(t, err)
	require.True(t, got.Equal(key))

	openssl, err := exec.LookPath("openssl")
	if err != nil {
		// make test (services.sh up fakesnow) installs it.
		if os.Getenv("FLIGHTLINE_REQUIRE_SERVICES") == "1" {
			t.Fatal("openssl not installed: encrypted PKCS#8 not checked")
		}
		t.Skip("openssl not installed: encrypted PKCS#8 not checked")
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "k.p8")
	require.NoError(t, os.WriteFile(plain, p8, 0o600))
	for _, args := range [][]string{
		{"-v2", "aes256", "-v2prf", "hmacWithSHA256"},
		{"-v2", "aes128"},
	} {
		enc := filepath.Join(dir, "k.enc.p8")
		cmd := exec.Command(openssl, append([]string{"pkcs8", "-topk8", "-in", plain, "-out", enc, "-passout", "pass:" + secret}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		pemEnc, err := os.ReadFile(enc)
		require.NoError(t, err)
		require.Contains(t, string(pemEnc), "ENCRYPTED PRIVATE KEY")
		got, err := ParsePrivateKey(pemEnc, []byte(secret))
		require.NoError(t, err, "%v", args)
		require.True(t, got.Equal(key))
		_, err = ParsePrivateKey(pemEnc, []byte("wrong-"+secret))
		require.ErrorIs(t, err, flightline.ErrInvalidInput)
		require.NotContains(t, err.Error(), secret)
		_, err = ParsePrivateKey(pemEnc, nil)
		require.ErrorContains(t, err, "no passphrase")

		c := base()
		c.Password, c.PrivateKeyFile, c.Passphrase = "", enc, secret
		db, err := Open(&c)
		require.NoError(t, err, "key-pair config with an encrypted key")
		db.Close()
		require.Equal(t, AuthKeyPair, c.Auth)
	}
}

func TestParseIdent(t *testing.T) {
	for in, want := range map[string][]string{
		"orders":                  {"ORDERS"},
		"sales.orders":            {"SALES", "ORDERS"},
		`db."Sales"."odd ""t""."`: {"DB", "Sales", `odd "t".`},
	} {
		got, err := ParseIdent(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "a.b.c.d", `"open`, "a b", "a;drop"} {
		_, err := ParseIdent(bad)
		require.ErrorIs(t, err, flightline.ErrInvalidInput, bad)
	}
	require.Equal(t, `"DB"."Sales"."odd ""t""."`, QuoteParts([]string{"DB", "Sales", `odd "t".`}))
}

// A session the server no longer knows: the session codes, and the HTTP
// 401 the server answers an unknown token with (the emulator after a
// restart; Snowflake after dropping a session). Other failures are not.
func TestSessionLost(t *testing.T) {
	for _, n := range []int{errSessionClosed, errSessionGone, errSessionExpired} {
		require.True(t, SessionLost(fmt.Errorf("wrapped: %w", &sf.SnowflakeError{Number: n})), n)
	}
	post := func(code int) error {
		return &sf.SnowflakeError{Number: sf.ErrFailedToPostQuery, SQLState: "08006",
			Message: "failed to POST. HTTP: %v, URL: %v", MessageArgs: []any{code, "http://x/queries/v1/query-request"}}
	}
	require.True(t, SessionLost(post(401)))
	require.False(t, SessionLost(post(503)))
	require.False(t, SessionLost(&sf.SnowflakeError{Number: errLockTimeout}))
	require.False(t, SessionLost(errors.New("HTTP: 401")))
	require.False(t, SessionLost(nil))
	// Still classified as unavailable (retried).
	c := Config{Account: "a", User: "u"}
	require.ErrorIs(t, c.Wrap(post(401), "q"), flightline.ErrUnavailable)
	require.ErrorIs(t, c.Wrap(&sf.SnowflakeError{Number: errSessionClosed}, "q"), flightline.ErrUnavailable)
}
