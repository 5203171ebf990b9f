// Package objstore is the small object-store abstraction the Delta Lake and
// S3 sinks share: local directories and S3 (and S3-compatible servers), with
// an atomic put-if-absent for commit files and whole-object puts that never
// leave a partial object visible.
//
// Keys are slash-separated paths relative to the store's root (a directory
// or s3://bucket/prefix). Objects are small enough to be held in memory:
// Parquet files of one batch, Delta log entries and checkpoints.
//
// Pitfalls:
//   - PutIfAbsent is the only operation that may be used for files whose
//     uniqueness is a correctness property (Delta commits). Put overwrites.
//   - On S3, an error from PutIfAbsent that is neither ErrExists nor a clear
//     refusal leaves the outcome unknown: the object may have been written.
//     Callers read the key back to find out.
//   - Heavy SDK imports (AWS) live here, never in packages the core imports.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/flightline/flightline"
)

// ErrExists is returned by PutIfAbsent when the key already exists.
var ErrExists = errors.New("objstore: object already exists")

// ErrNotExist is returned by Get for a missing key. It wraps
// flightline.ErrNotFound.
var ErrNotExist = fmt.Errorf("objstore: no such object: %w", flightline.ErrNotFound)

// Store is an object store rooted at a directory or bucket prefix. It is
// safe for concurrent use.
type Store interface {
	// Get returns the whole object at key, or an error wrapping ErrNotExist.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put writes data at key, replacing any object there. Readers see the
	// old object or the whole new one, never a part.
	Put(ctx context.Context, key string, data []byte) error
	// PutIfAbsent writes data at key only if nothing is there, atomically:
	// of several racing writers exactly one succeeds and the others get
	// ErrExists.
	PutIfAbsent(ctx context.Context, key string, data []byte) error
	// List returns the keys under prefix (a "directory" ending in '/', or
	// any key prefix) that sort after startAfter, in byte order.
	List(ctx context.Context, prefix, startAfter string) ([]string, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// URL is the root of the store, e.g. /data/t or s3://bucket/prefix.
	URL() string
}

// Storage option keys, as the delta-rs / object_store ecosystem names them.
const (
	AccessKeyID     = "AWS_ACCESS_KEY_ID"
	SecretAccessKey = "AWS_SECRET_ACCESS_KEY"
	SessionToken    = "AWS_SESSION_TOKEN"
	Region          = "AWS_REGION"
	EndpointURL     = "AWS_ENDPOINT_URL"
	AllowHTTP       = "AWS_ALLOW_HTTP"
)

// Options are storage options: the AWS_* keys above. Unknown keys are an
// error in Open.
type Options map[string]string

var knownOptions = map[string]bool{AccessKeyID: true, SecretAccessKey: true, SessionToken: true,
	Region: true, EndpointURL: true, AllowHTTP: true}

// IsOption reports whether k is a storage option key Open accepts.
func IsOption(k string) bool { return knownOptions[k] }

// OptionKeys lists the accepted storage option keys.
func OptionKeys() []string {
	ks := make([]string, 0, len(knownOptions))
	for k := range knownOptions {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Open returns the store for uri: a local path (absolute or relative, or
// file:///path) or s3://bucket/prefix. opts apply to S3 only; for S3,
// credentials missing from opts come from the AWS SDK's default chain
// (environment, shared config, web identity, instance role).
func Open(ctx context.Context, uri string, opts Options) (Store, error) {
	return OpenWithCredentials(ctx, uri, opts, nil)
}

// OpenWithCredentials is Open with creds (when not nil) as the S3
// credentials provider, used as is: the S3 client calls its Retrieve for
// every request, so creds must answer from memory and renew on its own
// (Unity Catalog's vended credentials do). opts must then hold no AWS keys.
// creds is an error for a local path.
func OpenWithCredentials(ctx context.Context, uri string, opts Options, creds aws.CredentialsProvider) (Store, error) {
	return open(ctx, uri, opts, creds, NewLocal)
}

// OpenForReading is OpenWithCredentials for a reader: a local directory
// that does not exist is not created (it reads as empty), so a check or a
// read of a table that is not there leaves nothing behind.
func OpenForReading(ctx context.Context, uri string, opts Options, creds aws.CredentialsProvider) (Store, error) {
	return open(ctx, uri, opts, creds, newLocalNoCreate)
}

func open(ctx context.Context, uri string, opts Options, creds aws.CredentialsProvider, local func(string) (*Local, error)) (Store, error) {
	for k := range opts {
		if !knownOptions[k] {
			return nil, fmt.Errorf("%w: unknown storage option %q (known: %s)", flightline.ErrInvalidInput, k, strings.Join(OptionKeys(), ", "))
		}
	}
	switch {
	case strings.HasPrefix(uri, "s3://"), strings.HasPrefix(uri, "s3a://"):
		u, err := url.Parse(uri)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("%w: %q: want s3://bucket/prefix", flightline.ErrInvalidInput, uri)
		}
		return newS3(ctx, u.Host, strings.Trim(u.Path, "/"), opts, creds)
	case strings.HasPrefix(uri, "file://"):
		if creds != nil {
			return nil, fmt.Errorf("%w: a credentials provider given for local path %q", flightline.ErrInvalidInput, uri)
		}
		u, err := url.Parse(uri)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %v", flightline.ErrInvalidInput, uri, err)
		}
		return local(u.Path)
	case strings.Contains(uri, "://"):
		return nil, fmt.Errorf("%w: %q: unsupported scheme (want a local path, file:// or s3://)", flightline.ErrInvalidInput, uri)
	}
	if len(opts) > 0 || creds != nil {
		return nil, fmt.Errorf("%w: storage options given for local path %q", flightline.ErrInvalidInput, uri)
	}
	return local(uri)
}

// Join joins key parts with '/'.
func Join(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		p = strings.Trim(p, "/")
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(p)
	}
	return b.String()
}

// Sub returns a view of s rooted at prefix (a sub-directory).
func Sub(s Store, prefix string) Store {
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return s
	}
	return &sub{s: s, prefix: prefix}
}

type sub struct {
	s      Store
	prefix string
}

func (p *sub) k(key string) string                                 { return p.prefix + "/" + key }
func (p *sub) Get(ctx context.Context, key string) ([]byte, error) { return p.s.Get(ctx, p.k(key)) }
func (p *sub) Put(ctx context.Context, key string, data []byte) error {
	return p.s.Put(ctx, p.k(key), data)
}
func (p *sub) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return p.s.PutIfAbsent(ctx, p.k(key), data)
}
func (p *sub) Delete(ctx context.Context, key string) error { return p.s.Delete(ctx, p.k(key)) }
func (p *sub) URL() string                                  { return strings.TrimRight(p.s.URL(), "/") + "/" + p.prefix }
func (p *sub) List(ctx context.Context, prefix, startAfter string) ([]string, error) {
	if startAfter != "" {
		startAfter = p.k(startAfter)
	}
	keys, err := p.s.List(ctx, p.k(prefix), startAfter)
	for i := range keys {
		keys[i] = strings.TrimPrefix(keys[i], p.prefix+"/")
	}
	return keys, err
}
