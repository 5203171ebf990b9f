// Package objsinktest connects tests to the object stores that
// integration/services/services.sh starts for the objsink backends
// (fake-gcs-server, Azurite, OpenSSH's sshd), creates fresh buckets and
// containers on them, and reads Parquet part files back with arrow-go's
// own reader. Every function skips its test (fails it under
// FLIGHTLINE_REQUIRE_SERVICES=1) when the service is not configured.
package objsinktest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// GCSEndpoint is fake-gcs-server's JSON API endpoint
// (FLIGHTLINE_GCS_ENDPOINT).
func GCSEndpoint(t testing.TB) string {
	t.Helper()
	return servicetest.Need(t, "FLIGHTLINE_GCS_ENDPOINT", "fake-gcs-server")
}

// NewBucket creates a fresh bucket on fake-gcs-server with a plain JSON
// API call and returns its name.
func NewBucket(t testing.TB, endpoint string) string {
	t.Helper()
	name := fmt.Sprintf("st-%08d", rand.IntN(1e8))
	body, _ := json.Marshal(map[string]string{"name": name})
	resp, err := http.Post(endpoint+"/storage/v1/b?project=test", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "create bucket %s: %s", name, b)
	return name
}

// Azurite is the Azurite blob service and its development account.
type Azurite struct{ Endpoint, Account, Key string }

// NeedAzurite returns the Azurite service (FLIGHTLINE_AZURITE_ENDPOINT,
// _ACCOUNT, _KEY).
func NeedAzurite(t testing.TB) Azurite {
	t.Helper()
	endpoint := servicetest.Need(t, "FLIGHTLINE_AZURITE_ENDPOINT", "Azurite")
	return Azurite{endpoint, os.Getenv("FLIGHTLINE_AZURITE_ACCOUNT"), os.Getenv("FLIGHTLINE_AZURITE_KEY")}
}

// NewContainer creates a fresh container that anyone may read (so that a
// test can list and read it with plain unauthenticated HTTP) and returns
// its name.
func (a Azurite) NewContainer(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("st-%08d", rand.IntN(1e8))
	cred, err := container.NewSharedKeyCredential(a.Account, a.Key)
	require.NoError(t, err)
	c, err := container.NewClientWithSharedKeyCredential(a.Endpoint+"/"+name, cred, nil)
	require.NoError(t, err)
	_, err = c.Create(context.Background(), &container.CreateOptions{Access: to.Ptr(container.PublicAccessTypeContainer)})
	require.NoError(t, err, "create container %s", name)
	return name
}

// SSH is the sshd the services start on 127.0.0.1 with a generated host
// key and user key.
type SSH struct {
	Addr       string // host:port
	User       string
	Key        string // the user's private key file
	KnownHosts string // a known_hosts file holding the server's host key
}

// NeedSSH returns the sshd (FLIGHTLINE_SFTP_ADDR, _USER, _KEY,
// _KNOWN_HOSTS).
func NeedSSH(t testing.TB) SSH {
	t.Helper()
	return SSH{
		Addr:       servicetest.Need(t, "FLIGHTLINE_SFTP_ADDR", "sshd with OpenSSH's sftp-server"),
		User:       servicetest.Need(t, "FLIGHTLINE_SFTP_USER", "the sshd's test user"),
		Key:        servicetest.Need(t, "FLIGHTLINE_SFTP_KEY", "the sshd's test user key"),
		KnownHosts: servicetest.Need(t, "FLIGHTLINE_SFTP_KNOWN_HOSTS", "the sshd's known_hosts file"),
	}
}

// URL is the sftp:// sink URL of the directory dir on the sshd, with its
// key file and known_hosts (dir is absolute: the sshd runs on this
// machine).
func (s SSH) URL(dir string) string {
	return fmt.Sprintf("sftp://%s@%s%s?key_file=%s&known_hosts=%s", s.User, s.Addr, dir, s.Key, s.KnownHosts)
}

// ParquetIDs reads the int64 first column (id) of a Parquet file with
// arrow-go's reader, from a checked allocator left at zero bytes.
func ParquetIDs(t testing.TB, data []byte) []int64 {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	require.NoError(t, err)
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, mem)
	require.NoError(t, err)
	tbl, err := fr.ReadTable(context.Background())
	require.NoError(t, err)
	defer tbl.Release()
	var ids []int64
	for _, ch := range tbl.Column(0).Data().Chunks() {
		ids = append(ids, ch.(*array.Int64).Int64Values()...)
	}
	return ids
}
