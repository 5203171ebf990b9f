package config

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/objsink/gcs"
	"github.com/flightline/flightline/internal/spec"
)

// gcsSinkConfig is the gcs: sink kind.
type gcsSinkConfig struct {
	objLayout
	Endpoint string `spec:"endpoint" doc:"the JSON API endpoint of an emulator, e.g. http://127.0.0.1:4443 (no authentication); default: Google Cloud Storage with application default credentials"`
}

var gcsSpec = spec.New[gcsSinkConfig]("gcs", "gcs:BUCKET/PREFIX?format=parquet|jsonl|csv",
	"exactly-once part files under gs://BUCKET/PREFIX/<target>/, committed by ifGenerationMatch=0 records", nil)

func init() {
	sinkKinds["gcs"] = sinkOf(gcsSpec, openGCS).at("prefix", "BUCKET/PREFIX the objects go under")
}

func openGCS(e env, u *url.URL, c gcsSinkConfig) (flightsink.Sink, func(), error) {
	loc := location(u)
	if u.Host != "" || loc == "" {
		return nil, nil, fmt.Errorf("gcs: want gcs:BUCKET/PREFIX (no //), e.g. gcs:my-bucket/events")
	}
	bucket, prefix, _ := strings.Cut(strings.Trim(loc, "/"), "/")
	cfg, err := c.layout()
	if err != nil {
		return nil, nil, fmt.Errorf("gcs: %w", err)
	}
	b, err := gcs.New(e.ctx, gcs.Config{Bucket: bucket, Prefix: prefix, Endpoint: c.Endpoint})
	if err != nil {
		return nil, nil, err
	}
	cfg.Backend, cfg.Name = b, "gcs sink"
	s, err := objsink.New(e.ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return objSink{Sink: s, how: "ifGenerationMatch=0 commit records, server-side copies"}, func() {}, nil
}
