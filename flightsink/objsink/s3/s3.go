// Package s3 is the objsink Backend of an S3 bucket (AWS S3 or a
// compatible server such as versitygw): create-if-absent is PutObject (or
// CompleteMultipartUpload) with If-None-Match: * (412 on an existing
// object), publication a server-side CopyObject. It is internal/objstore's
// S3 store, the one the Delta and Iceberg sinks write through.
//
// S3's CopyObject takes no If-None-Match, so Publish overwrites an object
// already at its target; objsink.Backend allows that: the protocol
// publishes a name only from the staged data its commit record names, so
// the object there holds the same bytes.
//
// A store that ignores If-None-Match (an old MinIO, some gateways) would
// let two writers both win; New does not probe for it. The S3 servers
// this is tested on (versitygw, and moto 5) honour it.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/internal/objstore"
)

// Backend is an S3 bucket and prefix as an objsink.Backend.
type Backend struct {
	st     *objstore.S3
	bucket string
	prefix string
}

// New returns the Backend of s3://bucket/prefix configured by opts
// (objstore's storage options: endpoint, keys, region; missing ones come
// from the AWS SDK's default chain).
func New(ctx context.Context, bucket, prefix string, opts objstore.Options) (*Backend, error) {
	if bucket == "" || strings.ContainsAny(bucket, "/?#") {
		return nil, fmt.Errorf("%w: s3: bucket %q", flightline.ErrInvalidInput, bucket)
	}
	prefix = strings.Trim(prefix, "/")
	st, err := objstore.NewS3(ctx, bucket, prefix, opts)
	if err != nil {
		return nil, err
	}
	return &Backend{st: st, bucket: bucket, prefix: prefix}, nil
}

// Store is the underlying objstore store (for a check of the bucket with
// HeadBucket).
func (b *Backend) Store() *objstore.S3 { return b.st }

// URL is s3://bucket/prefix.
func (b *Backend) URL() string { return b.st.URL() }

// conv maps objstore's sentinels onto objsink's: an existing object is
// objsink.ErrExists, a missing one fs.ErrNotExist (still
// flightline.ErrNotFound).
func conv(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, objstore.ErrExists):
		return fmt.Errorf("s3: %w: %w", err, objsink.ErrExists)
	case errors.Is(err, objstore.ErrNotExist):
		return fmt.Errorf("s3: %w: %w", err, fs.ErrNotExist)
	}
	return err
}

// Put implements objsink.Backend: one PutObject (a multipart upload above
// objstore's threshold), visible whole or not at all.
func (b *Backend) Put(ctx context.Context, key string, data []byte) error {
	return conv(b.st.Put(ctx, key, data))
}

// PutIfAbsent implements objsink.Backend with If-None-Match: *.
func (b *Backend) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return conv(b.st.PutIfAbsent(ctx, key, data))
}

// Publish implements objsink.Backend with a server-side CopyObject.
func (b *Backend) Publish(ctx context.Context, from, to string) error {
	return conv(b.st.Copy(ctx, from, to))
}

// Get implements objsink.Backend.
func (b *Backend) Get(ctx context.Context, key string) ([]byte, error) {
	data, err := b.st.Get(ctx, key)
	return data, conv(err)
}

// Exists implements objsink.Backend.
func (b *Backend) Exists(ctx context.Context, key string) (bool, error) {
	ok, err := b.st.Exists(ctx, key)
	return ok, conv(err)
}

// List implements objsink.Backend: the objects directly under dir.
func (b *Backend) List(ctx context.Context, dir string) ([]objsink.Object, error) {
	infos, err := b.st.ListDir(ctx, dir)
	if err != nil {
		return nil, conv(err)
	}
	out := make([]objsink.Object, len(infos))
	for i, o := range infos {
		out[i] = objsink.Object{Name: o.Key, Modified: o.ModTime}
	}
	return out, nil
}

// Delete implements objsink.Backend.
func (b *Backend) Delete(ctx context.Context, key string) error {
	return conv(b.st.Delete(ctx, key))
}
