package config

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	bqsink "github.com/flightline/flightline/flightsink/bigquery"
	"github.com/flightline/flightline/flightsrc"
	bqsrc "github.com/flightline/flightline/flightsrc/bigquery"
	"github.com/flightline/flightline/internal/spec"
)

// The BigQuery sink and source take PROJECT/DATASET after "bigquery:",
// with no "//":
//
//	bigquery:my-project/analytics?table=orders&key=order_id
//	bigquery:my-project/analytics?table=orders&cursor=seq&tiebreak=id
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

// bqSourceConfig is the bigquery: source kind.
type bqSourceConfig struct {
	Table           string         `spec:"table" doc:"TABLE or DATASET.TABLE to read; the stream has its name (required)"`
	Cursor          string         `spec:"cursor" doc:"INT64 or STRING column that grows with every new row (required)"`
	Tiebreak        string         `spec:"tiebreak" doc:"INT64 or STRING column making (cursor, tiebreak) unique; the cursor itself when it is unique (required)"`
	Poll            *time.Duration `spec:"poll" doc:"pause between polls once caught up (default 1s)"`
	BatchRows       *int           `spec:"batch_rows" doc:"rows per batch at most (default 10000)"`
	CredentialsFile *string        `spec:"credentials_file" doc:"service-account key file (default: application default credentials)"`
	EmulatorHTTP    *string        `spec:"emulator_endpoint" doc:"an emulator's REST endpoint, http://HOST:PORT (no authentication)"`
	EmulatorGRPC    *string        `spec:"emulator_grpc" doc:"an emulator's gRPC address, HOST:PORT (insecure)"`
}

var bqSourceSpec = spec.New[bqSourceConfig]("bigquery", "bigquery:PROJECT/DATASET?table=T&cursor=C&tiebreak=K&…",
	"incremental BigQuery reads by (cursor, tiebreak), as Arrow through the Storage Read API", nil)

func init() {
	sinkKinds["bigquery"] = sinkOf(bqSinkSpec, openBQSink)
	sourceKinds["bigquery"] = sourceOf(bqSourceSpec, openBQSource)
}

// bqLocation is the PROJECT/DATASET of a bigquery: URL.
func bqLocation(u *url.URL) (project, dataset string, err error) {
	project, dataset, ok := strings.Cut(u.Opaque, "/")
	if u.Host != "" || !ok || project == "" || dataset == "" || strings.Contains(dataset, "/") {
		shown := *u
		shown.RawQuery = ""
		return "", "", fmt.Errorf("bigquery: %q: want bigquery:PROJECT/DATASET (no //), e.g. bigquery:my-project/analytics", shown.Redacted())
	}
	return project, dataset, nil
}

func openBQSource(e env, u *url.URL, c bqSourceConfig) (flightsrc.Source, func(), error) {
	project, dataset, err := bqLocation(u)
	if err != nil {
		return nil, nil, err
	}
	if c.Table == "" || c.Cursor == "" || c.Tiebreak == "" {
		return nil, nil, fmt.Errorf("bigquery: the source needs table=, cursor= and tiebreak=")
	}
	cfg := bqsrc.Config{Project: project, Dataset: dataset, Table: c.Table, Cursor: c.Cursor, Tiebreak: c.Tiebreak}
	// A bound given as a key must be a real one: 0 would mean the default.
	if c.Poll != nil {
		if *c.Poll <= 0 {
			return nil, nil, fmt.Errorf("%w: bigquery source: poll interval %v", flightline.ErrInvalidInput, *c.Poll)
		}
		cfg.PollInterval = *c.Poll
	}
	if c.BatchRows != nil {
		if *c.BatchRows < 1 {
			return nil, nil, fmt.Errorf("%w: bigquery source: batch rows %d", flightline.ErrInvalidInput, *c.BatchRows)
		}
		cfg.BatchRows = *c.BatchRows
	}
	if c.CredentialsFile != nil {
		cfg.CredentialsFile = *c.CredentialsFile
	}
	if c.EmulatorHTTP != nil || c.EmulatorGRPC != nil {
		if c.EmulatorHTTP == nil || c.EmulatorGRPC == nil {
			return nil, nil, fmt.Errorf("bigquery: emulator_endpoint and emulator_grpc go together")
		}
		if *c.EmulatorHTTP == "" || *c.EmulatorGRPC == "" {
			return nil, nil, fmt.Errorf("%w: bigquery source: an emulator needs both its HTTP endpoint and its gRPC address", flightline.ErrInvalidInput)
		}
		cfg.EmulatorEndpoint, cfg.EmulatorGRPC = *c.EmulatorHTTP, *c.EmulatorGRPC
	}
	s, err := bqsrc.New(e.ctx, cfg, bqsrc.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

func openBQSink(e env, u *url.URL, c bqSinkConfig) (flightsink.Sink, func(), error) {
	project, dataset, err := bqLocation(u)
	if err != nil {
		return nil, nil, err
	}
	cfg := bqsink.Config{Project: project, Dataset: dataset, Key: c.Key, CheckpointTable: c.CheckpointTable}
	if c.Table != nil {
		cfg.Table = *c.Table
	}
	if c.CredentialsFile != nil {
		cfg.CredentialsFile = *c.CredentialsFile
	}
	if c.EmulatorHTTP != nil || c.EmulatorGRPC != nil {
		if c.EmulatorHTTP == nil || c.EmulatorGRPC == nil {
			return nil, nil, fmt.Errorf("bigquery: emulator_endpoint and emulator_grpc go together")
		}
		cfg.EmulatorEndpoint, cfg.EmulatorGRPC = *c.EmulatorHTTP, *c.EmulatorGRPC
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := bqsink.New(ctx, cfg, bqsink.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}
