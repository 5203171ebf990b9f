package s3

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/parquetw"
)

// Config is what an s3 sink (commit=at-least-once) is given in its URL or
// YAML.
type Config struct {
	// Location is "bucket/prefix" (or just "bucket") without a scheme:
	// "s3://bucket/prefix" is refused with an error showing the accepted
	// form. Required.
	Location string
	// Storage holds the object-store options: the AWS_* keys the Delta
	// sink takes (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
	// AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL, AWS_ALLOW_HTTP).
	// What they leave out comes from the AWS SDK's default chain. Unknown
	// keys are an error.
	Storage map[string]string
	// PartSize is the part size of multipart uploads (default
	// objstore.DefaultPartSize, 16 MiB). AWS S3 needs parts of at least
	// 5 MiB.
	PartSize int
	// MultipartThreshold is the object size above which multipart uploads
	// are used (default objstore.MultipartThreshold, 32 MiB).
	MultipartThreshold int
	// ParquetDictionary sets which columns the Parquet writer
	// dictionary-encodes: "auto" (the default: the columns whose sampled
	// cardinality makes it pay), "always" or "never".
	ParquetDictionary string
	// ParquetRowGroupRows bounds the rows of one Parquet row group
	// (default 1M, more than a batch usually holds: one row group per
	// file).
	ParquetRowGroupRows int64
}

// Option configures a Sink beyond its Config.
type Option func(*options) error

type options struct {
	mem            memory.Allocator
	log            *slog.Logger
	clientOverride func(*objstore.S3) *objstore.S3 // tests: fault injection
}

// Allocator sets the allocator Parquet encoding draws from; nil means
// memory.DefaultAllocator, the default. Everything drawn is released
// before WriteBatch returns.
func Allocator(mem memory.Allocator) Option {
	return func(o *options) error {
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		o.mem = mem
		return nil
	}
}

// Logger sets the logger; nil means slog.Default(), the default.
func Logger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.Default()
		}
		o.log = l
		return nil
	}
}

// Sink is the at-least-once S3 sink: one snappy Parquet object per batch,
// at a key derived from the batch's checkpoints (see the package
// documentation). It is safe for concurrent use by several pipelines.
type Sink struct {
	store     objstore.Store
	loc       string // bucket/prefix, for messages
	o         options
	pqOptions []parquetw.Option
	bucket    string
}

var (
	_ flightsink.Sink       = (*Sink)(nil)
	_ flightsink.Guaranteer = (*Sink)(nil)
)

// New returns a sink writing under cfg.Location. Pipeline p's objects go
// under bucket/prefix/<p.ID>/, or bucket/prefix/<p.Target>/<p.ID>/ when
// p.Target is set.
//
// New contacts nothing (it only loads the SDK configuration, within ctx);
// wrong credentials and a missing bucket are reported by Open. It
// validates cfg (the location, the storage keys, the multipart sizes and
// the Parquet settings). Close releases nothing.
func New(ctx context.Context, cfg Config, opts ...Option) (*Sink, error) {
	location := cfg.Location
	bucket, prefix, err := ParseLocation(location)
	if err != nil {
		return nil, err
	}
	for k := range cfg.Storage {
		if !objstore.IsOption(k) {
			return nil, fmt.Errorf("%w: s3 sink: unknown storage option %q (known: %s)", flightline.ErrInvalidInput, k, strings.Join(objstore.OptionKeys(), ", "))
		}
	}
	if cfg.PartSize < 0 || cfg.MultipartThreshold < 0 {
		return nil, fmt.Errorf("%w: s3 sink: multipart part size %d and threshold %d must be positive", flightline.ErrInvalidInput, cfg.PartSize, cfg.MultipartThreshold)
	}
	var pqOptions []parquetw.Option
	if cfg.ParquetDictionary != "" {
		opt, err := parquetw.DictionaryMode(cfg.ParquetDictionary)
		if err != nil {
			return nil, err
		}
		pqOptions = append(pqOptions, opt)
	}
	if cfg.ParquetRowGroupRows != 0 {
		if cfg.ParquetRowGroupRows < 1 {
			return nil, fmt.Errorf("%w: Parquet row group rows %d < 1", flightline.ErrInvalidInput, cfg.ParquetRowGroupRows)
		}
		pqOptions = append(pqOptions, parquetw.MaxRowGroupRows(cfg.ParquetRowGroupRows))
	}
	o := options{mem: memory.DefaultAllocator, log: slog.Default()}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.mem == nil {
		o.mem = memory.DefaultAllocator
	}
	st, err := objstore.NewS3(ctx, bucket, prefix, cfg.Storage)
	if err != nil {
		return nil, fmt.Errorf("s3 sink %s: %w", location, err)
	}
	if cfg.PartSize > 0 || cfg.MultipartThreshold > 0 {
		part, thresh := cfg.PartSize, cfg.MultipartThreshold
		if part == 0 {
			part = objstore.DefaultPartSize
		}
		if thresh == 0 {
			thresh = objstore.MultipartThreshold
		}
		st.SetPartSize(part, thresh)
	}
	if o.clientOverride != nil {
		st = o.clientOverride(st)
	}
	return &Sink{store: st, loc: objstore.Join(bucket, prefix), o: o, pqOptions: pqOptions, bucket: bucket}, nil
}

