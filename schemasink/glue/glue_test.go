package glue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	awsglue "github.com/aws/aws-sdk-go-v2/service/glue"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

func newMoto(t *testing.T, table string, parts ...string) *Registrar {
	endpoint := servicetest.Need(t, "FLIGHTLINE_MOTO_ENDPOINT", "moto (fake AWS Glue)")
	t.Setenv("AWS_ACCESS_KEY_ID", "testing")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "testing")
	r, err := New(context.Background(), Config{Database: "flightline_test", Table: table, Region: "us-east-1",
		Endpoint: endpoint, Location: "s3://lake/" + table, PartitionKeys: parts})
	require.NoError(t, err)
	return r
}

// columns reads the table back from Glue: name → type, partition keys
// apart.
func columns(t *testing.T, r *Registrar) (map[string]string, []string, *awsglue.GetTableOutput) {
	got, err := r.cl.GetTable(context.Background(), &awsglue.GetTableInput{DatabaseName: &r.cfg.Database, Name: &r.cfg.Table})
	require.NoError(t, err)
	cols := map[string]string{}
	for _, c := range got.Table.StorageDescriptor.Columns {
		cols[*c.Name] = *c.Type
	}
	var parts []string
	for _, c := range got.Table.PartitionKeys {
		parts = append(parts, *c.Name+" "+*c.Type)
	}
	return cols, parts, got
}

// The registered table matches what was written, evolves with new
// nullable columns, and refuses incompatible changes naming the column.
func TestRegisterAgainstMoto(t *testing.T) {
	table := fmt.Sprintf("orders_%d", time.Now().UnixNano())
	r := newMoto(t, table, "day")
	ctx := context.Background()
	v1 := arrow.NewSchema([]arrow.Field{
		{Name: "order_id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "item", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "price", Type: &arrow.Decimal128Type{Precision: 12, Scale: 2}, Nullable: true},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "day", Type: arrow.FixedWidthTypes.Date32},
	}, nil)
	require.NoError(t, r.Register(ctx, v1))
	cols, parts, got := columns(t, r)
	require.Equal(t, map[string]string{"order_id": "bigint", "item": "string", "price": "decimal(12,2)", "at": "timestamp",
		"tags": "array<string>"}, cols)
	require.Equal(t, []string{"day date"}, parts)
	sd := got.Table.StorageDescriptor
	require.Equal(t, "s3://lake/"+table, *sd.Location)
	require.Equal(t, "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe", *sd.SerdeInfo.SerializationLibrary)
	require.Equal(t, "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat", *sd.InputFormat)
	require.Equal(t, "EXTERNAL_TABLE", *got.Table.TableType)

	// The same schema again: nothing to do (a fresh Registrar checks Glue).
	require.NoError(t, newMoto(t, table, "day").Register(ctx, v1))

	// A new nullable column is added.
	v2 := arrow.NewSchema(append(v1.Fields(), arrow.Field{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true}), nil)
	require.NoError(t, r.Register(ctx, v2))
	cols, _, _ = columns(t, r)
	require.Equal(t, "string", cols["note"])
	require.Len(t, cols, 6)

	// Incompatible changes are refused, naming the column; the table stays.
	fresh := newMoto(t, table, "day")
	changed := arrow.NewSchema(append(v1.Fields()[1:], arrow.Field{Name: "order_id", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true}), nil)
	err := fresh.Register(ctx, changed)
	require.True(t, errors.Is(err, flightline.ErrSchemaMismatch), "%v", err)
	require.ErrorContains(t, err, `column "order_id": type bigint in Glue, string in the batch`)
	notNull := arrow.NewSchema(append(v2.Fields(), arrow.Field{Name: "qty", Type: arrow.PrimitiveTypes.Int32}), nil)
	require.ErrorContains(t, fresh.Register(ctx, notNull), `column "qty": new and not nullable`)
	dropped := arrow.NewSchema(v2.Fields()[1:], nil)
	require.ErrorContains(t, fresh.Register(ctx, dropped), `column "order_id": in Glue but not in the batch`)
	cols, _, _ = columns(t, r)
	require.Equal(t, "bigint", cols["order_id"])
	require.Len(t, cols, 6)
}

func TestGlueTypes(t *testing.T) {
	for dt, want := range map[arrow.DataType]string{
		arrow.PrimitiveTypes.Int32: "int", arrow.FixedWidthTypes.Boolean: "boolean", arrow.BinaryTypes.Binary: "binary",
		arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float64):      "map<string,double>",
		arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int16}): "struct<a:smallint>",
	} {
		got, err := glueType(dt)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := glueType(arrow.FixedWidthTypes.MonthInterval)
	require.Error(t, err)
}
