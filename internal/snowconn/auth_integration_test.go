package snowconn_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/snowconn"
	"github.com/flightline/flightline/internal/testkit/snowtest"
)

// Each authenticator logs in and runs a statement on the emulator. The
// emulator accepts any credentials, so this proves the wiring (gosnowflake
// signs the JWT with the parsed key, sends the OAuth token) and not that
// Snowflake would accept them: see docs/sinks/snowflake.md.
func TestIntegrationAuthenticators(t *testing.T) {
	base := snowtest.Config(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	plain := filepath.Join(dir, "k.p8")
	require.NoError(t, os.WriteFile(plain, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
	cases := map[string]func(c *snowconn.Config){
		"password": func(c *snowconn.Config) {},
		"keypair":  func(c *snowconn.Config) { c.Password, c.PrivateKeyFile = "", plain },
		"oauth":    func(c *snowconn.Config) { c.Password, c.Token = "", "oauth-access-token" },
	}
	openssl, err := exec.LookPath("openssl")
	if err != nil && os.Getenv("FLIGHTLINE_REQUIRE_SERVICES") == "1" {
		t.Fatal("openssl not installed (services.sh up fakesnow installs it): the encrypted key is not checked")
	}
	if err == nil {
		enc := filepath.Join(dir, "k.enc.p8")
		out, err := exec.Command(openssl, "pkcs8", "-topk8", "-in", plain, "-out", enc, "-passout", "pass:pass-phrase", "-v2", "aes256").CombinedOutput()
		require.NoError(t, err, "%s", out)
		cases["keypair-encrypted"] = func(c *snowconn.Config) { c.Password, c.PrivateKeyFile, c.Passphrase = "", enc, "pass-phrase" }
	}
	for name, mod := range cases {
		t.Run(name, func(t *testing.T) {
			c := base
			mod(&c)
			db, err := snowconn.Open(&c)
			require.NoError(t, err)
			defer db.Close()
			require.NoError(t, snowconn.Ping(context.Background(), db, &c))
		})
	}
}
