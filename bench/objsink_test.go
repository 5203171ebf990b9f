// Throughput of the objsink sinks (file:, gcs:, azblob:, sftp://), each
// side by side with a plain upload of the same Parquet bytes, encoded
// before the timer, through the same client library or protocol; figures
// and the command in bench/destinations.md.

package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pkgsftp "github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/objsink/azblob"
	"github.com/flightline/flightline/flightsink/objsink/gcs"
	sftpsink "github.com/flightline/flightline/flightsink/objsink/sftp"
	"github.com/flightline/flightline/internal/parquetw"
	"github.com/flightline/flightline/internal/testkit/objsinktest"
)

// objsinkRows rows per op, in batches of pgBatchRows (100,000), as in
// BenchmarkS3: the PostgreSQL benchmark's rows (bigint, double, 20-char
// text, timestamptz).
const objsinkRows = 1_000_000

// objsinkRatios: the headline (the sink against the plain upload of
// pre-encoded bytes), then the sink against encoding plus upload.
var objsinkRatios = []pair{{"sink", "plain"}, {"sink", "encode_plain"}, {"encode_plain", "plain"}}

// objsinkOp numbers ops across rounds and sides, so that every op writes
// under names of its own.
var objsinkOp atomic.Int64

// storeBench is what one store's benchmark needs: the batches, their
// Parquet bytes (encoded the sink's way, before any timer), a sink, and a
// plain upload of one object.
type storeBench struct {
	mem     memory.Allocator
	batches []arrow.RecordBatch
	encoded [][]byte
	pqBytes int
}

func newStoreBench(b *testing.B, mem memory.Allocator) *storeBench {
	sb := &storeBench{mem: mem, batches: pgBatches(mem, objsinkRows)}
	for _, r := range sb.batches {
		data := sb.encode(b, r)
		sb.encoded = append(sb.encoded, data)
		sb.pqBytes += len(data)
	}
	return sb
}

// encode is the sink's own encoding of a batch (objsink's encode): the
// stored schema, then parquetw.Bytes.
func (sb *storeBench) encode(b *testing.B, r arrow.RecordBatch) []byte {
	st := parquetw.Storable(sb.mem, r, parquetw.StoredSchema(r.Schema()))
	defer st.Release()
	data, _, err := parquetw.Bytes(st, parquetw.Allocator(sb.mem))
	if err != nil {
		b.Fatal(err)
	}
	return data
}

func (sb *storeBench) release() {
	for _, r := range sb.batches {
		r.Release()
	}
}

// timedBackend wraps the sink's Backend and adds up the wall time of each
// of its calls, so the sink side can report how its time splits between
// the store's calls and the rest (encoding, the protocol's own CPU).
type timedBackend struct {
	objsink.Backend
	ns map[string]*atomic.Int64
}

func newTimedBackend(b objsink.Backend) *timedBackend {
	t := &timedBackend{Backend: b, ns: map[string]*atomic.Int64{}}
	for _, m := range timedCalls {
		t.ns[m] = new(atomic.Int64)
	}
	return t
}

var timedCalls = []string{"put", "putifabsent", "publish", "get", "exists", "list", "delete"}

func (t *timedBackend) since(m string, t0 time.Time) { t.ns[m].Add(int64(time.Since(t0))) }

func (t *timedBackend) Put(ctx context.Context, key string, data []byte) error {
	defer t.since("put", time.Now())
	return t.Backend.Put(ctx, key, data)
}

func (t *timedBackend) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	defer t.since("putifabsent", time.Now())
	return t.Backend.PutIfAbsent(ctx, key, data)
}

func (t *timedBackend) Publish(ctx context.Context, from, to string) error {
	defer t.since("publish", time.Now())
	return t.Backend.Publish(ctx, from, to)
}

func (t *timedBackend) Get(ctx context.Context, key string) ([]byte, error) {
	defer t.since("get", time.Now())
	return t.Backend.Get(ctx, key)
}

func (t *timedBackend) Exists(ctx context.Context, key string) (bool, error) {
	defer t.since("exists", time.Now())
	return t.Backend.Exists(ctx, key)
}

func (t *timedBackend) List(ctx context.Context, dir string) ([]objsink.Object, error) {
	defer t.since("list", time.Now())
	return t.Backend.List(ctx, dir)
}

func (t *timedBackend) Delete(ctx context.Context, key string) error {
	defer t.since("delete", time.Now())
	return t.Backend.Delete(ctx, key)
}

