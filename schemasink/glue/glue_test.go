package glue

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	awsglue "github.com/aws/aws-sdk-go-v2/service/glue"
	"github.com/aws/smithy-go"
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
		arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Float64):                               "map<string,double>",
		arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int16}):                          "struct<a:smallint>",
		&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}: "string",
	} {
		got, err := glueType(dt)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := glueType(arrow.FixedWidthTypes.MonthInterval)
	require.Error(t, err)
}

// Glue's error codes map to flightline's sentinels (moto accepts any
// credentials, so the codes real Glue sends for refused ones are fed in
// here as Glue documents them).
func TestErrorClasses(t *testing.T) {
	r := &Registrar{cfg: Config{Database: "d", Table: "t"}}
	for code, want := range map[string]error{
		"UnrecognizedClientException":     flightline.ErrUnauthenticated,
		"InvalidSignatureException":       flightline.ErrUnauthenticated,
		"ExpiredTokenException":           flightline.ErrUnauthenticated,
		"AccessDeniedException":           flightline.ErrPermissionDenied,
		"ThrottlingException":             flightline.ErrUnavailable,
		"InternalServiceException":        flightline.ErrUnavailable,
		"InvalidInputException":           flightline.ErrInvalidInput,
		"ConcurrentModificationException": flightline.ErrConflict,
		"EntityNotFoundException":         flightline.ErrNotFound,
	} {
		err := r.errorf(&smithy.GenericAPIError{Code: code, Message: "m"}, "get table")
		require.ErrorIs(t, err, want, code)
		require.ErrorContains(t, err, "glue get table d.t", code)
	}
	err := r.errorf(&net.OpError{Op: "dial", Err: errors.New("connection refused")}, "get table")
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	err = r.errorf(&credentialsError{errors.New("no EC2 IMDS role found")}, "get table")
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
	require.ErrorContains(t, err, "no AWS credentials found")
	require.False(t, errors.Is(r.errorf(context.Canceled, "x"), flightline.ErrUnavailable))
}

// The pairing: a registrar whose location or partition keys differ from
// the existing table's is refused by Register, Verify and Check with
// FAILED_PRECONDITION naming each difference, and the table stays; day
// partitions add the date key COLUMN_day; partitions are registered once.
func TestPairingAndPartitionsAgainstMoto(t *testing.T) {
	table := fmt.Sprintf("pairs_%d", time.Now().UnixNano())
	ctx := context.Background()
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true}}, nil)
	r := newMoto(t, table)
	r.cfg.DayPartition = "ts"
	require.NoError(t, r.Verify(ctx), "no table yet: nothing to compare")
	require.NoError(t, r.Register(ctx, sc))
	_, parts, _ := columns(t, r)
	require.Equal(t, []string{"ts_day date"}, parts)
	ps := []Partition{{Values: []string{"2026-01-01"}, Dir: "ts_day=2026-01-01"}, {Values: []string{"2026-01-02"}, Dir: "ts_day=2026-01-02"}}
	require.NoError(t, r.AddPartitions(ctx, ps))
	require.NoError(t, newRegistrarLike(t, r).AddPartitions(ctx, ps[:1]), "an existing partition is left alone")
	got, err := r.cl.GetPartitions(ctx, &awsglue.GetPartitionsInput{DatabaseName: &r.cfg.Database, TableName: &r.cfg.Table})
	require.NoError(t, err)
	require.Len(t, got.Partitions, 2)
	for _, p := range got.Partitions {
		require.Equal(t, "s3://lake/"+table+"/ts_day="+p.Values[0]+"/", *p.StorageDescriptor.Location)
	}

	other := newMoto(t, table, "id")
	other.cfg.Location = "s3://elsewhere/" + table
	err = other.Register(ctx, sc)
	require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
	require.ErrorContains(t, err, `location is "s3://lake/`+table+`" in Glue, the sink writes to "s3://elsewhere/`+table+`"`)
	require.ErrorContains(t, err, `partition keys are [ts_day date] in Glue, the sink partitions by [id]`)
	require.ErrorIs(t, other.Verify(ctx), flightline.ErrFailedPrecondition)
	_, err = other.Check(ctx)
	require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
	_, parts, _ = columns(t, r)
	require.Equal(t, []string{"ts_day date"}, parts, "the table stays")
}

// newRegistrarLike is a fresh Registrar (a restarted process) of r's table.
func newRegistrarLike(t *testing.T, r *Registrar) *Registrar {
	n, err := New(context.Background(), r.cfg)
	require.NoError(t, err)
	n.last, n.cols = r.last, r.cols
	return n
}

// Registrars of one table in several processes (or pipelines) that find
// it missing at once: one creates it, the others find it created and
// carry on.
func TestConcurrentCreateAgainstMoto(t *testing.T) {
	table := fmt.Sprintf("racing_%d", time.Now().UnixNano())
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	errs := make(chan error, 8)
	for range 8 {
		r := newMoto(t, table)
		go func() { errs <- r.Register(context.Background(), sc) }()
	}
	for range 8 {
		require.NoError(t, <-errs)
	}
}
