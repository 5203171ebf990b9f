package main

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/flightline/flightline/flightsink"
	s3sink "github.com/flightline/flightline/flightsink/s3"
	"github.com/flightline/flightline/internal/objstore"
)

// The S3 sink takes its location as bucket/prefix after "s3:", with no
// "//"; the AWS_* storage options are query keys:
//
//	s3:lake/events?AWS_ENDPOINT_URL=http://127.0.0.1:7070&AWS_ALLOW_HTTP=true
//
// Put credentials in the environment (AWS_ACCESS_KEY_ID, ...: the SDK's
// default chain) rather than on the command line.

const s3Usage = "s3:BUCKET/PREFIX?part_size=N&multipart_threshold=N&AWS_*=…  at-least-once: one Parquet object per batch under BUCKET/PREFIX/[TARGET/]PIPELINE/, replays overwrite the same keys"

func init() {
	sinkKinds["s3"] = sinkKind{usage: s3Usage, open: openS3Sink}
}

func openS3Sink(u *url.URL, q query) (flightsink.Sink, func(), error) {
	if u.Host != "" || u.Opaque == "" {
		return nil, nil, fmt.Errorf("s3: %q: want s3:BUCKET/PREFIX (no //), e.g. s3:my-bucket/events", u.Redacted())
	}
	storage := map[string]string{}
	for _, k := range objstore.OptionKeys() {
		if v, ok := q.take(k); ok {
			storage[k] = v
		}
	}
	opts := []s3sink.Option{s3sink.StorageOptions(storage)}
	part, thresh := objstore.DefaultPartSize, objstore.MultipartThreshold
	for k, dst := range map[string]*int{"part_size": &part, "multipart_threshold": &thresh} {
		if v, ok := q.take(k); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, nil, fmt.Errorf("s3: %s=%q: %w", k, v, err)
			}
			*dst = n
		}
	}
	opts = append(opts, s3sink.Multipart(part, thresh))
	if kindEnv.log != nil {
		opts = append(opts, s3sink.Logger(kindEnv.log))
	}
	if err := q.done("s3"); err != nil {
		return nil, nil, err
	}
	s, err := s3sink.New(u.Opaque, opts...)
	if err != nil {
		return nil, nil, err
	}
	return s, func() {}, nil
}