// newSink returns the objsink Sink on b (wrapped in a timedBackend) and
// the wrapper.
func newSink(b *testing.B, be objsink.Backend, name string, mem memory.Allocator) (*objsink.Sink, *timedBackend) {
	tb := newTimedBackend(be)
	s, err := objsink.New(context.Background(), objsink.Config{Backend: tb, Name: name}, objsink.Allocator(mem))
	if err != nil {
		b.Fatal(err)
	}
	return s, tb
}

// sides returns the sides of a store's comparison:
//
//   - plain: put(name, bytes) for each batch's pre-encoded Parquet bytes,
//     one object per batch (the upload alone): the peer;
//   - encode_plain: each batch encoded by the sink's encoder, then put
//     (not a peer: what the sink costs beyond encoding is sink /
//     encode_plain);
//   - sink: objsink's Open, then WriteBatch per batch (schema check,
//     Parquet encoding, staging, the commit record, publication), into a
//     target of the op's own. It also reports the wall milliseconds per op
//     spent in each Backend call ("put-ms/op" …) and outside them
//     ("other-ms/op": encoding and the protocol's CPU).
func (sb *storeBench) sides(s *objsink.Sink, tb *timedBackend, put func(b *testing.B, name string, data []byte)) []side {
	rows := float64(objsinkRows)
	plain := side{"plain", func(b *testing.B) {
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			op := objsinkOp.Add(1)
			for i, data := range sb.encoded {
				put(b, fmt.Sprintf("plain-%d/part-%05d.parquet", op, i), data)
			}
		}
		b.ReportMetric(float64(sb.pqBytes), "parquet_bytes/op")
		b.ReportMetric(rows, "rows/op")
	}}
	encodePlain := side{"encode_plain", func(b *testing.B) {
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			op := objsinkOp.Add(1)
			for i, r := range sb.batches {
				put(b, fmt.Sprintf("encode-%d/part-%05d.parquet", op, i), sb.encode(b, r))
			}
		}
		b.ReportMetric(float64(sb.pqBytes), "parquet_bytes/op")
		b.ReportMetric(rows, "rows/op")
	}}
	sink := side{"sink", func(b *testing.B) {
		ctx := context.Background()
		for _, n := range tb.ns {
			n.Store(0)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			op := objsinkOp.Add(1)
			w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "bench", Target: fmt.Sprintf("sink-%d", op)})
			if err != nil {
				b.Fatal(err)
			}
			writeAll(b, w, sb.batches)
			if err := w.Close(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(sb.pqBytes), "parquet_bytes/op")
		b.ReportMetric(rows, "rows/op")
		var in int64
		for _, m := range timedCalls {
			ns := tb.ns[m].Load()
			in += ns
			b.ReportMetric(float64(ns)/1e6/float64(b.N), m+"-ms/op")
		}
		b.ReportMetric((float64(b.Elapsed())-float64(in))/1e6/float64(b.N), "other-ms/op")
	}}
	return []side{plain, encodePlain, sink}
}

