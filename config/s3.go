package config

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	objs3 "github.com/flightline/flightline/flightsink/objsink/s3"
	s3sink "github.com/flightline/flightline/flightsink/s3"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/spec"
)

// The S3 sink takes its location as bucket/prefix after "s3:", with no
// "//"; the AWS_* storage options are query keys:
//
//	s3:lake/events?AWS_ENDPOINT_URL=http://127.0.0.1:7070&AWS_ALLOW_HTTP=true
//
// Put credentials in the environment (AWS_ACCESS_KEY_ID, ...: the SDK's
// default chain) rather than on the command line.
//
// By default (commit=exactly-once) it is an objsink kind like file: and
// gcs:, committing by If-None-Match: * (probed at Open); commit=at-least-once
// keeps the deterministic-key writer of flightsink/s3, for stores that do
// not honour the precondition.

// The s3 kind's commit modes.
const (
	s3ExactlyOnce = "exactly-once"
	s3AtLeastOnce = "at-least-once"
)

// s3SinkConfig is the s3: sink kind. Its multipart defaults are
// objstore.DefaultPartSize and objstore.MultipartThreshold.
type s3SinkConfig struct {
	objLayout
	Commit             string            `spec:"commit" enum:"exactly-once,at-least-once" default:"exactly-once" doc:"exactly-once: part files under PREFIX/<target>/ committed by If-None-Match: * records (the store must honour it: checked at open); at-least-once: one Parquet object per batch at a key derived from its checkpoint under PREFIX/[TARGET/]PIPELINE/, for stores without conditional writes (Parquet only, no partitions)"`
	PartSize           spec.Size         `spec:"part_size" default:"16MiB" doc:"part size of multipart uploads"`
	MultipartThreshold spec.Size         `spec:"multipart_threshold" default:"32MiB" doc:"objects larger than this are uploaded in parts"`
	Storage            map[string]string `spec:",extra"`
}

var s3SinkSpec = spec.New[s3SinkConfig]("s3", "s3:BUCKET/PREFIX?format=parquet|jsonl|csv&commit=exactly-once|at-least-once&AWS_…",
	"exactly-once part files under BUCKET/PREFIX/<target>/, committed by If-None-Match: * records; commit=at-least-once: one Parquet object per batch, replays overwrite the same keys", storageKeys)

func init() {
	sinkKinds["s3"] = sinkOf(s3SinkSpec, openS3Sink).at("prefix", "BUCKET/PREFIX the objects go under")
}

func openS3Sink(e env, u *url.URL, c s3SinkConfig) (flightsink.Sink, func(), error) {
	if u.Host != "" || u.Opaque == "" {
		shown := *u
		shown.RawQuery = "" // it may hold AWS_SECRET_ACCESS_KEY
		return nil, nil, fmt.Errorf("s3: %q: want s3:BUCKET/PREFIX (no //), e.g. s3:my-bucket/events", shown.Redacted())
	}
	if c.PartSize < 1 || c.MultipartThreshold < 1 { // the sink reads 0 as its default
		return nil, nil, fmt.Errorf("%w: s3: multipart part_size %d and multipart_threshold %d must be positive", flightline.ErrInvalidInput, c.PartSize, c.MultipartThreshold)
	}
	if c.Commit == s3AtLeastOnce {
		if c.Format != string(objsink.Parquet) || c.PartitionBy != "" || c.PartitionByDay != "" {
			return nil, nil, fmt.Errorf("s3: commit=at-least-once writes Parquet objects without partitions: leave out format, partition_by and partition_by_day")
		}
		s, err := s3sink.New(e.ctx, s3sink.Config{Location: u.Opaque, Storage: c.Storage,
			PartSize: int(c.PartSize), MultipartThreshold: int(c.MultipartThreshold)}, s3sink.Logger(e.log))
		if err != nil {
			return nil, nil, err
		}
		return s3AtLeastOnceSink{s}, func() { _ = s.Close() }, nil
	}
	bucket, prefix, err := s3sink.ParseLocation(u.Opaque)
	if err != nil {
		return nil, nil, err
	}
	for k := range c.Storage {
		if !objstore.IsOption(k) {
			return nil, nil, fmt.Errorf("%w: s3 sink: unknown storage option %q (known: %s)", flightline.ErrInvalidInput, k, strings.Join(objstore.OptionKeys(), ", "))
		}
	}
	cfg, err := c.layout()
	if err != nil {
		return nil, nil, fmt.Errorf("s3: %w", err)
	}
	b, err := objs3.New(e.ctx, objs3.Config{Bucket: bucket, Prefix: prefix, Storage: objstore.Options(c.Storage),
		PartSize: int(c.PartSize), MultipartThreshold: int(c.MultipartThreshold)})
	if err != nil {
		return nil, nil, fmt.Errorf("s3 sink %s: %w", u.Opaque, err)
	}
	cfg.Backend, cfg.Name = b, "s3 sink"
	s, err := objsink.New(e.ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return s3ObjSink{objSink: objSink{Sink: s, how: "If-None-Match: * commit records, server-side copies"}, st: b.Store()}, func() {}, nil
}

// s3ObjSink is the s3 kind in its exactly-once mode.
type s3ObjSink struct {
	objSink
	st *objstore.S3
}

// Ping checks the bucket and the credentials (HEAD of the bucket), then
// that the store honours If-None-Match: * (objsink's probe, which Open
// runs too): `flightline check` fails where the pipeline would.
func (s s3ObjSink) Ping(ctx context.Context) error {
	if err := s.st.HeadBucket(ctx); err != nil {
		return fmt.Errorf("s3 sink %s: %w", s.st.URL(), err)
	}
	return s.Probe(ctx)
}

func (s3ObjSink) pingWhat() string {
	return "HEAD of the bucket with the configured credentials; If-None-Match: * honoured (a probe object created twice, then removed)"
}

// s3AtLeastOnceSink is the s3 kind with commit=at-least-once.
type s3AtLeastOnceSink struct{ *s3sink.Sink }

func (s3AtLeastOnceSink) checkDetail(line string) string {
	return "at-least-once (commit=at-least-once: one Parquet object per batch at a key derived from its checkpoint; exactly once in effect only with deterministic source batches); " + line
}
