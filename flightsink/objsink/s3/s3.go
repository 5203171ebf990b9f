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
// A store that ignores If-None-Match (MinIO before 2024, some gateways
// and older S3-compatible services) would let two writers both win: the
// Backend is an objsink.Prober, and the Sink's first Open creates one probe
// key twice and refuses the store (flightline.ErrFailedPrecondition) when
// the second create succeeds. The S3 servers this is tested on (versitygw,
// and moto 5) honour it, as AWS S3 does since August 2024.
package s3

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/aws/smithy-go"

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

// Config is what an s3 sink (commit=exactly-once) is given in its URL or
// YAML.
type Config struct {
	// Bucket is the bucket. Required.
	Bucket string
	// Prefix is the prefix of every key (default none).
	Prefix string
	// Storage holds objstore's storage options: endpoint, keys, region;
	// missing ones come from the AWS SDK's default chain.
	Storage objstore.Options
	// PartSize is the part size of multipart uploads (default
	// objstore.DefaultPartSize).
	PartSize int
	// MultipartThreshold is the object size above which multipart uploads
	// are used (default objstore.MultipartThreshold).
	MultipartThreshold int
}

// Option configures a Backend beyond its Config. The backend has none
// yet; the type keeps New's shape the same as every other one's.
type Option func(*Backend)

// New returns the Backend of s3://BUCKET/PREFIX. It contacts nothing (it
// loads the SDK configuration, within ctx); it validates the bucket name
// and the multipart sizes. Close releases nothing.
func New(ctx context.Context, cfg Config, opts ...Option) (*Backend, error) {
	bucket, prefix := cfg.Bucket, cfg.Prefix
	if bucket == "" || strings.ContainsAny(bucket, "/?#") {
		return nil, fmt.Errorf("%w: s3: bucket %q", flightline.ErrInvalidInput, bucket)
	}
	if cfg.PartSize < 0 || cfg.MultipartThreshold < 0 {
		return nil, fmt.Errorf("%w: s3: multipart part size %d and threshold %d must be positive", flightline.ErrInvalidInput, cfg.PartSize, cfg.MultipartThreshold)
	}
	prefix = strings.Trim(prefix, "/")
	st, err := objstore.NewS3(ctx, bucket, prefix, cfg.Storage)
	if err != nil {
		return nil, err
	}
	if cfg.PartSize > 0 || cfg.MultipartThreshold > 0 {
		st.SetPartSize(cmp.Or(cfg.PartSize, objstore.DefaultPartSize), cmp.Or(cfg.MultipartThreshold, objstore.MultipartThreshold))
	}
	b := &Backend{st: st, bucket: bucket, prefix: prefix}
	for _, o := range opts {
		o(b)
	}
	return b, nil
}

// Close releases nothing (the SDK's client pools its connections) and
// returns nil.
func (b *Backend) Close() error { return nil }

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

// ProbeDir is the directory, under the Backend's root, of Probe's keys
// (readers skip names starting with '_').
const ProbeDir = "_flightline/probe"

// Probe implements objsink.Prober: it creates a fresh key under ProbeDir
// with If-None-Match: * twice and removes it. The second create must fail
// with 412; a store that lets it succeed (or answers the header with
// NotImplemented) ignores the precondition the commit protocol rests on:
// flightline.ErrFailedPrecondition, naming the s3 kind's
// commit=at-least-once option, which needs no precondition. Other errors
// (credentials, a missing bucket, an unreachable endpoint) are returned as
// they are.
func (b *Backend) Probe(ctx context.Context) error {
	var r [8]byte
	_, _ = rand.Read(r[:])
	key := ProbeDir + "/" + hex.EncodeToString(r[:])
	defer func() { _ = b.st.Delete(context.WithoutCancel(ctx), key) }()
	refuse := func(why string) error {
		return fmt.Errorf("%w: s3 sink: %s: the store %s If-None-Match: * on PutObject, which the exactly-once commit needs "+
			"(a second create-if-absent must fail); use a store that honours it (AWS S3, MinIO since August 2024, versitygw), "+
			"or run the sink at-least-once with the option commit=at-least-once",
			flightline.ErrFailedPrecondition, b.URL(), why)
	}
	err := b.st.PutIfAbsent(ctx, key, []byte("1"))
	if notImplemented(err) {
		return refuse("does not implement")
	}
	if err != nil {
		return conv(err)
	}
	err = b.st.PutIfAbsent(ctx, key, []byte("2"))
	switch {
	case err == nil:
		return refuse("ignores")
	case errors.Is(err, objstore.ErrExists):
		return nil
	case notImplemented(err):
		return refuse("does not implement")
	}
	return conv(err)
}

// notImplemented says whether err is S3's answer to a header it does not
// implement.
func notImplemented(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "NotImplemented"
}