// BenchmarkObjsinkFile: the file: sink against a plain durable write of
// the same bytes: os.CreateTemp in the destination directory, Write,
// Sync, Close, then os.Rename to the final name. Both sides run in this
// process alone, so rows per CPU second of the process is reported too.
func BenchmarkObjsinkFile(b *testing.B) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(b, 0)
	sb := newStoreBench(b, mem)
	defer sb.release()
	dir := b.TempDir()
	be, err := objsink.NewLocal(filepath.Join(dir, "sink"))
	if err != nil {
		b.Fatal(err)
	}
	s, tb := newSink(b, be, "file sink", mem)
	put := func(b *testing.B, name string, data []byte) {
		p := filepath.Join(dir, "plain", filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := os.CreateTemp(filepath.Dir(p), ".tmp-")
		if err != nil {
			b.Fatal(err)
		}
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(f.Name(), p)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	interleave(b, comparison{unit: "rows/s", perOp: objsinkRows, ratios: objsinkRatios}, sb.sides(s, tb, put)...)
}

// BenchmarkObjsinkGCS: the gcs: sink against fake-gcs-server, next to a
// plain media upload of the same bytes (POST
// /upload/storage/v1/b/BUCKET/o?uploadType=media, net/http: the JSON API
// the backend speaks) per batch.
func BenchmarkObjsinkGCS(b *testing.B) {
	endpoint := objsinktest.GCSEndpoint(b)
	bucket := objsinktest.NewBucket(b, endpoint)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(b, 0)
	sb := newStoreBench(b, mem)
	defer sb.release()
	be, err := gcs.New(context.Background(), gcs.Config{Bucket: bucket, Prefix: "sink", Endpoint: endpoint})
	if err != nil {
		b.Fatal(err)
	}
	s, tb := newSink(b, be, "gcs sink", mem)
	hc := &http.Client{}
	put := func(b *testing.B, name string, data []byte) {
		q := url.Values{"uploadType": {"media"}, "name": {"plain/" + name}}
		req, err := http.NewRequest(http.MethodPost, endpoint+"/upload/storage/v1/b/"+url.PathEscape(bucket)+"/o?"+q.Encode(), bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("upload %s: HTTP %d", name, resp.StatusCode)
		}
	}
	interleave(b, comparison{wallOnly: true, unit: "rows/s", perOp: objsinkRows, ratios: objsinkRatios}, sb.sides(s, tb, put)...)
}

// BenchmarkObjsinkAzblob: the azblob: sink against Azurite, next to the
// azblob SDK's UploadBuffer of the same bytes per batch (a container
// client with the SDK's default options and the same shared key).
func BenchmarkObjsinkAzblob(b *testing.B) {
	a := objsinktest.NeedAzurite(b)
	cont := a.NewContainer(b)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(b, 0)
	sb := newStoreBench(b, mem)
	defer sb.release()
	be, err := azblob.New(context.Background(), azblob.Config{Container: cont, Prefix: "sink", Endpoint: a.Endpoint, Account: a.Account, Key: a.Key})
	if err != nil {
		b.Fatal(err)
	}
	s, tb := newSink(b, be, "azblob sink", mem)
	cred, err := container.NewSharedKeyCredential(a.Account, a.Key)
	if err != nil {
		b.Fatal(err)
	}
	cc, err := container.NewClientWithSharedKeyCredential(a.Endpoint+"/"+cont, cred, nil)
	if err != nil {
		b.Fatal(err)
	}
	put := func(b *testing.B, name string, data []byte) {
		if _, err := cc.NewBlockBlobClient("plain/"+name).UploadBuffer(context.Background(), data, nil); err != nil {
			b.Fatal(err)
		}
	}
	interleave(b, comparison{wallOnly: true, unit: "rows/s", perOp: objsinkRows, ratios: objsinkRatios}, sb.sides(s, tb, put)...)
}

// BenchmarkObjsinkSFTP: the sftp:// sink against OpenSSH's sftp-server
// behind the services' sshd, next to pkg/sftp's Create, Write, Close of
// the same bytes per batch on a connection of its own (dialled as the
// sink dials: x/crypto/ssh with the user key and known_hosts, then
// sftp.NewClient with its defaults). The plain upload does not fsync
// (fsync@openssh.com) and is not published by a link: what a plain SFTP
// upload does.
func BenchmarkObjsinkSFTP(b *testing.B) {
	sshd := objsinktest.NeedSSH(b)
	root := b.TempDir()
	if err := os.MkdirAll(path.Join(root, "sink"), 0o755); err != nil {
		b.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(b, 0)
	sb := newStoreBench(b, mem)
	defer sb.release()
	ctx := context.Background()
	be, err := sftpsink.New(ctx, sftpsink.Config{Addr: sshd.Addr, User: sshd.User, Root: path.Join(root, "sink"),
		KeyFile: sshd.Key, KnownHosts: sshd.KnownHosts})
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	s, tb := newSink(b, be, "sftp sink", mem)
	client, closeClient := plainSFTP(b, sshd)
	defer closeClient()
	put := func(b *testing.B, name string, data []byte) {
		p := path.Join(root, "plain", name)
		if err := client.MkdirAll(path.Dir(p)); err != nil {
			b.Fatal(err)
		}
		f, err := client.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	interleave(b, comparison{wallOnly: true, unit: "rows/s", perOp: objsinkRows, ratios: objsinkRatios}, sb.sides(s, tb, put)...)
}

// plainSFTP dials the sshd and starts an sftp client with pkg/sftp's
// defaults; closeAll closes it and its SSH connection.
func plainSFTP(b *testing.B, sshd objsinktest.SSH) (c *pkgsftp.Client, closeAll func()) {
	pem, err := os.ReadFile(sshd.Key)
	if err != nil {
		b.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		b.Fatal(err)
	}
	hk, err := knownhosts.New(sshd.KnownHosts)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := net.Dial("tcp", sshd.Addr)
	if err != nil {
		b.Fatal(err)
	}
	sc, chans, reqs, err := ssh.NewClientConn(conn, sshd.Addr, &ssh.ClientConfig{User: sshd.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: hk})
	if err != nil {
		b.Fatal(err)
	}
	sshc := ssh.NewClient(sc, chans, reqs)
	c, err = pkgsftp.NewClient(sshc)
	if err != nil {
		sshc.Close()
		b.Fatal(err)
	}
	return c, func() { c.Close(); sshc.Close() }
}
