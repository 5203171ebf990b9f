package objstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Writer streams one object to a store without holding it in memory. Write
// appends to the object; nothing is visible at its key until Commit, which
// publishes the whole object as Put does (replacing any object there).
// Abort discards what was written; it is safe after Commit (it then does
// nothing) and may be called more than once, so `defer w.Abort()` is the
// pattern. A Writer is not safe for concurrent use.
type Writer interface {
	Write(p []byte) (int, error)
	// Commit publishes the object. After an error nothing may be visible
	// (or, as with Put, a store may not know); the writer is done either
	// way.
	Commit(ctx context.Context) error
	// Abort discards the object.
	Abort()
}

// Creator is a Store that can stream an object of unknown size: a writer
// of a large object (a compacted data file) then holds at most a part of
// it in memory. Stores that cannot (wrappers, test doubles) need not
// implement it; NewWriter falls back to buffering.
type Creator interface {
	Create(ctx context.Context, key string) (Writer, error)
}

// NewWriter returns a Writer of key on s: s's own streaming writer if s is
// a Creator, else one that buffers the object and Puts it at Commit.
func NewWriter(ctx context.Context, s Store, key string) (Writer, error) {
	if c, ok := s.(Creator); ok {
		return c.Create(ctx, key)
	}
	return &bufWriter{s: s, key: key}, nil
}

// bufWriter buffers the object and Puts it at Commit.
type bufWriter struct {
	s    Store
	key  string
	buf  bytes.Buffer
	done bool
}

func (w *bufWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errWriterDone
	}
	return w.buf.Write(p)
}

func (w *bufWriter) Commit(ctx context.Context) error {
	if w.done {
		return errWriterDone
	}
	w.done = true
	err := w.s.Put(ctx, w.key, w.buf.Bytes())
	w.buf = bytes.Buffer{}
	return err
}

func (w *bufWriter) Abort() { w.done, w.buf = true, bytes.Buffer{} }

var errWriterDone = errors.New("objstore: writer already committed or aborted")

// Create streams key to a temporary file beside it, renamed into place at
// Commit (as Put).
func (l *Local) Create(_ context.Context, key string) (Writer, error) {
	p, err := l.path(key)
	if err != nil {
		return nil, err
	}
	tmp, err := l.temp(p, nil)
	if err != nil {
		return nil, putErr(p, err)
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		os.Remove(tmp)
		return nil, putErr(p, err)
	}
	return &localWriter{f: f, tmp: tmp, path: p}, nil
}

type localWriter struct {
	f         *os.File
	tmp, path string
	done      bool
}

func (w *localWriter) Write(p []byte) (int, error) {
	if w.done {
		return 0, errWriterDone
	}
	n, err := w.f.Write(p)
	if err != nil {
		return n, putErr(w.path, err)
	}
	return n, nil
}

func (w *localWriter) Commit(context.Context) error {
	if w.done {
		return errWriterDone
	}
	w.done = true
	if err := w.f.Close(); err != nil {
		os.Remove(w.tmp)
		return putErr(w.path, err)
	}
	if err := os.Rename(w.tmp, w.path); err != nil {
		os.Remove(w.tmp)
		return putErr(w.path, err)
	}
	return nil
}

func (w *localWriter) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.f.Close()
	os.Remove(w.tmp)
}

// Create streams key in parts of the store's part size: one PutObject at
// Commit if the object is smaller than a part, else a multipart upload
// whose parts go up as they fill (at most one part in memory) and which
// Commit completes and Abort aborts (no part is ever visible).
func (s *S3) Create(_ context.Context, key string) (Writer, error) {
	return &s3Writer{s: s, key: key, buf: make([]byte, 0, min(s.partSize, 1<<20))}, nil
}

type s3Writer struct {
	s     *S3
	key   string
	buf   []byte
	id    *string // the multipart upload, once a part was sent
	parts []types.CompletedPart
	err   error
	done  bool
}

func (w *s3Writer) Write(p []byte) (int, error) {
	if w.done {
		return 0, errWriterDone
	}
	if w.err != nil {
		return 0, w.err
	}
	n := len(p)
	for len(p) > 0 {
		room := w.s.partSize - len(w.buf)
		take := min(room, len(p))
		w.buf = append(w.buf, p[:take]...)
		p = p[take:]
		if len(w.buf) == w.s.partSize {
			if err := w.flush(context.Background()); err != nil {
				w.err = err
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// flush uploads the buffered part. Write has no context: a part upload is
// bounded by the client's own timeouts; Commit and Abort take the caller's.
func (w *s3Writer) flush(ctx context.Context) error {
	k := aws.String(w.s.key(w.key))
	if w.id == nil {
		up, err := w.s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &w.s.bucket, Key: k})
		if err != nil {
			return w.s.wrap(err, "multipart create", w.key)
		}
		w.id = up.UploadId
	}
	n := int32(len(w.parts) + 1)
	p, err := w.s.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &w.s.bucket, Key: k, UploadId: w.id,
		PartNumber: aws.Int32(n), Body: bytes.NewReader(w.buf), ContentLength: aws.Int64(int64(len(w.buf)))})
	if err != nil {
		return w.s.wrap(err, "multipart upload part", w.key)
	}
	w.parts = append(w.parts, types.CompletedPart{ETag: p.ETag, PartNumber: aws.Int32(n)})
	w.buf = w.buf[:0]
	return nil
}

func (w *s3Writer) Commit(ctx context.Context) error {
	if w.done {
		return errWriterDone
	}
	if w.err != nil {
		w.Abort()
		return w.err
	}
	if w.id == nil { // smaller than a part: one PutObject
		w.done = true
		err := w.s.Put(ctx, w.key, w.buf)
		w.buf = nil
		return err
	}
	if len(w.buf) > 0 {
		if err := w.flush(ctx); err != nil {
			w.Abort()
			return err
		}
	}
	w.done = true
	_, err := w.s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &w.s.bucket,
		Key: aws.String(w.s.key(w.key)), UploadId: w.id, MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts}})
	if err != nil {
		w.abortUpload()
		return w.s.wrap(err, "multipart complete", w.key)
	}
	w.buf = nil
	return nil
}

func (w *s3Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.abortUpload()
}

func (w *s3Writer) abortUpload() {
	w.buf = nil
	if w.id != nil { // never leave parts behind
		_, _ = w.s.client.AbortMultipartUpload(context.Background(), &s3.AbortMultipartUploadInput{Bucket: &w.s.bucket,
			Key: aws.String(w.s.key(w.key)), UploadId: w.id})
	}
}

var (
	_ Creator = (*Local)(nil)
	_ Creator = (*S3)(nil)
)

// Counting counts the bytes written through it to W: the size of an
// object as it streams to a Writer.
type Counting struct {
	W io.Writer
	N int64
}

func (c *Counting) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.N += int64(n)
	return n, err
}
