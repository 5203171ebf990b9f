package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/endpoint"
)

// The dialing path's errors without a server (no sshd is started here):
// bad URLs, a password in the URL, no credentials, an unreadable key, a
// missing known_hosts, an unreachable port.
func TestSFTPKindErrors(t *testing.T) {
	t.Setenv("FLIGHTLINE_SFTP_PASSWORD", "")
	dir := t.TempDir()
	bad := filepath.Join(dir, "key")
	require.NoError(t, os.WriteFile(bad, []byte("not a key"), 0o600))
	for raw, want := range map[string]string{
		"sftp:dir":                                  "want sftp://USER@HOST",
		"sftp://host/p":                             "want sftp://USER@HOST",
		"sftp://u@host":                             "want sftp://USER@HOST",
		"sftp://u:secretpw@host/p":                  "no password in the URL",
		"sftp://u@127.0.0.1:1/p?colour=green":       "unknown option(s) colour",
		"sftp://u@127.0.0.1:1/p?format=orc":         "format",
		"sftp://u@127.0.0.1:1/p":                    "no credentials",
		"sftp://u@127.0.0.1:1/p?key_file=" + bad:    "key file",
		"sftp://u@127.0.0.1:1/p?key_file=/nonexist": "key file",
	} {
		_, _, err := openSink(testEnv, raw, endpoint.ClientConfig{})
		require.ErrorContains(t, err, want, raw)
		require.NotContains(t, err.Error(), "secretpw")
	}
	t.Setenv("FLIGHTLINE_SFTP_PASSWORD", "pw")
	_, _, err := openSink(testEnv, "sftp://u@127.0.0.1:1/p?known_hosts="+filepath.Join(dir, "none"), endpoint.ClientConfig{})
	require.ErrorContains(t, err, "known_hosts")
	_, _, err = openSink(testEnv, "sftp://u@127.0.0.1:1/p?insecure_ignore_host_key=true", endpoint.ClientConfig{})
	require.ErrorContains(t, err, "connect to 127.0.0.1:1")
}
