package objstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/flightline/flightline"
)

// Local is a Store on a local file system. Put writes a temporary file and
// renames it into place; PutIfAbsent writes a temporary file and hard-links
// it to the key (link fails if the key exists), falling back to O_EXCL
// where hard links are not supported. Files are not fsynced: a process
// crash loses nothing, a power loss may (as with delta-rs on local disk).
type Local struct{ root string }

// NewLocal returns a Local store rooted at dir, creating it if missing.
func NewLocal(dir string) (*Local, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", flightline.ErrInvalidInput, dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("objstore: create %s: %w", abs, err)
	}
	return &Local{root: abs}, nil
}

// newLocalNoCreate is NewLocal for readers: a missing dir is left missing
// (it reads as empty) rather than created.
func newLocalNoCreate(dir string) (*Local, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", flightline.ErrInvalidInput, dir, err)
	}
	return &Local{root: abs}, nil
}

func (l *Local) URL() string { return l.root }

func (l *Local) path(key string) (string, error) {
	if key == "" || strings.Contains(key, "..") || strings.HasPrefix(key, "/") {
		return "", fmt.Errorf("%w: bad object key %q", flightline.ErrInvalidInput, key)
	}
	return filepath.Join(l.root, filepath.FromSlash(key)), nil
}

func (l *Local) Get(_ context.Context, key string) ([]byte, error) {
	p, err := l.path(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", p, ErrNotExist)
	}
	return b, err
}

func (l *Local) temp(p string, data []byte) (string, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+"."+hex.EncodeToString(rnd[:])+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// putErr is a failed write of p. A full file system or an exhausted quota
// is flightline.ErrUnavailable: a condition of the destination that an
// operator clears, after which a retry from the checkpoint succeeds
// (gRPC UNAVAILABLE; RESOURCE_EXHAUSTED is kept for messages over the
// size limit, see docs/protocol.md). Nothing partial is visible: the data
// went to a temporary file first.
func putErr(p string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("objstore: put %s: %w: %w", p, flightline.ErrUnavailable, err)
	}
	return fmt.Errorf("objstore: put %s: %w", p, err)
}

func (l *Local) Put(_ context.Context, key string, data []byte) error {
	p, err := l.path(key)
	if err != nil {
		return err
	}
	tmp, err := l.temp(p, data)
	if err != nil {
		return putErr(p, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return putErr(p, err)
	}
	return nil
}

func (l *Local) PutIfAbsent(_ context.Context, key string, data []byte) error {
	p, err := l.path(key)
	if err != nil {
		return err
	}
	tmp, err := l.temp(p, data)
	if err != nil {
		return putErr(p, err)
	}
	defer os.Remove(tmp)
	err = os.Link(tmp, p)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%s: %w", p, ErrExists)
	}
	// No hard links (some FUSE and SMB mounts): O_EXCL create. A reader
	// may then briefly see a partial file; Delta readers retry on parse
	// errors of the newest entry.
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: %w", p, ErrExists)
	}
	if err != nil {
		return putErr(p, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return putErr(p, err)
	}
	return f.Close()
}

func (l *Local) List(ctx context.Context, prefix, startAfter string) ([]string, error) {
	var out []string
	err := l.walk(ctx, prefix, func(k, _ string, _ fs.DirEntry) error {
		if k > startAfter {
			out = append(out, k)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

func (l *Local) Delete(_ context.Context, key string) error {
	p, err := l.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
