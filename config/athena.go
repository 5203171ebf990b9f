package config

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/athena"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/spec"
	"github.com/flightline/flightline/schemasink/glue"
)

// The athena sink takes BUCKET/PREFIX after "athena:", the Glue table and
// the partitions as keys, the AWS_* storage options as for s3:
//
//	athena:lake/events?database=analytics&table=orders&partition_by_day=ts&region=eu-west-1
//
// One entry is the s3 kind's exactly-once Parquet files (under
// PREFIX/TABLE/data/, the bookkeeping outside it) and the glue schema
// sink's table over them, partitions included (flightsink/athena).

// athenaSinkConfig is the athena: sink kind.
type athenaSinkConfig struct {
	Database        string            `spec:"database" doc:"the Glue database (created if missing) (required)"`
	Table           string            `spec:"table" default:"events" doc:"the table of a pipeline without a target; a target names another table of the database (lowercase letters, digits and _)"`
	Region          string            `spec:"region" doc:"AWS region of Glue and S3 (default: AWS_REGION, or the SDK's)"`
	GlueEndpoint    string            `spec:"glue_endpoint" doc:"Glue endpoint URL (default: AWS's for the region)"`
	PartitionBy     string            `spec:"partition_by" doc:"Hive partitions by this string, integer, boolean or date column's value: PREFIX/TABLE/data/COLUMN=VALUE/, the column a partition key"`
	PartitionByDay  string            `spec:"partition_by_day" doc:"Hive partitions by the UTC day of this timestamp or date column: PREFIX/TABLE/data/COLUMN_day=YYYY-MM-DD/, partition key COLUMN_day (date)"`
	Partitions      string            `spec:"partitions" enum:"register,projection" default:"register" doc:"register: each partition a batch writes into is registered in Glue before its commit; projection: Athena's partition projection of the days (partition_by_day only; no null day)"`
	ProjectionStart string            `spec:"projection_start" doc:"the first day of partition projection's range, YYYY-MM-DD (default 1970-01-01)"`
	SchemaEvolution bool              `spec:"schema_evolution" default:"false" doc:"accept batches that add nullable columns at the end, adding them to the Glue table, instead of refusing them"`
	Storage         map[string]string `spec:",extra"`
}

var athenaSinkSpec = spec.New[athenaSinkConfig]("athena", "athena:BUCKET/PREFIX?database=DB&table=T&partition_by_day=COLUMN&AWS_…",
	"exactly-once Parquet tables for Athena: part files under BUCKET/PREFIX/TABLE/data/ (committed by If-None-Match: * records kept outside it), the Glue table and its partitions registered before each commit (a target is a table)", storageKeys)

func init() {
	sinkKinds["athena"] = sinkOf(athenaSinkSpec, openAthenaSink).at("prefix", "BUCKET/PREFIX the tables go under")
}

// athenaConfig is c's sink Config at location, the storage options aside.
func athenaConfig(location string, c athenaSinkConfig) athena.Config {
	return athena.Config{Location: location, Database: c.Database, Table: c.Table, Region: c.Region,
		GlueEndpoint: c.GlueEndpoint, PartitionBy: c.PartitionBy, PartitionByDay: c.PartitionByDay,
		Partitions: athena.Partitions(c.Partitions), ProjectionFrom: c.ProjectionStart, SchemaEvolution: c.SchemaEvolution}
}

func openAthenaSink(e env, u *url.URL, c athenaSinkConfig) (flightsink.Sink, func(), error) {
	if u.Host != "" || u.Opaque == "" {
		return nil, nil, fmt.Errorf("athena: want athena:BUCKET/PREFIX (no //), e.g. athena:my-bucket/lake")
	}
	cfg := athenaConfig(u.Opaque, c)
	cfg.Storage = objstore.Options(c.Storage)
	s, err := athena.New(e.ctx, cfg, athena.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return athenaSink{s}, func() { _ = s.Close() }, nil
}

// athenaSink is the athena kind as `flightline check` describes it.
type athenaSink struct{ *athena.Sink }

func (athenaSink) pingWhat() string {
	return "HEAD of the bucket with the configured credentials; If-None-Match: * honoured (a probe object created twice, then removed); the Glue table reachable and, if it exists, matching the sink's location, partition keys and parameters"
}

func (s athenaSink) checkDetail(checkpoints string) string {
	return "exactly-once (Parquet part files under each table's LOCATION, If-None-Match: * commit records outside it, Glue table and partitions registered before each commit); " + checkpoints
}

// pairedGlueConfig is the Glue configuration of p's schema sink (location
// resolved), checked against p's data sink: the two must describe the
// same table, or the pipeline refuses to start naming each difference. An
// athena sink registers its table itself: a schema sink beside it must
// agree with it. An s3 sink's partitions must be the schema sink's
// partition keys (COLUMN for partition_by, COLUMN_day for
// partition_by_day), and a location given must be where it writes.
func pairedGlueConfig(ctx context.Context, p *pipelineConf, c glue.Config) (glue.Config, error) {
	fail := func(diffs []string) error {
		return fmt.Errorf("pipeline %s: schema sink %s and sink %s (%s) do not describe the same table: %s", p.name,
			p.schemaSink.name, p.sink.name, p.sink.kind, strings.Join(diffs, "; "))
	}
	switch p.sink.kind {
	case "athena":
		ac, err := athenaSinkSpec.Parse(p.sink.q)
		if err != nil {
			return c, err
		}
		s, err := athena.New(ctx, athenaConfig(p.sink.loc, ac))
		if err != nil {
			return c, err
		}
		table := p.target
		if table == "" {
			table = ac.Table
		}
		want := s.GlueConfig(table)
		if c.Location == "" {
			c.Location = want.Location
		}
		if diffs := want.Differences(c); len(diffs) > 0 {
			return c, fail(diffs)
		}
		return want, nil
	case "s3":
		by, day := p.sink.q.Get("partition_by"), p.sink.q.Get("partition_by_day")
		var want []string
		switch {
		case by != "":
			want = []string{by}
		case day != "":
			want = []string{day + glue.DaySuffix}
		}
		if strings.Join(want, ",") != strings.Join(c.PartitionKeys, ",") {
			return c, fail([]string{fmt.Sprintf("the schema sink's partition_keys are [%s], the sink partitions by [%s]",
				strings.Join(c.PartitionKeys, ", "), strings.Join(want, ", "))})
		}
		if day != "" {
			c.PartitionKeys, c.DayPartition = nil, day
		}
		if c.Location != "" {
			sc := *p.schemaSink
			sc.cfg.Location = ""
			q := *p
			q.schemaSink = &sc
			if def, err := schemaLocation(&q); err == nil && strings.TrimSuffix(def, "/") != strings.TrimSuffix(c.Location, "/") {
				return c, fail([]string{fmt.Sprintf("the schema sink's location is %q, the sink writes to %q", c.Location, def)})
			}
		}
	}
	return c, nil
}
