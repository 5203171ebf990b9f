package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/flightline/flightline/flightsink"
	bqsink "github.com/flightline/flightline/flightsink/bigquery"
	"github.com/flightline/flightline/internal/spec"
)

// The BigQuery sink takes PROJECT/DATASET after "bigquery:", with no "//":
//
//	bigquery:my-project/analytics?table=orders&key=order_id
//
// Authentication is application default credentials unless
// credentials_file names a service-account key file; emulator_endpoint and
// emulator_grpc point it at an emulator without authentication.

// bqSinkConfig is the bigquery: sink kind.
type bqSinkConfig struct {
	Table           *string  `spec:"table" doc:"table (or DATASET.TABLE) written when the pipeline names no target (--target overrides it)"`
	Key             []string `spec:"key" doc:"key columns batches are merged on (required)"`
	CheckpointTable string   `spec:"checkpoint_table" default:"_flightline_checkpoints" doc:"table holding the checkpoint of each pipeline and target"`
	CredentialsFile *string  `spec:"credentials_file" doc:"service-account key file (default: application default credentials)"`
	EmulatorHTTP    *string  `spec:"emulator_endpoint" doc:"an emulator's REST endpoint, http://HOST:PORT (no authentication)"`
	EmulatorGRPC    *string  `spec:"emulator_grpc" doc:"an emulator's gRPC address, HOST:PORT (insecure)"`
}

var bqSinkSpec = spec.New[bqSinkConfig]("bigquery", "bigquery:PROJECT/DATASET?table=T&key=COL[,COL…]&…",
	"at-least-once, idempotent: each batch staged through the Storage Write API and MERGEd on the key", nil)

func init() {
	sinkKinds["bigquery"] = sinkOf(bqSinkSpec, openBQSink)
}

func openBQSink(e env, u *url.URL, c bqSinkConfig) (flightsink.Sink, func(), error) {
	project, dataset, ok := strings.Cut(u.Opaque, "/")
	if u.Host != "" || !ok || project == "" || dataset == "" || strings.Contains(dataset, "/") {
		shown := *u
		shown.RawQuery = ""
		return nil, nil, fmt.Errorf("bigquery: %q: want bigquery:PROJECT/DATASET (no //), e.g. bigquery:my-project/analytics", shown.Redacted())
	}
	opts := []bqsink.Option{bqsink.Key(c.Key...), bqsink.CheckpointTable(c.CheckpointTable), bqsink.Logger(e.log)}
	if c.Table != nil {
		opts = append(opts, bqsink.Table(*c.Table))
	}
	if c.CredentialsFile != nil {
		opts = append(opts, bqsink.CredentialsFile(*c.CredentialsFile))
	}
	if c.EmulatorHTTP != nil || c.EmulatorGRPC != nil {
		if c.EmulatorHTTP == nil || c.EmulatorGRPC == nil {
			return nil, nil, fmt.Errorf("bigquery: emulator_endpoint and emulator_grpc go together")
		}
		opts = append(opts, bqsink.Emulator(*c.EmulatorHTTP, *c.EmulatorGRPC))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := bqsink.New(ctx, project, dataset, opts...)
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}
