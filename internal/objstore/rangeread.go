package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
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

// s3Block is how much an S3 object's reader fetches at once: a Parquet
// reader reads a column chunk at a time, and a checkpoint's row groups of
// a few hundred KiB would cost a request per column each; an object of at
// most a block (most checkpoints) costs one request in all.
var s3Block int64 = 8 << 20

// Open fetches the object's first block, which tells its size (a ranged
// GET's Content-Range); later reads fetch a block at the offset asked (at
// least what is asked), and the reader keeps the last two blocks. Every
// fetch after the first names the version read first (If-Match on its
// ETag): an object replaced meanwhile fails the read rather than mixing
// two versions.
func (s *S3) Open(ctx context.Context, key string) (Object, error) {
	o := &s3Object{s: s, ctx: ctx, key: key}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(key)),
		Range: aws.String(fmt.Sprintf("bytes=0-%d", s3Block-1))})
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "InvalidRange" {
			// An empty object has no byte 0.
			return bytesObject{bytes.NewReader(nil)}, nil
		}
		return nil, s.wrap(err, "get", key)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, s.wrap(err, "get", key)
	}
	o.size = int64(len(b))
	if cr := aws.ToString(out.ContentRange); cr != "" {
		// bytes FIRST-LAST/TOTAL
		if i := strings.LastIndexByte(cr, '/'); i >= 0 {
			if n, err := strconv.ParseInt(cr[i+1:], 10, 64); err == nil {
				o.size = n
			}
		}
	}
	if o.size == int64(len(b)) {
		return bytesObject{bytes.NewReader(b)}, nil
	}
	o.etag = out.ETag
	o.blocks[0] = s3Chunk{off: 0, b: b}
	return o, nil
}

type s3Chunk struct {
	off int64
	b   []byte
}

type s3Object struct {
	s    *S3
	ctx  context.Context
	key  string
	size int64
	etag *string

	mu     sync.Mutex
	blocks [2]s3Chunk // blocks[0] the most recently used
}

func (o *s3Object) Size() int64  { return o.size }
func (o *s3Object) Close() error { return nil }

func (o *s3Object) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("objstore: read %s at %d: negative offset", o.key, off)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for n < len(p) && off+int64(n) < o.size {
		at := off + int64(n)
		c, err := o.chunk(at, int64(len(p)-n))
		if err != nil {
			return n, err
		}
		n += copy(p[n:], c.b[at-c.off:])
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// chunk returns a cached block holding byte at, else fetches one from at
// of max(s3Block, want) bytes (at most to the end); mu held.
func (o *s3Object) chunk(at, want int64) (s3Chunk, error) {
	for i, c := range o.blocks {
		if c.b != nil && at >= c.off && at < c.off+int64(len(c.b)) {
			o.blocks[0], o.blocks[i] = c, o.blocks[0]
			return c, nil
		}
	}
	end := min(at+max(s3Block, want), o.size)
	out, err := o.s.client.GetObject(o.ctx, &s3.GetObjectInput{Bucket: &o.s.bucket, Key: aws.String(o.s.key(o.key)),
		Range: aws.String(fmt.Sprintf("bytes=%d-%d", at, end-1)), IfMatch: o.etag})
	if err != nil {
		return s3Chunk{}, o.s.wrap(err, "get", o.key)
	}
	defer out.Body.Close()
	b := make([]byte, end-at)
	if _, err := io.ReadFull(out.Body, b); err != nil {
		return s3Chunk{}, o.s.wrap(err, "get", o.key)
	}
	c := s3Chunk{off: at, b: b}
	o.blocks[1], o.blocks[0] = o.blocks[0], c
	return c, nil
}

func (p *sub) Open(ctx context.Context, key string) (Object, error) {
	return OpenObject(ctx, p.s, p.k(key))
}

func (p *sub) Create(ctx context.Context, key string) (Writer, error) {
	return NewWriter(ctx, p.s, p.k(key))
}

// SetS3ReadBlock makes S3 readers opened from now on fetch blocks of n
// bytes instead of 8 MiB and returns a function restoring the previous
// size. For tests: objects of many blocks without megabytes of data.
func SetS3ReadBlock(n int64) (restore func()) {
	old := s3Block
	s3Block = n
	return func() { s3Block = old }
}
