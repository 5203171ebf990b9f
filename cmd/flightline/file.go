package main

import (
	"fmt"
	"net/url"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/internal/spec"
)

// fileSinkConfig is the file: sink kind.
type fileSinkConfig struct {
	Format         string `spec:"format" enum:"parquet,jsonl,csv" default:"parquet" doc:"the part files' format (Parquet: snappy)"`
	PartitionBy    string `spec:"partition_by" doc:"Hive-style partitions by this column's value: DIR/<target>/COLUMN=VALUE/"`
	PartitionByDay string `spec:"partition_by_day" doc:"Hive-style partitions by the UTC day of this timestamp or date column: DIR/<target>/COLUMN_day=YYYY-MM-DD/"`
}

var fileSpec = spec.New[fileSinkConfig]("file", "file:DIR?format=parquet|jsonl|csv",
	"exactly-once part files (Parquet, JSON lines or CSV) under DIR/<target>/, committed by create-if-absent records and link(2), fsynced", nil)

func init() {
	sinkKinds["file"] = sinkOf(fileSpec, openFile).at("path", "the directory")
}

func openFile(_ env, u *url.URL, c fileSinkConfig) (flightsink.Sink, func(), error) {
	dir := location(u)
	if dir == "" || u.Host != "" {
		return nil, nil, fmt.Errorf("file: want file:DIR (no //), e.g. file:/data/out or file:out")
	}
	b, err := objsink.NewLocal(dir)
	if err != nil {
		return nil, nil, err
	}
	opts := []objsink.Option{objsink.WithFormat(objsink.Format(c.Format))}
	switch {
	case c.PartitionBy != "" && c.PartitionByDay != "":
		return nil, nil, fmt.Errorf("file: partition_by and partition_by_day: give one")
	case c.PartitionBy != "":
		opts = append(opts, objsink.PartitionBy(c.PartitionBy))
	case c.PartitionByDay != "":
		opts = append(opts, objsink.PartitionByDay(c.PartitionByDay))
	}
	s, err := objsink.New(b, "file sink", opts...)
	if err != nil {
		return nil, nil, err
	}
	return fileSink{s}, func() {}, nil
}

// fileSink is the file sink as `flightline check` describes it.
type fileSink struct{ *objsink.Sink }

func (s fileSink) checkDetail(checkpoints string) string {
	return fmt.Sprintf("exactly-once (%s part files, create-if-absent commit records, link(2), fsync); %s", s.Format(), checkpoints)
}