// Close releases nothing (the sink holds no connection of its own: the
// SDK's client pools its connections) and returns nil.
func (s *Sink) Close() error { return nil }

// Ping checks that the bucket exists and that the credentials reach it (an
// S3 HeadBucket), contacting the endpoint; its error names the cause. It
// writes nothing.
func (s *Sink) Ping(ctx context.Context) error {
	h, ok := s.store.(interface{ HeadBucket(context.Context) error })
	if !ok {
		return nil
	}
	if err := h.HeadBucket(ctx); err != nil {
		return fmt.Errorf("s3 sink %s: %w", s.loc, err)
	}
	return nil
}

// ParseLocation splits "bucket/prefix" into its bucket and prefix. A
// location with a scheme (s3://…) is ErrInvalidInput with a message
// showing the accepted form.
func ParseLocation(location string) (bucket, prefix string, err error) {
	if i := strings.Index(location, "://"); i >= 0 {
		rest := location[i+3:]
		return "", "", fmt.Errorf("%w: s3 sink: location %q has a scheme (%s://): give it as bucket/prefix, e.g. %q",
			flightline.ErrInvalidInput, location, location[:i], rest)
	}
	location = strings.Trim(location, "/")
	bucket, prefix, _ = strings.Cut(location, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%w: s3 sink: empty location: give it as bucket/prefix, e.g. \"my-bucket/events\"", flightline.ErrInvalidInput)
	}
	if len(bucket) < 3 || len(bucket) > 63 || strings.ContainsAny(bucket, " \\?#%") {
		return "", "", fmt.Errorf("%w: s3 sink: %q is not a valid bucket name (location %q: want bucket/prefix)", flightline.ErrInvalidInput, bucket, location)
	}
	for _, seg := range strings.Split(prefix, "/") {
		if prefix != "" && (seg == "" || seg == "." || seg == "..") {
			return "", "", fmt.Errorf("%w: s3 sink: prefix %q has an empty, '.' or '..' segment", flightline.ErrInvalidInput, prefix)
		}
	}
	return bucket, prefix, nil
}

// Guarantee implements flightsink.Guaranteer: at-least-once. The sink
// writes data only; replays overwrite the same keys (see the package
// documentation for when that makes the result exactly once).
func (s *Sink) Guarantee() flightsink.Guarantee { return flightsink.AtLeastOnce }

// URL returns s3://bucket/prefix, for messages and readers.
func (s *Sink) URL() string { return s.store.URL() }

// Dir returns the key prefix, relative to the sink's location, under which
// p's objects are written: <p.Target>/<p.ID> or <p.ID>.
func Dir(p flightsink.Pipeline) (string, error) {
	if err := checkSegment("pipeline id", p.ID); err != nil {
		return "", err
	}
	if p.Target == "" {
		return p.ID, nil
	}
	for _, seg := range strings.Split(p.Target, "/") {
		if err := checkSegment("target", seg); err != nil {
			return "", err
		}
	}
	return p.Target + "/" + p.ID, nil
}

// Checkpoint implements flightsink.Sink. The sink keeps no checkpoint: it
// always returns nil, and the source's own committed position (for Kafka,
// the consumer group's offsets, moved by the coordinator's advisory commit)
// decides where a pipeline resumes.
func (s *Sink) Checkpoint(_ context.Context, p flightsink.Pipeline) ([]byte, error) {
	if _, err := Dir(p); err != nil {
		return nil, err
	}
	return nil, nil
}

// Open implements flightsink.Sink. It reads the pipeline's schema object,
// which checks that the bucket exists and the credentials work, and returns
// a Writer and a nil checkpoint. Open fences nothing: two writers of one
// pipeline both write, and replays of the same batch overwrite one key.
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	dir, err := Dir(p)
	if err != nil {
		return nil, nil, err
	}
	w := &writer{s: s, p: p, dir: dir}
	if err := w.loadSchema(ctx); err != nil {
		return nil, nil, err
	}
	s.o.log.Debug("s3 sink: pipeline opened", "pipeline", p.ID, "dir", s.URL()+"/"+dir, "schema_known", w.schema != nil)
	return w, nil, nil
}

// wrap adds what the user should check to the object store's classified
// errors.
func (s *Sink) wrap(err error, op string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flightline.ErrUnauthenticated):
		return fmt.Errorf("s3 sink s3://%s: %s: the server refused the credentials; check %s/%s (and %s) in the storage options, or the AWS SDK default chain (environment, shared config, instance role): %w",
			s.loc, op, objstore.AccessKeyID, objstore.SecretAccessKey, objstore.SessionToken, err)
	case errors.Is(err, flightline.ErrPermissionDenied):
		return fmt.Errorf("s3 sink s3://%s: %s: the credentials lack a permission (the sink needs s3:GetObject, s3:PutObject, s3:AbortMultipartUpload on the prefix): %w", s.loc, op, err)
	case errors.Is(err, flightline.ErrNotFound) && !errors.Is(err, objstore.ErrNotExist):
		return fmt.Errorf("s3 sink s3://%s: %s: bucket %q not found; the sink does not create buckets: %w", s.loc, op, s.bucket, err)
	}
	return fmt.Errorf("s3 sink s3://%s: %s: %w", s.loc, op, err)
}
