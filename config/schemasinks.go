package config

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"go.yaml.in/yaml/v3"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/internal/spec"
	"github.com/flightline/flightline/schemasink/glue"
)

// glueSchemaConfig is the glue kind of the schema_sinks section.
type glueSchemaConfig struct {
	Database      string   `spec:"database" doc:"Glue database (created if missing) (required)"`
	Table         string   `spec:"table" doc:"Glue table to create and evolve (required)"`
	Region        string   `spec:"region" doc:"AWS region (default: the SDK's)"`
	Endpoint      string   `spec:"endpoint" doc:"Glue endpoint URL (default: AWS's for the region)"`
	Location      string   `spec:"location" doc:"s3://BUCKET/PREFIX of the files; default for an s3 sink: where it writes the pipeline's objects"`
	PartitionKeys []string `spec:"partition_keys" doc:"columns registered as partition keys"`
}

var glueSchemaSpec = spec.New[glueSchemaConfig]("glue", "glue: {database: DB, table: T, region: R}",
	"registers the schema a pipeline writes as an AWS Glue Data Catalog table (Parquet SerDe), adding new nullable columns", nil)

var glueSchemaDecl = func() *decl { d := declOf(glueSchemaSpec); d.loc, d.locDoc = "", ""; return d }()

// schemaSinkConf is one entry of schema_sinks.
type schemaSinkConf struct {
	name string
	cfg  glueSchemaConfig
}

func (l *loader) schemaSink(k, v *yaml.Node) (*schemaSinkConf, error) {
	where := secSchemaSinks + "." + k.Value
	if v.Kind != yaml.MappingNode || len(v.Content) != 2 || v.Content[0].Value != "glue" {
		if v.Kind == yaml.MappingNode && len(v.Content) == 2 {
			return nil, l.unknownKey(v.Content[0], where, v.Content[0].Value, []string{"glue"})
		}
		return nil, l.errf(v, "%s: want a mapping with one key, the kind (glue)", where)
	}
	q := url.Values{}
	err := l.eachKey(v.Content[1], where+".glue", func(fk, fv *yaml.Node) error {
		f, ok := glueSchemaDecl.field(fk.Value)
		if !ok {
			return l.unknownKey(fk, where+".glue", fk.Value, glueSchemaDecl.keys())
		}
		if f.Type == spec.List && fv.Kind == yaml.SequenceNode {
			var items []string
			for _, it := range fv.Content {
				s, err := l.scalar(it, where+".glue."+fk.Value)
				if err != nil {
					return err
				}
				items = append(items, s)
			}
			q.Set(fk.Value, strings.Join(items, ","))
			return nil
		}
		s, err := l.scalar(fv, where+".glue."+fk.Value)
		q.Set(fk.Value, s)
		return err
	})
	if err != nil {
		return nil, err
	}
	cfg, err := glueSchemaSpec.Parse(q)
	if err != nil {
		return nil, l.errf(v, "%s: %s", where, reason(err))
	}
	if cfg.Database == "" || cfg.Table == "" {
		return nil, l.errf(v, "%s.glue: database and table are required", where)
	}
	return &schemaSinkConf{name: k.Value, cfg: cfg}, nil
}

// schemaLocation is where p's data sink puts the files the Glue table
// describes: the schema sink's location, or, for an s3 sink, the prefix
// it writes p's objects under: BUCKET/PREFIX/<target>/ (objsink's layout,
// "default" without a target), or BUCKET/PREFIX/[TARGET/]PIPELINE/ with
// commit=at-least-once.
func schemaLocation(p *pipelineConf) (string, error) {
	if loc := p.schemaSink.cfg.Location; loc != "" {
		return loc, nil
	}
	if p.sink.kind != "s3" {
		return "", fmt.Errorf("schema sink %s: give location: the %s sink's files have no default S3 location", p.schemaSink.name, p.sink.kind)
	}
	parts := []string{strings.Trim(p.sink.loc, "/")}
	if p.sink.q.Get("commit") == s3AtLeastOnce {
		if p.target != "" {
			parts = append(parts, p.target)
		}
		parts = append(parts, p.id)
	} else {
		target, err := objsink.Target(flightsink.Pipeline{ID: p.id, Target: p.target})
		if err != nil {
			return "", err
		}
		parts = append(parts, target)
	}
	return "s3://" + strings.Join(parts, "/") + "/", nil
}

// newRegistrar returns the Glue registrar of p's schema sink.
// The schema sink must describe the table p's sink writes
// (pairedGlueConfig).
func newRegistrar(ctx context.Context, p *pipelineConf, log *slog.Logger) (*glue.Registrar, error) {
	c := p.schemaSink.cfg
	cfg, err := pairedGlueConfig(ctx, p, glue.Config{Database: c.Database, Table: c.Table, Region: c.Region,
		Endpoint: c.Endpoint, Location: c.Location, PartitionKeys: c.PartitionKeys})
	if err != nil {
		return nil, err
	}
	if cfg.Location == "" {
		if cfg.Location, err = schemaLocation(p); err != nil {
			return nil, err
		}
	}
	cfg.Region, cfg.Endpoint, cfg.Logger = c.Region, c.Endpoint, log
	return glue.New(ctx, cfg)
}

// withSchemaSink wraps sink so that every writer registers each new schema
// with reg before the batch that carries it is written.
func withSchemaSink(sink flightsink.Sink, reg *glue.Registrar) flightsink.Sink {
	return schemaSink{Sink: sink, reg: reg}
}

type schemaSink struct {
	flightsink.Sink
	reg *glue.Registrar
}

func (s schemaSink) Guarantee() flightsink.Guarantee { return flightsink.GuaranteeOf(s.Sink) }

func (s schemaSink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	w, cp, err := s.Sink.Open(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	return schemaWriter{Writer: w, reg: s.reg}, cp, nil
}

type schemaWriter struct {
	flightsink.Writer
	reg *glue.Registrar
}

// WriteBatch registers rec's schema (a no-op when unchanged) before
// writing it, so the table exists, with every column, when the data lands.
func (w schemaWriter) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if rec != nil && rec.NumRows() > 0 {
		if err := w.reg.Register(ctx, rec.Schema()); err != nil {
			return err
		}
	}
	return w.Writer.WriteBatch(ctx, rec, cp)
}
