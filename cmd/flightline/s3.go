package main

import (
	"fmt"
	"net/url"

	"github.com/flightline/flightline/flightsink"
	s3sink "github.com/flightline/flightline/flightsink/s3"
	"github.com/flightline/flightline/internal/spec"
)

// The S3 sink takes its location as bucket/prefix after "s3:", with no
// "//"; the AWS_* storage options are query keys:
//
//	s3:lake/events?AWS_ENDPOINT_URL=http://127.0.0.1:7070&AWS_ALLOW_HTTP=true
//
// Put credentials in the environment (AWS_ACCESS_KEY_ID, ...: the SDK's
// default chain) rather than on the command line.

// s3SinkConfig is the s3: sink kind. Its defaults are
// objstore.DefaultPartSize and objstore.MultipartThreshold.
type s3SinkConfig struct {
	PartSize           spec.Size         `spec:"part_size" default:"16MiB" doc:"part size of multipart uploads"`
	MultipartThreshold spec.Size         `spec:"multipart_threshold" default:"32MiB" doc:"objects larger than this are uploaded in parts"`
	Storage            map[string]string `spec:",extra"`
}

var s3SinkSpec = spec.New[s3SinkConfig]("s3", "s3:BUCKET/PREFIX?…",
	"at-least-once: one Parquet object per batch under BUCKET/PREFIX/[TARGET/]PIPELINE/; replays overwrite the same keys", storageKeys)

func init() {
	sinkKinds["s3"] = sinkOf(s3SinkSpec, openS3Sink).at("prefix", "BUCKET/PREFIX the objects go under")
}

func openS3Sink(e env, u *url.URL, c s3SinkConfig) (flightsink.Sink, func(), error) {
	if u.Host != "" || u.Opaque == "" {
		shown := *u
		shown.RawQuery = "" // it may hold AWS_SECRET_ACCESS_KEY
		return nil, nil, fmt.Errorf("s3: %q: want s3:BUCKET/PREFIX (no //), e.g. s3:my-bucket/events", shown.Redacted())
	}
	s, err := s3sink.New(u.Opaque, s3sink.StorageOptions(c.Storage),
		s3sink.Multipart(int(c.PartSize), int(c.MultipartThreshold)), s3sink.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return s, func() {}, nil
}
