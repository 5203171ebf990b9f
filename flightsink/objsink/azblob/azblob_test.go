package azblob_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/objsink/azblob"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/testkit/objsinktest"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// azurite is the emulator of the objsink test kit, with the options that
// reach it.
type azurite struct{ objsinktest.Azurite }

func need(t *testing.T) azurite { return azurite{objsinktest.NeedAzurite(t)} }

// config is the Config of container cont and prefix on Azurite.
func (a azurite) config(cont, prefix string) azblob.Config {
	return azblob.Config{Container: cont, Prefix: prefix, Endpoint: a.Endpoint, Account: a.Account, Key: a.Key}
}

func (a azurite) newContainer(t *testing.T) string { return a.NewContainer(t) }

// readIDs lists every blob under prefix with the Blob service's REST API
// over plain HTTP (not the Backend, not the SDK), skips names with a
// component starting with _ or ., and reads the id column of each Parquet
// part file.
func (a azurite) readIDs(t *testing.T, cont, prefix string) []int64 {
	var ids []int64
	marker := ""
	for {
		q := url.Values{"restype": {"container"}, "comp": {"list"}, "prefix": {prefix + "/"}}
		if marker != "" {
			q.Set("marker", marker)
		}
		resp, err := http.Get(a.Endpoint + "/" + cont + "?" + q.Encode())
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		var page struct {
			Blobs struct {
				Blob []struct {
					Name string `xml:"Name"`
				} `xml:"Blob"`
			} `xml:"Blobs"`
			NextMarker string `xml:"NextMarker"`
		}
		require.NoError(t, xml.Unmarshal(body, &page))
	blobs:
		for _, it := range page.Blobs.Blob {
			for _, c := range strings.Split(strings.TrimPrefix(it.Name, prefix+"/"), "/") {
				if strings.HasPrefix(c, "_") || strings.HasPrefix(c, ".") {
					continue blobs
				}
			}
			resp, err := http.Get(a.Endpoint + "/" + cont + "/" + (&url.URL{Path: it.Name}).EscapedPath())
			require.NoError(t, err)
			data, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", data)
			ids = append(ids, objsinktest.ParquetIDs(t, data)...)
		}
		if page.NextMarker == "" {
			return ids
		}
		marker = page.NextMarker
	}
}

func TestIntegrationAzblobConformance(t *testing.T) {
	a := need(t)
	cont := a.newContainer(t)
	sinktest.Run(t, sinktest.Harness{
		Guarantee: flightsink.ExactlyOnce,
		Group:     true,
		NewSink: func(t *testing.T) flightsink.Sink {
			b, err := azblob.New(context.Background(), a.config(cont, "lake"))
			require.NoError(t, err)
			s, err := objsink.New(context.Background(), objsink.Config{Backend: b, Name: "azblob sink"})
			require.NoError(t, err)
			return s
		},
		IDs: func(t *testing.T, p flightsink.Pipeline) []int64 {
			target, err := objsink.Target(p)
			require.NoError(t, err)
			return a.readIDs(t, cont, "lake/"+target)
		},
	})
}

