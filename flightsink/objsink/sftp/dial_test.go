package sftp_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	"google.golang.org/grpc/codes"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/objsink/sftp"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/testkit/objsinktest"
)

// newKey writes a fresh ed25519 private key in OpenSSH format and returns
// its file.
func newKey(t *testing.T) (string, ssh.PublicKey) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	blk, err := ssh.MarshalPrivateKey(priv, "")
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(blk), 0o600))
	spub, err := ssh.NewPublicKey(pub)
	require.NoError(t, err)
	return file, spub
}

// What a user meets when dialling goes wrong, against the real sshd: the
// gRPC code each error gets at the Flight boundary, and no secret in it.
func TestIntegrationSFTPDialErrors(t *testing.T) {
	s := objsinktest.NeedSSH(t)
	ctx := context.Background()
	root := t.TempDir()
	otherKey, otherPub := newKey(t)
	host, port, _ := net.SplitHostPort(s.Addr)
	wrongHosts := filepath.Join(t.TempDir(), "known_hosts")
	require.NoError(t, os.WriteFile(wrongHosts, []byte("["+host+"]:"+port+" "+string(ssh.MarshalAuthorizedKey(otherPub))), 0o644))
	emptyHosts := filepath.Join(t.TempDir(), "empty")
	require.NoError(t, os.WriteFile(emptyHosts, nil, 0o644))
	for _, c := range []struct {
		name string
		cfg  sftp.Config
		code codes.Code
		want string
	}{
		{"a key the server does not know", sftp.Config{Addr: s.Addr, User: s.User, Root: root, KeyFile: otherKey, KnownHosts: s.KnownHosts}, codes.Unauthenticated, "ssh handshake"},
		{"another user", sftp.Config{Addr: s.Addr, User: "nobody-" + s.User, Root: root, KeyFile: s.Key, KnownHosts: s.KnownHosts}, codes.Unauthenticated, "ssh handshake"},
		{"a wrong password", sftp.Config{Addr: s.Addr, User: s.User, Root: root, Password: "not-the-password-37", KnownHosts: s.KnownHosts}, codes.Unauthenticated, "ssh handshake"},
		{"another host key in known_hosts", sftp.Config{Addr: s.Addr, User: s.User, Root: root, KeyFile: s.Key, KnownHosts: wrongHosts}, codes.Unauthenticated, "known_hosts"},
		{"the host not in known_hosts", sftp.Config{Addr: s.Addr, User: s.User, Root: root, KeyFile: s.Key, KnownHosts: emptyHosts}, codes.Unauthenticated, "known_hosts"},
		{"a missing directory", sftp.Config{Addr: s.Addr, User: s.User, Root: filepath.Join(root, "no-such-dir"), KeyFile: s.Key, KnownHosts: s.KnownHosts}, codes.NotFound, "no-such-dir"},
		{"nothing listening", sftp.Config{Addr: "127.0.0.1:1", User: s.User, Root: root, KeyFile: s.Key, KnownHosts: s.KnownHosts}, codes.Unavailable, "connect to 127.0.0.1:1"},
	} {
		_, err := sftp.New(ctx, c.cfg)
		require.Error(t, err, c.name)
		require.Equal(t, c.code, flighterr.Code(err), "%s: %v", c.name, err)
		require.ErrorContains(t, err, c.want, c.name)
		require.NotContains(t, err.Error(), "not-the-password-37", c.name)
		t.Logf("%s: %s", c.name, err)
	}
}

// cutter forwards TCP connections to an address and can cut all of them.
type cutter struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutter(t *testing.T, to string) *cutter {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &cutter{l: l}
	t.Cleanup(func() { l.Close(); c.cut() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", to)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return c
}

// cut closes every connection forwarded so far.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.conns {
		x.Close()
	}
	c.conns = nil
}

// The SSH connection cut under a writer: the calls in flight fail with
// Unavailable, the next Open (the coordinator's retry) reaches a new
// connection, and every batch is committed once.
func TestIntegrationSFTPConnectionCut(t *testing.T) {
	s := objsinktest.NeedSSH(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	root := t.TempDir()
	proxy := newCutter(t, s.Addr)
	// known_hosts names the sshd's port; the proxy's needs its own line.
	kh, err := os.ReadFile(s.KnownHosts)
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(s.Addr)
	_, pport, _ := net.SplitHostPort(proxy.l.Addr().String())
	hosts := filepath.Join(t.TempDir(), "known_hosts")
	require.NoError(t, os.WriteFile(hosts, []byte(strings.ReplaceAll(string(kh), "]:"+port+" ", "]:"+pport+" ")), 0o644))

	b, err := sftp.New(ctx, sftp.Config{Addr: proxy.l.Addr().String(), User: s.User, Root: root, KeyFile: s.Key, KnownHosts: hosts})
	require.NoError(t, err)
	defer b.Close()
	sink, err := objsink.New(context.Background(), objsink.Config{Backend: b, Name: "sftp sink"})
	require.NoError(t, err)
	p := flightsink.Pipeline{ID: "cut"}
	write := func(w flightsink.Writer, from, to int64) error {
		rec := sinktest.Batch(mem, from, to)
		defer rec.Release()
		return w.WriteBatch(ctx, rec, sinktest.CP(to))
	}
	w, _, err := sink.Open(ctx, p)
	require.NoError(t, err)
	require.NoError(t, write(w, 0, 100))
	proxy.cut()
	// The write right after the cut fails with Unavailable, or (when the
	// connection's end was noticed first) goes through a new connection.
	err = write(w, 100, 200)
	next := int64(200)
	if err != nil {
		require.Equal(t, codes.Unavailable, flighterr.Code(err), "%v", err)
		require.ErrorIs(t, err, flightline.ErrUnavailable)
		t.Logf("write across the cut: %v", err)
		next = 100
	} else {
		t.Log("write across the cut: through a new connection")
	}
	w, cp, err := sink.Open(ctx, p) // the coordinator's retry
	require.NoError(t, err)
	require.Equal(t, sinktest.CP(next), cp)
	if next == 100 {
		require.NoError(t, write(w, 100, 200))
	}
	proxy.cut() // while idle: the same, at most one failure, then through
	if err := write(w, 200, 300); err != nil {
		require.ErrorIs(t, err, flightline.ErrUnavailable)
		w, cp, err = sink.Open(ctx, p)
		require.NoError(t, err)
		if string(cp) != string(sinktest.CP(300)) {
			require.NoError(t, write(w, 200, 300))
		}
	}
	ids := readIDs(t, filepath.Join(root, "default"))
	require.Len(t, ids, 300)
	seen := map[int64]bool{}
	for _, id := range ids {
		require.False(t, seen[id], "id %d twice", id)
		seen[id] = true
	}
}
