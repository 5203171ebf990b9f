package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Object is an object opened for reads at offsets: a reader of a large
// object (a Delta checkpoint of a million files, read a row group at a
// time) then holds what it reads, not the object. ReadAt follows
// io.ReaderAt; Size is the object's size when it was opened. Close
// releases it. Safe for concurrent ReadAt calls.
type Object interface {
	io.ReaderAt
	Size() int64
	Close() error
}

// Opener is a Store that can read an object in ranges. Stores that cannot
// (wrappers, test doubles) need not implement it; OpenObject falls back
// to Get.
type Opener interface {
	// Open returns the object at key, or an error wrapping ErrNotExist.
	Open(ctx context.Context, key string) (Object, error)
}

// OpenObject opens key on s for ranged reads: s's own Open if s is an
// Opener, else the whole object read by Get (held in memory).
func OpenObject(ctx context.Context, s Store, key string) (Object, error) {
	if o, ok := s.(Opener); ok {
		return o.Open(ctx, key)
	}
	b, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	return bytesObject{bytes.NewReader(b)}, nil
}

type bytesObject struct{ *bytes.Reader }

func (bytesObject) Close() error { return nil }

func (l *Local) Open(_ context.Context, key string) (Object, error) {
	p, err := l.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", p, ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return localObject{f, st.Size()}, nil
}

type localObject struct {
	*os.File
	size int64
}

func (o localObject) Size() int64 { return o.size }

// Open heads the object for its size; each ReadAt is then one ranged
// GetObject of the version headed (an object replaced meanwhile fails
// the read rather than mixing two versions).
func (s *S3) Open(ctx context.Context, key string) (Object, error) {
	h, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(key))})
	if err != nil {
		return nil, s.wrap(err, "head", key)
	}
	return &s3Object{s: s, ctx: ctx, key: key, size: aws.ToInt64(h.ContentLength), etag: h.ETag}, nil
}

type s3Object struct {
	s    *S3
	ctx  context.Context
	key  string
	size int64
	etag *string
}

func (o *s3Object) Size() int64  { return o.size }
func (o *s3Object) Close() error { return nil }

func (o *s3Object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("objstore: read %s at %d: negative offset", o.key, off)
	}
	if off >= o.size {
		return 0, io.EOF
	}
	n := min(int64(len(p)), o.size-off)
	if n == 0 {
		return 0, nil
	}
	out, err := o.s.client.GetObject(o.ctx, &s3.GetObjectInput{Bucket: &o.s.bucket, Key: aws.String(o.s.key(o.key)),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+n-1)), IfMatch: o.etag})
	if err != nil {
		return 0, o.s.wrap(err, "get", o.key)
	}
	defer out.Body.Close()
	got, err := io.ReadFull(out.Body, p[:n])
	if err != nil {
		return got, o.s.wrap(err, "get", o.key)
	}
	if int64(got) < int64(len(p)) {
		return got, io.EOF
	}
	return got, nil
}

func (p *sub) Open(ctx context.Context, key string) (Object, error) {
	return OpenObject(ctx, p.s, p.k(key))
}

func (p *sub) Create(ctx context.Context, key string) (Writer, error) {
	return NewWriter(ctx, p.s, p.k(key))
}
