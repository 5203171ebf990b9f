package config

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/flightline/flightline/flightsink"
	sinkiceberg "github.com/flightline/flightline/flightsink/iceberg"
	"github.com/flightline/flightline/internal/spec"
)

// Iceberg sinks take the warehouse after "iceberg:" and the catalog, table
// and file-IO properties as query keys:
//
//	iceberg:/data/warehouse?table=analytics.orders
//	iceberg:s3://lake/warehouse?uri=/var/lib/flightline/catalog.db&table=analytics.orders&s3.endpoint=http://127.0.0.1:7070
//	iceberg:s3://lake/warehouse?catalog=glue&table=analytics.orders&glue.region=eu-west-1
//	iceberg:?catalog=rest&uri=https://catalog.example.com&table=analytics.orders&credential=ID:SECRET
//
// Put S3 credentials in the environment (AWS_ACCESS_KEY_ID, ...) rather
// than on the command line.

// icebergIOKeys are the iceberg-go file-IO properties the kind passes on.
var icebergIOKeys = &spec.Extra{
	Doc: "iceberg-go's properties: file IO of an s3:// warehouse (s3.*), catalog=glue's (glue.*) and catalog=rest's (credential, token, oauth2-server-uri, prefix, rest.*, …); credentials are better left to the environment",
	Keys: slices.Concat([]string{"s3.endpoint", "s3.region", "s3.access-key-id", "s3.secret-access-key", "s3.session-token", "s3.force-virtual-addressing"},
		sinkiceberg.GlueKeys, sinkiceberg.RESTKeys),
	Secret: slices.Concat([]string{"s3.secret-access-key", "s3.session-token", "glue.secret-access-key", "glue.session-token"},
		sinkiceberg.RESTSecretKeys),
}

// icebergSinkConfig is the iceberg: sink kind.
type icebergSinkConfig struct {
	Catalog         string            `spec:"catalog" default:"sql" enum:"sql,glue,rest" doc:"the catalog: sql, iceberg-go's SQL (JDBC-layout) catalog on SQLite, which pyiceberg's SqlCatalog reads too; glue, the AWS Glue Data Catalog (a namespace is a Glue database; the warehouse must be s3://; glue.region, glue.endpoint, … keys), which Athena and pyiceberg's GlueCatalog read; rest, an Iceberg REST catalog at uri (the server places new tables; the warehouse, optional, is sent as its warehouse property; credential, token, … keys)"`
	URI             string            `spec:"uri" doc:"the SQLite file of the sql catalog (default: WAREHOUSE/catalog.db for a local warehouse; required for s3://); for catalog=rest, the REST catalog's endpoint http(s)://HOST[:PORT][/PATH] (required)"`
	CatalogName     string            `spec:"catalog_name" default:"flightline" doc:"the catalog's name in the sql catalog's tables (pyiceberg's SqlCatalog name)"`
	Table           string            `spec:"table" default:"flightline.events" doc:"the default table, namespace.table; a pipeline's target names a table in the same namespace"`
	SchemaEvolution bool              `spec:"schema_evolution" default:"false" doc:"add new nullable columns to the table (and accept batches without optional columns) instead of refusing the batch"`
	Partition       string            `spec:"partition" doc:"the partition spec of tables the sink creates: comma-separated COLUMN, identity(COLUMN), year|month|day|hour(COLUMN), bucket(N, COLUMN), truncate(W, COLUMN), e.g. day(ts), bucket(16, id); default: unpartitioned"`
	ExpireOlderThan time.Duration     `spec:"expire_snapshots_older_than" default:"0s" doc:"expire snapshots older than this (keeping the current one), at most every ten minutes after a commit, so the table's metadata stays bounded; 0s: never"`
	IO              map[string]string `spec:",extra"`
}

var icebergSinkSpec = spec.New[icebergSinkConfig]("iceberg", "iceberg:WAREHOUSE?table=NS.TABLE&uri=CATALOG.db",
	"exactly-once Apache Iceberg tables (checkpoint in the snapshot summary; a target is a table in the namespace)", icebergIOKeys)

func init() {
	sinkKinds["iceberg"] = sinkOf(icebergSinkSpec, openIcebergSink).at("warehouse", "the warehouse: a local path or s3://BUCKET/PREFIX; for catalog=rest, optional: the warehouse property the REST catalog is asked for (a location or a name, as the server takes it)")
}

func openIcebergSink(e env, u *url.URL, c icebergSinkConfig) (flightsink.Sink, func(), error) {
	loc := location(u)
	if u.Scheme == "iceberg" && u.Host != "" {
		loc = "" // iceberg://x is not a warehouse
	}
	if loc == "" && c.Catalog != "rest" {
		return nil, nil, fmt.Errorf("iceberg: want iceberg:PATH or iceberg:s3://BUCKET/PREFIX (the warehouse)")
	}
	io, glue, rest := map[string]string{}, map[string]string{}, map[string]string{}
	for k, v := range c.IO {
		switch {
		case strings.HasPrefix(k, "glue."):
			glue[k] = v
		case slices.Contains(sinkiceberg.RESTKeys, k):
			rest[k] = v
		default:
			io[k] = v
		}
	}
	cfg := sinkiceberg.Config{Warehouse: loc, Table: c.Table, CatalogName: c.CatalogName, SchemaEvolution: c.SchemaEvolution,
		Properties: io, ExpireSnapshotsOlderThan: c.ExpireOlderThan, Partition: c.Partition, SQLite: c.URI}
	switch {
	case c.Catalog == "glue":
		cfg.Catalog, cfg.Glue = "glue", glue
	case len(glue) > 0:
		return nil, nil, fmt.Errorf("iceberg: the glue.* keys are for catalog=glue")
	}
	switch {
	case c.Catalog == "rest" && c.URI == "":
		return nil, nil, fmt.Errorf("iceberg: catalog=rest needs uri, the REST catalog's endpoint")
	case c.Catalog == "rest":
		cfg.Catalog, cfg.URI, cfg.REST, cfg.SQLite = "rest", c.URI, rest, ""
	case len(rest) > 0:
		return nil, nil, fmt.Errorf("iceberg: the %s keys are for catalog=rest", strings.Join(slices.Sorted(maps.Keys(rest)), ", "))
	}
	s, err := sinkiceberg.New(e.ctx, cfg, sinkiceberg.Logger(e.log))
	if err != nil {
		return nil, nil, err
	}
	return s, func() { s.Close() }, nil
}
