// Package sftp is the objsink.Backend of a directory on an SFTP server
// (github.com/pkg/sftp over golang.org/x/crypto/ssh).
//
// Create-if-absent: the data is written to a hidden temporary file beside
// the key, made durable with fsync@openssh.com, then linked to the key with
// hardlink@openssh.com, which fails on an existing name (OpenSSH's
// sftp-server calls link(2)); the temporary file is removed. Publish is the
// same link from the staged file. Put (replace) uses
// posix-rename@openssh.com when offered, else removes the old file first.
//
// New refuses a server that lacks hardlink@openssh.com or
// fsync@openssh.com with flightline.ErrFailedPrecondition: without them the
// server offers no create-if-absent this backend trusts, and an
// at-least-once fallback is not built.
//
// Pitfalls:
//   - pkg/sftp's own in-process server is not faithful (its rename
//     overwrites, it has no fsync@openssh.com): test against OpenSSH's
//     sftp-server.
//   - The Backend of New does not redial: after its connection broke,
//     every call fails with flightline.ErrUnavailable. The Backend of
//     New (Redialing) dials again at the first call after the loss.
package sftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"strings"
	"sync"

	"github.com/pkg/sftp"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink/objsink"
)

// Required are the extensions New checks for.
var Required = []string{"hardlink@openssh.com", "fsync@openssh.com"}

// Backend is an objsink.Backend on an SFTP client. It is safe for
// concurrent use.
type Backend struct {
	c     *sftp.Client
	root  string
	close func() error
	dirs  sync.Map // directories known to exist
}

// NewOn returns the Backend of the directory root on c, a client the
// caller connected (New dials one itself); a missing root is
// flightline.ErrNotFound (it is not created: a drop directory is the
// server's to provision, and a typo should not make a new one). closer (may be nil) is called by Close after the client is
// closed, e.g. to close the SSH connection under it.
func NewOn(c *sftp.Client, root string, closer func() error) (*Backend, error) {
	for _, ext := range Required {
		if _, ok := c.HasExtension(ext); !ok {
			return nil, fmt.Errorf("%w: sftp sink: the server does not offer %s, which the exactly-once protocol needs (OpenSSH's sftp-server has it); no at-least-once fallback is built", flightline.ErrFailedPrecondition, ext)
		}
	}
	root = path.Clean("/" + strings.Trim(root, "/"))
	if strings.Contains(root, "..") {
		return nil, fmt.Errorf("%w: sftp sink: bad path %q", flightline.ErrInvalidInput, root)
	}
	b := &Backend{c: c, root: root, close: closer}
	fi, err := c.Stat(root)
	if err != nil {
		return nil, b.err("directory "+root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%w: sftp sink: %s is not a directory", flightline.ErrFailedPrecondition, root)
	}
	b.dirs.Store(root, true)
	return b, nil
}

// mkdir creates dir and its parents below the root (never the root
// itself: a root removed under a running sink is NotFound, as a missing
// root is at New).
func (b *Backend) mkdir(dir string) error {
	if _, ok := b.dirs.Load(dir); ok {
		return nil
	}
	if fi, err := b.c.Stat(dir); err == nil && fi.IsDir() {
		b.dirs.Store(dir, true)
		return nil
	}
	rel := strings.TrimPrefix(dir, b.root+"/")
	p := b.root
	for _, c := range strings.Split(rel, "/") {
		p = path.Join(p, c)
		if err := b.c.Mkdir(p); err != nil {
			if fi, serr := b.c.Stat(p); serr == nil && fi.IsDir() {
				continue
			}
			return b.err("create "+p, err)
		}
	}
	b.dirs.Store(dir, true)
	return nil
}

// Root is the directory on the server.
func (b *Backend) Root() string { return b.root }

// Close closes the client (and the connection under it).
func (b *Backend) Close() error {
	err := b.c.Close()
	if b.close != nil {
		if cerr := b.close(); err == nil {
			err = cerr
		}
	}
	return err
}

func (b *Backend) path(key string) (string, error) {
	if key == "" || strings.Contains(key, "..") || strings.HasPrefix(key, "/") {
		return "", fmt.Errorf("%w: sftp sink: bad key %q", flightline.ErrInvalidInput, key)
	}
	return path.Join(b.root, key), nil
}

// err classifies an SFTP error: a missing file or directory is NotFound
// (the root was removed, or is not ours to create), a permission failure
// PermissionDenied, anything else (a cut connection, a full disk, which
// OpenSSH answers with SSH_FX_FAILURE) Unavailable.
func (b *Backend) err(what string, err error) error {
	var st *sftp.StatusError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: sftp sink: %s: no such file or directory (%v)", flightline.ErrNotFound, what, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: sftp sink: %s: %v", flightline.ErrPermissionDenied, what, err)
	case errors.As(err, &st) && st.FxCode() == sftp.ErrSSHFxNoSuchFile:
		return fmt.Errorf("%w: sftp sink: %s: %v", flightline.ErrNotFound, what, err)
	}
	// %w: Redialing looks for sftp.ErrSSHFxConnectionLost in the chain.
	return fmt.Errorf("%w: sftp sink: %s: %w", flightline.ErrUnavailable, what, err)
}

