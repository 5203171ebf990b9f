package objstore

import (
	"context"
	"errors"
	"fmt"
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
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.key(prefix))}
	if strings.HasSuffix(prefix, "/") {
		*in.Prefix += "/"
	}
	if startAfter != "" {
		in.StartAfter = aws.String(s.key(startAfter))
	}
	var out []ObjectInfo
	p := s3.NewListObjectsV2Paginator(s.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap(err, "list", prefix)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if s.prefix != "" {
				k = strings.TrimPrefix(k, s.prefix+"/")
			}
			out = append(out, ObjectInfo{Key: k, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
		}
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
