// Package glue registers the Arrow schema a pipeline writes as a table in
// the AWS Glue Data Catalog, so Athena, Trino or Spark can query the
// Parquet files the pipeline lands on S3 without registering them by hand.
//
// Register creates the table on the first schema it sees and, when a later
// schema adds nullable columns, updates it to match; any other change (a
// column dropped, a type changed, a new non-nullable column) is an error
// naming the column, wrapping flightline.ErrSchemaMismatch, and the table
// is left as it was. The table is an EXTERNAL_TABLE over Parquet
// (ParquetHiveSerDe) at the configured S3 location; partition columns are
// registered as partition keys.
package glue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	awsglue "github.com/aws/aws-sdk-go-v2/service/glue"
	"github.com/aws/aws-sdk-go-v2/service/glue/types"

	"github.com/flightline/flightline"
)

// Config names the table and where its data is.
type Config struct {
	Database, Table string
	Region          string
	Endpoint        string   // "" : the AWS default for the region
	Location        string   // s3://bucket/prefix of the Parquet files
	PartitionKeys   []string // columns the sink partitions by
	Logger          *slog.Logger
}

// Registrar keeps one Glue table in step with the schema written. Safe for
// concurrent use.
type Registrar struct {
	cfg Config
	cl  *awsglue.Client
	log *slog.Logger

	mu   sync.Mutex
	last *arrow.Schema // last schema registered; nil before the first
}

// New returns a Registrar; credentials come from the SDK's default chain
// (AWS_ACCESS_KEY_ID, …). It does not contact Glue.
func New(ctx context.Context, cfg Config) (*Registrar, error) {
	if cfg.Database == "" || cfg.Table == "" || cfg.Location == "" {
		return nil, fmt.Errorf("%w: glue: database, table and location are required", flightline.ErrInvalidInput)
	}
	opts := []func(*awsconfig.LoadOptions) error{}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("glue: %w", err)
	}
	cl := awsglue.NewFromConfig(ac, func(o *awsglue.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Registrar{cfg: cfg, cl: cl, log: log}, nil
}

// Register makes the table match sc: created if missing, updated with
// sc's new nullable columns, left alone when nothing changed. A schema
// equal to the last one registered costs no call.
func (r *Registrar) Register(ctx context.Context, sc *arrow.Schema) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last != nil && r.last.Equal(sc) {
		return nil
	}
	cols, parts, err := r.columns(sc)
	if err != nil {
		return err
	}
	got, err := r.cl.GetTable(ctx, &awsglue.GetTableInput{DatabaseName: &r.cfg.Database, Name: &r.cfg.Table})
	var nf *types.EntityNotFoundException
	switch {
	case errors.As(err, &nf):
		if err := r.create(ctx, cols, parts); err != nil {
			return err
		}
		r.log.Info("glue: created table", "database", r.cfg.Database, "table", r.cfg.Table, "columns", len(cols), "location", r.cfg.Location)
	case err != nil:
		return fmt.Errorf("glue: get table %s.%s: %w", r.cfg.Database, r.cfg.Table, err)
	default:
		added, err := evolve(got.Table, sc, cols)
		if err != nil {
			return fmt.Errorf("%w: glue table %s.%s: %v", flightline.ErrSchemaMismatch, r.cfg.Database, r.cfg.Table, err)
		}
		if len(added) > 0 {
			in := r.input(append(slices.Clone(got.Table.StorageDescriptor.Columns), added...), got.Table.PartitionKeys)
			if _, err := r.cl.UpdateTable(ctx, &awsglue.UpdateTableInput{DatabaseName: &r.cfg.Database, TableInput: in}); err != nil {
				return fmt.Errorf("glue: update table %s.%s: %w", r.cfg.Database, r.cfg.Table, err)
			}
			names := make([]string, len(added))
			for i, c := range added {
				names[i] = *c.Name
			}
			r.log.Info("glue: added columns", "database", r.cfg.Database, "table", r.cfg.Table, "columns", strings.Join(names, ","))
		}
	}
	r.last = sc
	return nil
}

func (r *Registrar) create(ctx context.Context, cols, parts []types.Column) error {
	_, err := r.cl.CreateTable(ctx, &awsglue.CreateTableInput{DatabaseName: &r.cfg.Database, TableInput: r.input(cols, parts)})
	var nf *types.EntityNotFoundException
	if errors.As(err, &nf) { // the database is missing: create it, once
		if _, err := r.cl.CreateDatabase(ctx, &awsglue.CreateDatabaseInput{DatabaseInput: &types.DatabaseInput{Name: &r.cfg.Database}}); err != nil {
			var exists *types.AlreadyExistsException
			if !errors.As(err, &exists) {
				return fmt.Errorf("glue: create database %s: %w", r.cfg.Database, err)
			}
		}
		_, err = r.cl.CreateTable(ctx, &awsglue.CreateTableInput{DatabaseName: &r.cfg.Database, TableInput: r.input(cols, parts)})
	}
	if err != nil {
		return fmt.Errorf("glue: create table %s.%s: %w", r.cfg.Database, r.cfg.Table, err)
	}
	return nil
}