// The create-if-absent primitive as Azurite answers it, and the errors a
// user meets.
func TestIntegrationAzblobBackend(t *testing.T) {
	a := need(t)
	ctx := context.Background()
	b, err := azblob.New(context.Background(), a.config(a.newContainer(t), "x"))
	require.NoError(t, err)
	require.NoError(t, b.PutIfAbsent(ctx, "d/a", []byte("one")))
	require.ErrorIs(t, b.PutIfAbsent(ctx, "d/a", []byte("two")), objsink.ErrExists)
	got, err := b.Get(ctx, "d/a")
	require.NoError(t, err)
	require.Equal(t, "one", string(got), "the loser wrote nothing")
	require.NoError(t, b.Publish(ctx, "d/a", "d/b"))
	got, err = b.Get(ctx, "d/b")
	require.NoError(t, err)
	require.Equal(t, "one", string(got))
	require.NoError(t, b.Put(ctx, "d/c", []byte("three")))
	err = b.Publish(ctx, "d/c", "d/b")
	require.ErrorIs(t, err, objsink.ErrExists, "a copy onto an existing blob is refused")
	t.Logf("copy onto an existing blob: %v", err)
	got, err = b.Get(ctx, "d/b")
	require.NoError(t, err)
	require.Equal(t, "one", string(got), "the refused copy left the blob")
	objs, err := b.List(ctx, "d")
	require.NoError(t, err)
	require.Len(t, objs, 3)
	require.WithinDuration(t, time.Now(), objs[0].Modified, time.Hour)
	require.NoError(t, b.Delete(ctx, "d/a"))
	require.NoError(t, b.Delete(ctx, "d/a"), "deleting a missing blob is no error")
	ok, err := b.Exists(ctx, "d/a")
	require.NoError(t, err)
	require.False(t, ok)
	_, err = b.Get(ctx, "d/a")
	require.ErrorIs(t, err, os.ErrNotExist)
	objs, err = b.List(ctx, "nothing-here")
	require.NoError(t, err)
	require.Empty(t, objs)

	missing, err := azblob.New(context.Background(), a.config("no-such-container-37", "x"))
	require.NoError(t, err)
	err = missing.PutIfAbsent(ctx, "k", []byte("v"))
	require.ErrorIs(t, err, flightline.ErrNotFound)
	require.ErrorContains(t, err, "no-such-container-37")
	require.Equal(t, codes.NotFound, flighterr.Code(err), "the code at the Flight boundary")
	_, err = missing.List(ctx, "d")
	require.ErrorIs(t, err, flightline.ErrNotFound)

	wrong, err := azblob.New(context.Background(), azblob.Config{Container: "whatever", Prefix: "x", Endpoint: a.Endpoint,
		Account: a.Account, Key: base64.StdEncoding.EncodeToString([]byte("not the key"))})
	require.NoError(t, err)
	err = wrong.Put(ctx, "k", []byte("v"))
	require.True(t, errors.Is(err, flightline.ErrUnauthenticated) || errors.Is(err, flightline.ErrPermissionDenied), "wrong key: %v", err)
	require.Contains(t, []codes.Code{codes.Unauthenticated, codes.PermissionDenied}, flighterr.Code(err))
	require.NotContains(t, err.Error(), a.Key)
	t.Logf("wrong key: %v", err)

	down, err := azblob.New(context.Background(), azblob.Config{Container: "c", Prefix: "x", Endpoint: "http://127.0.0.1:1/devstoreaccount1", Account: a.Account, Key: a.Key})
	require.NoError(t, err)
	err = down.Put(ctx, "k", []byte("v"))
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.Equal(t, codes.Unavailable, flighterr.Code(err))
}

// A container SAS token instead of the account key: the whole protocol,
// the server-side copy included (its source URL carries the token).
func TestIntegrationAzblobSAS(t *testing.T) {
	a := need(t)
	ctx := context.Background()
	cont := a.newContainer(t)
	cred, err := container.NewSharedKeyCredential(a.Account, a.Key)
	require.NoError(t, err)
	perms := sas.ContainerPermissions{Read: true, Add: true, Create: true, Write: true, Delete: true, List: true}
	q, err := sas.BlobSignatureValues{
		Protocol: sas.ProtocolHTTPSandHTTP, StartTime: time.Now().Add(-time.Minute), ExpiryTime: time.Now().Add(time.Hour),
		Permissions: perms.String(), ContainerName: cont,
	}.SignWithSharedKey(cred)
	require.NoError(t, err)
	b, err := azblob.New(context.Background(), azblob.Config{Container: cont, Prefix: "s", Endpoint: a.Endpoint, SAS: "?" + q.Encode()})
	require.NoError(t, err)
	require.NoError(t, b.PutIfAbsent(ctx, "d/a", []byte("one")))
	require.ErrorIs(t, b.PutIfAbsent(ctx, "d/a", []byte("two")), objsink.ErrExists)
	require.NoError(t, b.Publish(ctx, "d/a", "d/b"))
	got, err := b.Get(ctx, "d/b")
	require.NoError(t, err)
	require.Equal(t, "one", string(got))
	objs, err := b.List(ctx, "d")
	require.NoError(t, err)
	require.Len(t, objs, 2)

	// A read-only token cannot write: PermissionDenied, nothing written.
	ro := sas.ContainerPermissions{Read: true, List: true}
	q, err = sas.BlobSignatureValues{
		Protocol: sas.ProtocolHTTPSandHTTP, StartTime: time.Now().Add(-time.Minute), ExpiryTime: time.Now().Add(time.Hour),
		Permissions: ro.String(), ContainerName: cont,
	}.SignWithSharedKey(cred)
	require.NoError(t, err)
	rb, err := azblob.New(context.Background(), azblob.Config{Container: cont, Prefix: "s", Endpoint: a.Endpoint, SAS: q.Encode()})
	require.NoError(t, err)
	err = rb.PutIfAbsent(ctx, "d/c", []byte("x"))
	require.ErrorIs(t, err, flightline.ErrPermissionDenied)
	require.NotContains(t, err.Error(), q.Signature())
	ok, err := b.Exists(ctx, "d/c")
	require.NoError(t, err)
	require.False(t, ok)

	down, err := azblob.New(context.Background(), azblob.Config{Container: cont, Prefix: "s", Endpoint: "http://127.0.0.1:1/devstoreaccount1", SAS: q.Encode()})
	require.NoError(t, err)
	err = down.Put(ctx, "k", []byte("v"))
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.NotContains(t, err.Error(), "sig=", "the token stays out of the message")
	t.Logf("unreachable: %v", err)
}

