package config

import (
	"fmt"
	"net/url"
	"time"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	srcdelta "github.com/flightline/flightline/flightsrc/delta"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/spec"
)

// Delta endpoints take the table location after "delta:" and options as
// query keys; the AWS_* storage options (as delta-rs names them) are query
// keys too:
//
//	delta:/data/orders?checkpoint_interval=10
//	delta:s3://lake/orders?AWS_ENDPOINT_URL=http://127.0.0.1:7070&AWS_ALLOW_HTTP=true
//
// Put credentials in the environment (AWS_ACCESS_KEY_ID, ...: the SDK's
// default chain) rather than on the command line.

// storageKeys are the AWS_* storage options of the Delta and S3 kinds.
var storageKeys = &spec.Extra{
	Doc:    "storage options (credentials are better left to the environment)",
	Keys:   objstore.OptionKeys(),
	Secret: []string{objstore.SecretAccessKey, objstore.SessionToken},
}

// deltaSinkConfig is the delta: sink kind.
type deltaSinkConfig struct {
	Instance           string            `spec:"instance" default:"default" doc:"this writer's name among the table's writers; the pipeline's fencing is per instance"`
	CheckpointInterval int               `spec:"checkpoint_interval" default:"10" doc:"write a Delta checkpoint every N commits (every multiple of N nearest below files/1000 once the table has 1000×N files or more)"`
	SchemaEvolution    bool              `spec:"schema_evolution" default:"false" doc:"add new nullable columns to the table instead of refusing the batch"`
	TargetFileSize     spec.Size         `spec:"target_file_size" default:"32MiB" doc:"the size compaction aims its files at; a file under half of it is small (a compaction holds about this much in memory)"`
	Compact            string            `spec:"compact" default:"auto" enum:"auto,off" doc:"auto: rewrite small files in the background into files near target_file_size, in commits that change no data (dataChange=false); off: never"`
	CompactMinFiles    int               `spec:"compact_min_files" default:"50" doc:"how many small files gather before a compaction"`
	Vacuum             string            `spec:"vacuum" default:"auto" enum:"auto,off" doc:"auto: at most hourly, delete expired log entries (delta.logRetentionDuration, 30 days) and the data files no retained version references (delta.deletedFileRetentionDuration, 7 days); off: never (flightline delta vacuum does it on demand)"`
	Mode               string            `spec:"mode" default:"append" enum:"append,merge" doc:"append: add every row; merge: apply rows as changes by key (postgres-cdc: _op=delete deletes the key's row, others replace it; _op, _lsn, _commit_time not written), each commit rewriting the files that hold its keys"`
	Key                []string          `spec:"key" doc:"key columns of mode merge (required there)"`
	Storage            map[string]string `spec:",extra"`
}

// deltaSourceConfig is the delta: source kind.
type deltaSourceConfig struct {
	Once      bool              `spec:"once" default:"false" doc:"stop at the table's current version instead of following new commits"`
	Stream    *string           `spec:"stream" doc:"the stream's name (default: the table directory's name)"`
	BatchRows *int              `spec:"batch_rows" doc:"rows per batch at most (default 65536)"`
	Poll      *time.Duration    `spec:"poll" doc:"pause between polls for new commits (default 1s)"`
	Storage   map[string]string `spec:",extra"`
}

var (
	deltaSinkSpec = spec.New[deltaSinkConfig]("delta", "delta:PATH or delta:s3://BUCKET/PREFIX?…",
		"exactly-once Delta Lake table (a target is a sub-directory)", storageKeys)
	deltaSourceSpec = spec.New[deltaSourceConfig]("delta", "delta:PATH or delta:s3://BUCKET/PREFIX?…",
		"a Delta Lake table: its snapshot, then new commits", storageKeys)
)

func deltaLocation(u *url.URL) (string, error) {
	if loc := location(u); loc != "" {
		return loc, nil
	}
	return "", fmt.Errorf("delta: want delta:PATH or delta:s3://BUCKET/PREFIX")
}

func openDeltaSink(e env, u *url.URL, c deltaSinkConfig) (flightsink.Sink, func(), error) {
	loc, err := deltaLocation(u)
	if err != nil {
		return nil, nil, err
	}
	if c.TargetFileSize < 1 { // the sink reads 0 as its default; a URL's 0 is a mistake
		return nil, nil, fmt.Errorf("%w: target file size %d < 1", flightline.ErrInvalidInput, c.TargetFileSize)
	}
	if c.CompactMinFiles < 2 {
		return nil, nil, fmt.Errorf("%w: compact_min_files %d < 2", flightline.ErrInvalidInput, c.CompactMinFiles)
	}
	cfg, err := deltaTableConfig(c.Instance, c.CheckpointInterval, c.SchemaEvolution)
	if err != nil {
		return nil, nil, err
	}
	cfg.URI, cfg.Storage = loc, c.Storage
	cfg.TargetFileSize, cfg.Compaction, cfg.CompactMinFiles, cfg.Vacuum = int64(c.TargetFileSize), c.Compact, c.CompactMinFiles, c.Vacuum
	cfg.Mode, cfg.Key = c.Mode, c.Key
	s, err := sinkdelta.New(e.ctx, cfg, sinkdelta.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

// deltaTableConfig is the part of a Delta sink's Config the delta and
// databricks kinds share. An interval of 0 turns checkpoints off (the
// sink's Config reads 0 as its default); an empty instance is refused.
func deltaTableConfig(instance string, interval int, evolve bool) (sinkdelta.Config, error) {
	if instance == "" {
		return sinkdelta.Config{}, fmt.Errorf("%w: empty instance name", flightline.ErrInvalidInput)
	}
	if interval < 0 {
		return sinkdelta.Config{}, fmt.Errorf("%w: checkpoint interval %d < 0", flightline.ErrInvalidInput, interval)
	}
	if interval == 0 {
		interval = -1
	}
	return sinkdelta.Config{Instance: instance, CheckpointInterval: interval, SchemaEvolution: evolve}, nil
}

func openDeltaSource(e env, u *url.URL, c deltaSourceConfig) (flightsrc.Source, func(), error) {
	loc, err := deltaLocation(u)
	if err != nil {
		return nil, nil, err
	}
	cfg := srcdelta.Config{URI: loc, StorageOptions: c.Storage, Once: c.Once}
	if c.Stream != nil {
		cfg.Stream = *c.Stream
	}
	if c.BatchRows != nil {
		if *c.BatchRows < 1 { // 0 would mean the default
			return nil, nil, fmt.Errorf("%w: batch rows %d < 1", flightline.ErrInvalidInput, *c.BatchRows)
		}
		cfg.BatchRows = *c.BatchRows
	}
	if c.Poll != nil {
		cfg.PollInterval = *c.Poll
	}
	s, err := srcdelta.New(e.ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close() }, nil
}

func init() {
	sinkKinds["delta"] = sinkOf(deltaSinkSpec, openDeltaSink).at("uri", "the table: a local path or s3://BUCKET/PREFIX")
	sourceKinds["delta"] = sourceOf(deltaSourceSpec, openDeltaSource).at("uri", "the table: a local path or s3://BUCKET/PREFIX")
}
