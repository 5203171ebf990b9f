package config

import (
	"fmt"
	"net/url"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/internal/spec"
)

// objLayout are the options every objsink kind (file:, gcs:) shares: the
// part files' format and partitions.
type objLayout struct {
	Format         string `spec:"format" enum:"parquet,jsonl,csv" default:"parquet" doc:"the part files' format (Parquet: snappy)"`
	PartitionBy    string `spec:"partition_by" doc:"Hive-style partitions by this column's value: <target>/COLUMN=VALUE/"`
	PartitionByDay string `spec:"partition_by_day" doc:"Hive-style partitions by the UTC day of this timestamp or date column: <target>/COLUMN_day=YYYY-MM-DD/"`
}

// layout is the objsink Config of c, without its Backend and Name.
func (c objLayout) layout() (objsink.Config, error) {
	if c.PartitionBy != "" && c.PartitionByDay != "" {
		return objsink.Config{}, fmt.Errorf("partition_by and partition_by_day: give one")
	}
	return objsink.Config{Format: objsink.Format(c.Format), PartitionBy: c.PartitionBy, PartitionByDay: c.PartitionByDay}, nil
}

// fileSinkConfig is the file: sink kind.
type fileSinkConfig struct {
	objLayout
}

var fileSpec = spec.New[fileSinkConfig]("file", "file:DIR?format=parquet|jsonl|csv",
	"exactly-once part files (Parquet, JSON lines or CSV) under DIR/<target>/, committed by create-if-absent records and link(2), fsynced", nil)

func init() {
	sinkKinds["file"] = sinkOf(fileSpec, openFile).at("path", "the directory")
}

func openFile(e env, u *url.URL, c fileSinkConfig) (flightsink.Sink, func(), error) {
	dir := location(u)
	if dir == "" || u.Host != "" {
		return nil, nil, fmt.Errorf("file: want file:DIR (no //), e.g. file:/data/out or file:out")
	}
	cfg, err := c.layout()
	if err != nil {
		return nil, nil, fmt.Errorf("file: %w", err)
	}
	b, err := objsink.NewLocal(dir)
	if err != nil {
		return nil, nil, err
	}
	cfg.Backend, cfg.Name = b, "file sink"
	s, err := objsink.New(e.ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return objSink{Sink: s, how: "create-if-absent commit records, link(2), fsync"}, func() {}, nil
}

// objSink is an objsink kind as `flightline check` describes it.
type objSink struct {
	*objsink.Sink
	how string
}

func (s objSink) checkDetail(checkpoints string) string {
	return fmt.Sprintf("exactly-once (%s part files, %s); %s", s.Format(), s.how, checkpoints)
}