func (r *Registrar) input(cols, parts []types.Column) *types.TableInput {
	return &types.TableInput{
		Name:      &r.cfg.Table,
		TableType: aws.String("EXTERNAL_TABLE"),
		Parameters: map[string]string{"classification": "parquet", "EXTERNAL": "TRUE",
			"flightline.managed": "true"},
		PartitionKeys: parts,
		StorageDescriptor: &types.StorageDescriptor{
			Columns:      cols,
			Location:     &r.cfg.Location,
			InputFormat:  aws.String("org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"),
			OutputFormat: aws.String("org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"),
			SerdeInfo: &types.SerDeInfo{SerializationLibrary: aws.String("org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"),
				Parameters: map[string]string{"serialization.format": "1"}},
		},
	}
}

// columns maps sc to Glue columns, the partition keys apart.
func (r *Registrar) columns(sc *arrow.Schema) (cols, parts []types.Column, err error) {
	for _, f := range sc.Fields() {
		t, err := glueType(f.Type)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: glue: column %q: %v", flightline.ErrSchemaMismatch, f.Name, err)
		}
		c := types.Column{Name: aws.String(f.Name), Type: aws.String(t)}
		if slices.Contains(r.cfg.PartitionKeys, f.Name) {
			parts = append(parts, c)
		} else {
			cols = append(cols, c)
		}
	}
	return cols, parts, nil
}

// evolve returns the columns of want (typed as cols) that t lacks, or an
// error naming the first column whose change is not compatible.
func evolve(t *types.Table, sc *arrow.Schema, cols []types.Column) ([]types.Column, error) {
	have := map[string]string{}
	for _, c := range t.StorageDescriptor.Columns {
		have[strings.ToLower(*c.Name)] = *c.Type
	}
	for _, c := range t.PartitionKeys {
		have[strings.ToLower(*c.Name)] = *c.Type
	}
	want := map[string]bool{}
	var added []types.Column
	for _, c := range cols {
		name := strings.ToLower(*c.Name)
		want[name] = true
		old, ok := have[name]
		switch {
		case ok && old != *c.Type:
			return nil, fmt.Errorf("column %q: type %s in Glue, %s in the batch", *c.Name, old, *c.Type)
		case !ok:
			if i := sc.FieldIndices(*c.Name); len(i) == 1 && !sc.Field(i[0]).Nullable {
				return nil, fmt.Errorf("column %q: new and not nullable; only nullable columns may be added", *c.Name)
			}
			added = append(added, c)
		}
	}
	for _, c := range t.StorageDescriptor.Columns {
		if !want[strings.ToLower(*c.Name)] {
			return nil, fmt.Errorf("column %q: in Glue but not in the batch", *c.Name)
		}
	}
	return added, nil
}

// glueType is the Hive type name of an Arrow type, as Glue stores it.
func glueType(dt arrow.DataType) (string, error) {
	switch t := dt.(type) {
	case *arrow.BooleanType:
		return "boolean", nil
	case *arrow.Int8Type:
		return "tinyint", nil
	case *arrow.Int16Type, *arrow.Uint8Type:
		return "smallint", nil
	case *arrow.Int32Type, *arrow.Uint16Type:
		return "int", nil
	case *arrow.Int64Type, *arrow.Uint32Type:
		return "bigint", nil
	case *arrow.Float32Type:
		return "float", nil
	case *arrow.Float64Type:
		return "double", nil
	case *arrow.StringType, *arrow.LargeStringType, *arrow.StringViewType:
		return "string", nil
	case *arrow.BinaryType, *arrow.LargeBinaryType, *arrow.BinaryViewType, *arrow.FixedSizeBinaryType:
		return "binary", nil
	case *arrow.Date32Type, *arrow.Date64Type:
		return "date", nil
	case *arrow.TimestampType:
		return "timestamp", nil
	case *arrow.Decimal128Type:
		return fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale), nil
	case *arrow.ListType:
		e, err := glueType(t.Elem())
		return "array<" + e + ">", err
	case *arrow.LargeListType:
		e, err := glueType(t.Elem())
		return "array<" + e + ">", err
	case *arrow.MapType:
		k, err := glueType(t.KeyType())
		if err != nil {
			return "", err
		}
		v, err := glueType(t.ItemType())
		return "map<" + k + "," + v + ">", err
	case *arrow.StructType:
		parts := make([]string, t.NumFields())
		for i, f := range t.Fields() {
			ft, err := glueType(f.Type)
			if err != nil {
				return "", fmt.Errorf("field %q: %w", f.Name, err)
			}
			parts[i] = f.Name + ":" + ft
		}
		return "struct<" + strings.Join(parts, ",") + ">", nil
	}
	return "", fmt.Errorf("arrow type %s has no Glue type", dt)
}

// Check asks Glue about the table without changing anything: it reports
// whether the table exists (and its column count) or will be created,
// exercising reachability and credentials.
func (r *Registrar) Check(ctx context.Context) (string, error) {
	got, err := r.cl.GetTable(ctx, &awsglue.GetTableInput{DatabaseName: &r.cfg.Database, Name: &r.cfg.Table})
	var nf *types.EntityNotFoundException
	switch {
	case errors.As(err, &nf):
		return fmt.Sprintf("reachable; table %s.%s will be created on the first batch", r.cfg.Database, r.cfg.Table), nil
	case err != nil:
		return "", fmt.Errorf("glue: get table %s.%s: %w", r.cfg.Database, r.cfg.Table, err)
	}
	n := 0
	if got.Table.StorageDescriptor != nil {
		n = len(got.Table.StorageDescriptor.Columns)
	}
	return fmt.Sprintf("reachable; table %s.%s has %d columns", r.cfg.Database, r.cfg.Table, n), nil
}
