package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// ObjectInfo is a listed object: its key and when it was last written.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// InfoLister is the optional ability of a Store to list keys with their
// modification times (what a cleanup needs to tell an old unreferenced
// file from one a writer is about to commit). Local, S3 and Sub views of
// them implement it.
type InfoLister interface {
	// ListInfo is List with each key's size and modification time.
	ListInfo(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error)
}

// ListInfo lists s's keys under prefix with their modification times.
// ok is false when s cannot tell them (it does not implement InfoLister).
func ListInfo(ctx context.Context, s Store, prefix, startAfter string) (infos []ObjectInfo, ok bool, err error) {
	il, ok := s.(InfoLister)
	if !ok {
		return nil, false, nil
	}
	infos, err = il.ListInfo(ctx, prefix, startAfter)
	return infos, true, err
}

func (l *Local) ListInfo(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	keys, err := l.List(ctx, prefix, startAfter)
	if err != nil {
		return nil, err
	}
	out := make([]ObjectInfo, 0, len(keys))
	for _, k := range keys {
		p, err := l.path(k)
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted since it was listed
		}
		if err != nil {
			return nil, fmt.Errorf("objstore: stat %s: %w", filepath.ToSlash(p), err)
		}
		out = append(out, ObjectInfo{Key: k, Size: st.Size(), ModTime: st.ModTime()})
	}
	return out, nil
}

func (s *S3) ListInfo(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	err := s.walkInfo(ctx, prefix, startAfter, func(in ObjectInfo) error {
		out = append(out, in)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (p *sub) ListInfo(ctx context.Context, prefix, startAfter string) ([]ObjectInfo, error) {
	il, ok := p.s.(InfoLister)
	if !ok {
		return nil, fmt.Errorf("objstore: %s cannot list modification times", p.URL())
	}
	if startAfter != "" {
		startAfter = p.k(startAfter)
	}
	infos, err := il.ListInfo(ctx, p.k(prefix), startAfter)
	for i := range infos {
		infos[i].Key = strings.TrimPrefix(infos[i].Key, p.prefix+"/")
	}
	return infos, err
}

// InfoWalker is the optional ability of a Store to visit its keys with
// their sizes and modification times as it lists them, holding a page of
// them at a time, not the whole listing (a cleanup of a table of a
// million files). Local, S3 and Sub views of them implement it.
type InfoWalker interface {
	// WalkInfo calls fn with each key under prefix, in no particular
	// order; an error from fn stops the walk and is returned.
	WalkInfo(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
}

// WalkInfo visits s's keys under prefix with their modification times:
// s's own WalkInfo, else its ListInfo's slice. ok is false when s cannot
// tell modification times.
func WalkInfo(ctx context.Context, s Store, prefix string, fn func(ObjectInfo) error) (ok bool, err error) {
	if w, ok := s.(InfoWalker); ok {
		return true, w.WalkInfo(ctx, prefix, fn)
	}
	infos, ok, err := ListInfo(ctx, s, prefix, "")
	if !ok || err != nil {
		return ok, err
	}
	for _, in := range infos {
		if err := fn(in); err != nil {
			return true, err
		}
	}
	return true, nil
}

// walkChunk is how many directory entries Local.WalkInfo reads at once.
const walkChunk = 1024

func (l *Local) WalkInfo(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	return l.walk(ctx, prefix, func(k, p string, e fs.DirEntry) error {
		st, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted since it was listed
		}
		if err != nil {
			return fmt.Errorf("objstore: stat %s: %w", filepath.ToSlash(p), err)
		}
		return fn(ObjectInfo{Key: k, Size: st.Size(), ModTime: st.ModTime()})
	})
}

// walk calls fn with each file under prefix (key, path and entry; not
// dot files), in no particular order, reading directories walkChunk
// entries at a time.
func (l *Local) walk(ctx context.Context, prefix string, fn func(key, path string, e fs.DirEntry) error) error {
	dir := l.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 && prefix[:i] != "" {
		d, err := l.path(prefix[:i])
		if err != nil {
			return err
		}
		dir = d
	}
	return l.walkDir(ctx, dir, prefix, fn)
}

// walkDir visits dir's files and then its directories.
func (l *Local) walkDir(ctx context.Context, dir, prefix string, fn func(key, path string, e fs.DirEntry) error) error {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("objstore: list %s: %w", dir, err)
	}
	defer f.Close()
	var subdirs []string
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		ents, err := f.ReadDir(walkChunk)
		for _, e := range ents {
			p := filepath.Join(dir, e.Name())
			if e.IsDir() {
				subdirs = append(subdirs, p)
				continue
			}
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			rel, _ := filepath.Rel(l.root, p)
			if k := filepath.ToSlash(rel); strings.HasPrefix(k, prefix) {
				if err := fn(k, p, e); err != nil {
					return err
				}
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(ents) == 0) {
			break
		}
		if err != nil {
			return fmt.Errorf("objstore: list %s: %w", dir, err)
		}
	}
	for _, d := range subdirs {
		if err := l.walkDir(ctx, d, prefix, fn); err != nil {
			return err
		}
	}
	return nil
}

func (s *S3) WalkInfo(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	return s.walkInfo(ctx, prefix, "", fn)
}

// walkInfo lists the keys under prefix after startAfter a page at a time.
func (s *S3) walkInfo(ctx context.Context, prefix, startAfter string, fn func(ObjectInfo) error) error {
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.key(prefix))}
	if strings.HasSuffix(prefix, "/") {
		*in.Prefix += "/"
	}
	if startAfter != "" {
		in.StartAfter = aws.String(s.key(startAfter))
	}
	p := s3.NewListObjectsV2Paginator(s.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return s.wrap(err, "list", prefix)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if s.prefix != "" {
				k = strings.TrimPrefix(k, s.prefix+"/")
			}
			if err := fn(ObjectInfo{Key: k, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *sub) WalkInfo(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	ok, err := WalkInfo(ctx, p.s, p.k(prefix), func(in ObjectInfo) error {
		in.Key = strings.TrimPrefix(in.Key, p.prefix+"/")
		return fn(in)
	})
	if err == nil && !ok {
		return fmt.Errorf("objstore: %s cannot list modification times", p.URL())
	}
	return err
}
