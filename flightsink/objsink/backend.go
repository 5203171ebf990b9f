package objsink

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/flightline/flightline"
)

// ErrExists is returned by Backend.PutIfAbsent and Backend.Publish when the
// key exists.
var ErrExists = errors.New("objsink: object already exists")

// Backend is a store with create-if-absent. Keys are slash-separated and
// relative to the sink's root. Implementations are safe for concurrent use
// and return errors wrapping flightline.ErrUnavailable for conditions an
// operator or a retry clears (an unreachable store, a full disk).
type Backend interface {
	// Put writes data at key, durably, replacing any object there.
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent writes data at key durably only if nothing is there; of
	// racing writers exactly one succeeds, the others get ErrExists.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// Publish makes the object at from also visible at to, durably; from
	// stays. The protocol publishes a name only from the staged data its
	// commit record names, so an object already at to holds the same
	// bytes: a backend refuses it with ErrExists where the store can
	// (link, a conditional copy) and may overwrite it where the store
	// ignores the condition (fake-gcs-server's copyTo does).
	Publish(ctx context.Context, from, to string) error
	// Get returns the object at key; a missing key is an error wrapping
	// fs.ErrNotExist.
	Get(ctx context.Context, key string) ([]byte, error)
	// Exists says whether an object is at key.
	Exists(ctx context.Context, key string) (bool, error)
	// List returns the names (not keys) of the objects directly under the
	// directory dir, with their modification times, in any order; a
	// missing dir is empty.
	List(ctx context.Context, dir string) ([]Object, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// Prober is a Backend that can check that its store honours the
// create-if-absent precondition; a store that ignores it (an S3-compatible
// server that overwrites on PutObject with If-None-Match: *) would let two
// writers both commit the same sequence number. Sink.Open calls Probe
// before its first commit and refuses to open with its error (wrapping
// flightline.ErrFailedPrecondition when the store ignores the condition)
// until a probe succeeds; one success per Sink is enough.
type Prober interface {
	Probe(ctx context.Context) error
}

// Object is one entry of Backend.List.
type Object struct {
	Name     string
	Modified time.Time
}

// Local is the Backend of a local directory: temporary file, fsync, then
// rename (Put) or link(2) (PutIfAbsent, Publish), and an fsync of the
// directory the name went into.
type Local struct{ root string }

// NewLocal returns the Backend of dir, creating it if missing.
func NewLocal(dir string) (*Local, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: file sink: %q: %v", flightline.ErrInvalidInput, dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, ioErr("create "+abs, err)
	}
	return &Local{root: abs}, nil
}

// Root is the directory.
func (l *Local) Root() string { return l.root }

func (l *Local) path(key string) (string, error) {
	if key == "" || strings.Contains(key, "..") || strings.HasPrefix(key, "/") {
		return "", fmt.Errorf("%w: file sink: bad key %q", flightline.ErrInvalidInput, key)
	}
	return filepath.Join(l.root, filepath.FromSlash(key)), nil
}

// ioErr classifies a local I/O error: a full disk or quota, a missing or
// unwritable directory are conditions an operator clears
// (flightline.ErrUnavailable), said in plain words.
func ioErr(what string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%w: file sink: %s: the file system is full (%w); free space, then the pipeline resumes from its checkpoint", flightline.ErrUnavailable, what, err)
	case errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%w: file sink: %s: disk quota exceeded (%v)", flightline.ErrUnavailable, what, err)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: file sink: %s: %v", flightline.ErrPermissionDenied, what, err)
	}
	return fmt.Errorf("%w: file sink: %s: %v", flightline.ErrUnavailable, what, err)
}

// temp writes data to a hidden temporary file beside p, fsynced.
func (l *Local) temp(p string, data []byte) (string, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", ioErr("create "+filepath.Dir(p), err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-")
	if err != nil {
		return "", ioErr("create a temporary file in "+filepath.Dir(p), err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", ioErr("write "+p, err)
	}
	return f.Name(), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return ioErr("open "+dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return ioErr("fsync "+dir, err)
	}
	return nil
}

// Put implements Backend.
func (l *Local) Put(_ context.Context, key string, data []byte) error {
	p, err := l.path(key)
	if err != nil {
		return err
	}
	tmp, err := l.temp(p, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return ioErr("rename to "+p, err)
	}
	return syncDir(filepath.Dir(p))
}

// PutIfAbsent implements Backend.
func (l *Local) PutIfAbsent(_ context.Context, key string, data []byte) error {
	p, err := l.path(key)
	if err != nil {
		return err
	}
	tmp, err := l.temp(p, data)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	return l.link(tmp, p)
}

func (l *Local) link(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return ioErr("create "+filepath.Dir(to), err)
	}
	err := os.Link(from, to)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: %w", to, ErrExists)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file sink: link %s: %w", to, err)
	}
	if err != nil {
		return ioErr("link "+to, err)
	}
	return syncDir(filepath.Dir(to))
}

// Publish implements Backend with link(2).
func (l *Local) Publish(_ context.Context, from, to string) error {
	pf, err := l.path(from)
	if err != nil {
		return err
	}
	pt, err := l.path(to)
	if err != nil {
		return err
	}
	return l.link(pf, pt)
}

// Get implements Backend.
func (l *Local) Get(_ context.Context, key string) ([]byte, error) {
	p, err := l.path(key)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("file sink: %s: %w", p, fs.ErrNotExist)
	}
	if err != nil {
		return nil, ioErr("read "+p, err)
	}
	return b, nil
}

// Exists implements Backend.
func (l *Local) Exists(_ context.Context, key string) (bool, error) {
	p, err := l.path(key)
	if err != nil {
		return false, err
	}
	_, err = os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, ioErr("stat "+p, err)
	}
	return true, nil
}

// List implements Backend. Hidden temporary files are left out.
func (l *Local) List(_ context.Context, dir string) ([]Object, error) {
	p, err := l.path(dir)
	if err != nil {
		return nil, err
	}
	des, err := os.ReadDir(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, ioErr("list "+p, err)
	}
	out := make([]Object, 0, len(des))
	for _, de := range des {
		if de.IsDir() || strings.HasPrefix(de.Name(), ".") {
			continue
		}
		o := Object{Name: de.Name()}
		if fi, err := de.Info(); err == nil {
			o.Modified = fi.ModTime()
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete implements Backend.
func (l *Local) Delete(_ context.Context, key string) error {
	p, err := l.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ioErr("remove "+p, err)
	}
	return nil
}

// removeStaleTemps removes hidden temporary files older than age in the
// directory of key (a crashed Put leaves one).
func (l *Local) removeStaleTemps(dir string, age time.Duration) {
	p, err := l.path(dir)
	if err != nil {
		return
	}
	des, _ := os.ReadDir(p)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".tmp-") {
			if fi, err := de.Info(); err == nil && time.Since(fi.ModTime()) > age {
				_ = os.Remove(filepath.Join(p, de.Name()))
			}
		}
	}
}
