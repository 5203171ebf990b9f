package sftp_test

import (
	"context"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pkgsftp "github.com/pkg/sftp"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/objsink/sftp"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/testkit/objsinktest"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// sftpServer is the path of OpenSSH's sftp-server: $FLIGHTLINE_SFTP_SERVER
// (set by the services scripts), else Debian's path when it is there.
func sftpServer(t *testing.T) string {
	if v := os.Getenv("FLIGHTLINE_SFTP_SERVER"); v != "" {
		return v
	}
	if _, err := os.Stat("/usr/lib/openssh/sftp-server"); err == nil {
		return "/usr/lib/openssh/sftp-server"
	}
	return servicetest.Need(t, "FLIGHTLINE_SFTP_SERVER", "OpenSSH's sftp-server")
}

// serve starts OpenSSH's sftp-server as a child process and returns a
// client talking to it over its stdin and stdout, and the process (kill it
// to cut the connection).
func serve(t *testing.T) (*pkgsftp.Client, *exec.Cmd) {
	cmd := exec.Command(sftpServer(t), "-e", "-l", "ERROR")
	w, err := cmd.StdinPipe()
	require.NoError(t, err)
	r, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c, err := pkgsftp.NewClientPipe(r, w)
	require.NoError(t, err)
	t.Cleanup(func() {
		c.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return c, cmd
}

// readIDs reads the id column of every part file under dir on the local
// disk the server writes to (not through SFTP), skipping names with a
// component starting with _ or . as pyarrow.dataset does.
func readIDs(t *testing.T, dir string) []int64 {
	var ids []int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if p != dir && (strings.HasPrefix(d.Name(), "_") || strings.HasPrefix(d.Name(), ".")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		ids = append(ids, objsinktest.ParquetIDs(t, data)...)
		return nil
	})
	require.NoError(t, err)
	return ids
}

// The conformance suite, in process and over Flight, on OpenSSH's
// sftp-server (each sink its own server process on one directory).
func TestSFTPConformance(t *testing.T) {
	root := t.TempDir()
	sinktest.Run(t, sinktest.Harness{
		Guarantee: flightsink.ExactlyOnce,
		Group:     true,
		NewSink: func(t *testing.T) flightsink.Sink {
			c, _ := serve(t)
			b, err := sftp.NewOn(c, root, nil)
			require.NoError(t, err)
			s, err := objsink.New(context.Background(), objsink.Config{Backend: b, Name: "sftp sink"})
			require.NoError(t, err)
			return s
		},
		IDs: func(t *testing.T, p flightsink.Pipeline) []int64 {
			target, err := objsink.Target(p)
			require.NoError(t, err)
			return readIDs(t, filepath.Join(root, target))
		},
	})
}

// The create-if-absent primitive as OpenSSH's sftp-server answers it, and
// the errors a user meets.
func TestSFTPBackend(t *testing.T) {
	ctx := context.Background()
	c, srv := serve(t)
	root := t.TempDir()
	b, err := sftp.NewOn(c, root, nil)
	require.NoError(t, err)
	require.NoError(t, b.PutIfAbsent(ctx, "d/a", []byte("one")))
	err = b.PutIfAbsent(ctx, "d/a", []byte("two"))
	require.ErrorIs(t, err, objsink.ErrExists)
	got, err := b.Get(ctx, "d/a")
	require.NoError(t, err)
	require.Equal(t, "one", string(got), "the loser wrote nothing")
	require.NoError(t, b.Publish(ctx, "d/a", "d/b"))
	got, err = b.Get(ctx, "d/b")
	require.NoError(t, err)
	require.Equal(t, "one", string(got))
	require.NoError(t, b.Put(ctx, "d/c", []byte("three")))
	require.NoError(t, b.Put(ctx, "d/c", []byte("four")), "Put replaces")
	got, err = b.Get(ctx, "d/c")
	require.NoError(t, err)
	require.Equal(t, "four", string(got))
	require.ErrorIs(t, b.Publish(ctx, "d/c", "d/b"), objsink.ErrExists, "a link onto an existing file is refused")
	got, err = os.ReadFile(filepath.Join(root, "d", "b"))
	require.NoError(t, err)
	require.Equal(t, "one", string(got), "the refused link left the file (read from disk)")
	objs, err := b.List(ctx, "d")
	require.NoError(t, err)
	require.Len(t, objs, 3, "no temporary file left or listed")
	des, err := os.ReadDir(filepath.Join(root, "d"))
	require.NoError(t, err)
	require.Len(t, des, 3, "no temporary file left on disk")
	require.WithinDuration(t, time.Now(), objs[0].Modified, time.Hour)
	require.NoError(t, b.Delete(ctx, "d/a"))
	require.NoError(t, b.Delete(ctx, "d/a"), "deleting a missing file is no error")
	ok, err := b.Exists(ctx, "d/a")
	require.NoError(t, err)
	require.False(t, ok)
	_, err = b.Get(ctx, "d/a")
	require.ErrorIs(t, err, os.ErrNotExist)
	objs, err = b.List(ctx, "nothing-here")
	require.NoError(t, err)
	require.Empty(t, objs)
	_, err = b.Get(ctx, "../x")
	require.ErrorIs(t, err, flightline.ErrInvalidInput)

	// A missing root directory: NotFound at New, and when it is removed
	// under a running backend.
	_, err = sftp.NewOn(c, filepath.Join(root, "no-such-dir"), nil)
	require.ErrorIs(t, err, flightline.ErrNotFound)
	require.ErrorContains(t, err, "no-such-dir")
	require.Equal(t, codes.NotFound, flighterr.Code(err), "the code at the Flight boundary")
	gone := filepath.Join(root, "gone")
	require.NoError(t, os.Mkdir(gone, 0o755))
	gb, err := sftp.NewOn(c, gone, nil)
	require.NoError(t, err)
	require.NoError(t, os.Remove(gone))
	err = gb.PutIfAbsent(ctx, "t/k", []byte("v"))
	require.ErrorIs(t, err, flightline.ErrNotFound)
	t.Logf("root removed: %v", err)

	// The connection cut (the server process killed): Unavailable.
	require.NoError(t, srv.Process.Kill())
	srv.Wait()
	err = b.PutIfAbsent(ctx, "d/z", []byte("v"))
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.Equal(t, codes.Unavailable, flighterr.Code(err))
	t.Logf("connection cut: %v", err)
	_, err = b.List(ctx, "d")
	require.ErrorIs(t, err, flightline.ErrUnavailable)
}

// Racing create-if-absent on one name through separate server processes:
// exactly one winner.
func TestSFTPRace(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	const n = 8
	bs := make([]*sftp.Backend, n)
	for i := range bs {
		c, _ := serve(t)
		b, err := sftp.NewOn(c, root, nil)
		require.NoError(t, err)
		bs[i] = b
	}
	for round := range 5 {
		key := "r/" + string(rune('a'+round))
		errs := make(chan error, n)
		for i, b := range bs {
			go func() { errs <- b.PutIfAbsent(ctx, key, []byte{byte(i)}) }()
		}
		wins := 0
		for range n {
			err := <-errs
			if err == nil {
				wins++
			} else {
				require.ErrorIs(t, err, objsink.ErrExists)
			}
		}
		require.Equal(t, 1, wins, "round %d", round)
	}
}

// pkg/sftp's in-process server offers neither extension: refused with
// FailedPrecondition, not run with a rename that overwrites.
func TestSFTPRefusesServerWithoutExtensions(t *testing.T) {
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv, err := pkgsftp.NewServer(rwc{sr, sw})
	require.NoError(t, err)
	go srv.Serve()
	c, err := pkgsftp.NewClientPipe(cr, cw)
	require.NoError(t, err)
	_, err = sftp.NewOn(c, t.TempDir(), nil)
	srv.Close() // first: the client's Close waits for its reader to end
	c.Close()
	require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
	require.Equal(t, codes.FailedPrecondition, flighterr.Code(err))
	require.ErrorContains(t, err, "@openssh.com")
	t.Logf("%v", err)
}

// rwc is one end of a duplex pipe.
type rwc struct {
	*io.PipeReader
	w *io.PipeWriter
}

func (p rwc) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p rwc) Close() error {
	p.w.Close()
	return p.PipeReader.Close()
}