func TestNewRefusesBadConfig(t *testing.T) {
	for name, cfg := range map[string]azblob.Config{
		"no credentials": {Account: "acct"},
		"no account":     {SAS: "sv=1"},
		"key and sas":    {Account: "acct", Key: "a2V5", SAS: "sv=1"},
		"key not base64": {Account: "acct", Key: "%%%secret%%%"},
		"bad endpoint":   {Endpoint: "ftp://x", SAS: "sv=1"},
	} {
		cfg.Container, cfg.Prefix = "c", "p"
		_, err := azblob.New(context.Background(), cfg)
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), "secret", name)
	}
	_, err := azblob.New(context.Background(), azblob.Config{Container: "a/b", Prefix: "p", SAS: "sv=1", Account: "acct"})
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}

// TestIntegrationAzblobPythonRead writes batches through two writers (the
// second Opens as a restarted process would, and replays the first's last
// batch) and reads the container back with the azure-storage-blob Python
// client and pyarrow.dataset: every id exactly once, the schema's types.
func TestIntegrationAzblobPythonRead(t *testing.T) {
	a := need(t)
	py := servicetest.Need(t, "FLIGHTLINE_PYTHON", "python with pyarrow and azure-storage-blob")
	ctx := context.Background()
	cont := a.newContainer(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	p := flightsink.Pipeline{ID: "py-read"}
	open := func() flightsink.Writer {
		b, err := azblob.New(context.Background(), a.config(cont, "lake"))
		require.NoError(t, err)
		s, err := objsink.New(context.Background(), objsink.Config{Backend: b, Name: "azblob sink"}, objsink.Allocator(mem))
		require.NoError(t, err)
		w, _, err := s.Open(ctx, p)
		require.NoError(t, err)
		return w
	}
	write := func(w flightsink.Writer, from, to int64) {
		rec := sinktest.Batch(mem, from, to)
		defer rec.Release()
		require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(to)))
	}
	w := open()
	write(w, 0, 100)
	write(w, 100, 250)
	require.NoError(t, w.Close(ctx))
	w = open()
	write(w, 100, 250) // a replay: nothing written
	write(w, 250, 400)
	require.NoError(t, w.Close(ctx))

	target, err := objsink.Target(p)
	require.NoError(t, err)
	cmd := exec.Command(py, "../../../integration/python/azblob_read.py", cont, "lake/"+target)
	cmd.Env = append(os.Environ(), "FLIGHTLINE_AZURITE_ENDPOINT="+a.Endpoint,
		"FLIGHTLINE_AZURITE_ACCOUNT="+a.Account, "FLIGHTLINE_AZURITE_KEY="+a.Key)
	out, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("azblob_read.py: %v\n%s", err, ee.Stderr)
	}
	require.NoError(t, err)
	var got struct {
		Files  []string `json:"files"`
		Rows   int      `json:"rows"`
		Schema [][]any  `json:"schema"`
		IDs    []int64  `json:"ids"`
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	require.Len(t, got.Files, 3, "one part file per committed batch: %v", got.Files)
	require.Equal(t, 400, got.Rows)
	require.Equal(t, [][]any{{"id", "int64", false}, {"name", "string", true}}, got.Schema)
	slices.Sort(got.IDs)
	want := make([]int64, 400)
	for i := range want {
		want[i] = int64(i)
	}
	require.Equal(t, want, got.IDs, "every id exactly once")
}