// temp writes data to a hidden temporary file beside p, fsynced on the
// server.
func (b *Backend) temp(p string, data []byte) (string, error) {
	dir := path.Dir(p)
	if err := b.mkdir(dir); err != nil {
		return "", err
	}
	name := path.Join(dir, fmt.Sprintf(".tmp-%016x", rand.Uint64()))
	f, err := b.c.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return "", b.err("create "+name, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync() // fsync@openssh.com
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.c.Remove(name)
		return "", b.err("write "+p, err)
	}
	return name, nil
}

// Put implements objsink.Backend.
func (b *Backend) Put(_ context.Context, key string, data []byte) error {
	p, err := b.path(key)
	if err != nil {
		return err
	}
	tmp, err := b.temp(p, data)
	if err != nil {
		return err
	}
	if _, ok := b.c.HasExtension("posix-rename@openssh.com"); ok {
		err = b.c.PosixRename(tmp, p)
	} else {
		if rerr := b.c.Remove(p); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = rerr
		} else {
			err = b.c.Rename(tmp, p)
		}
	}
	if err != nil {
		b.c.Remove(tmp)
		return b.err("rename to "+p, err)
	}
	return nil
}

// PutIfAbsent implements objsink.Backend.
func (b *Backend) PutIfAbsent(_ context.Context, key string, data []byte) error {
	p, err := b.path(key)
	if err != nil {
		return err
	}
	tmp, err := b.temp(p, data)
	if err != nil {
		return err
	}
	defer b.c.Remove(tmp)
	return b.link(tmp, p)
}

// link makes from also visible at to with hardlink@openssh.com; an
// existing to is objsink.ErrExists. OpenSSH answers both an existing target
// and other failures with SSH_FX_FAILURE, so a failure is checked with a
// stat of to.
func (b *Backend) link(from, to string) error {
	if err := b.mkdir(path.Dir(to)); err != nil {
		return err
	}
	err := b.c.Link(from, to)
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return b.err("link "+to, err)
	}
	if _, serr := b.c.Lstat(to); serr == nil {
		return fmt.Errorf("%s: %w", to, objsink.ErrExists)
	}
	return b.err("link "+to, err)
}

// Publish implements objsink.Backend with hardlink@openssh.com.
func (b *Backend) Publish(_ context.Context, from, to string) error {
	pf, err := b.path(from)
	if err != nil {
		return err
	}
	pt, err := b.path(to)
	if err != nil {
		return err
	}
	return b.link(pf, pt)
}

// Get implements objsink.Backend.
func (b *Backend) Get(_ context.Context, key string) ([]byte, error) {
	p, err := b.path(key)
	if err != nil {
		return nil, err
	}
	f, err := b.c.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("sftp sink: %s: %w", p, fs.ErrNotExist)
	}
	if err != nil {
		return nil, b.err("open "+p, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, b.err("read "+p, err)
	}
	return data, nil
}

// Exists implements objsink.Backend.
func (b *Backend) Exists(_ context.Context, key string) (bool, error) {
	p, err := b.path(key)
	if err != nil {
		return false, err
	}
	_, err = b.c.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, b.err("stat "+p, err)
	}
	return true, nil
}

// List implements objsink.Backend. Hidden temporary files and directories
// are left out.
func (b *Backend) List(_ context.Context, dir string) ([]objsink.Object, error) {
	p, err := b.path(dir)
	if err != nil {
		return nil, err
	}
	fis, err := b.c.ReadDir(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, b.err("list "+p, err)
	}
	out := make([]objsink.Object, 0, len(fis))
	for _, fi := range fis {
		if fi.IsDir() || strings.HasPrefix(fi.Name(), ".") {
			continue
		}
		out = append(out, objsink.Object{Name: fi.Name(), Modified: fi.ModTime()})
	}
	return out, nil
}

// Delete implements objsink.Backend.
func (b *Backend) Delete(_ context.Context, key string) error {
	p, err := b.path(key)
	if err != nil {
		return err
	}
	if err := b.c.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return b.err("remove "+p, err)
	}
	return nil
}

var _ objsink.Backend = (*Backend)(nil)
