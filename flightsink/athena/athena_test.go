package athena_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/athena"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/objsinktest"
	"github.com/flightline/flightline/internal/testkit/s3test"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// bucket is the moto bucket the tests write to.
const bucket = "flightline-athena"

// moto returns the storage options of moto's S3 (creating bucket) and its
// endpoint, which serves Glue too.
func moto(t *testing.T) (objstore.Options, string) {
	t.Helper()
	endpoint := servicetest.Need(t, "FLIGHTLINE_MOTO_ENDPOINT", "moto (fake AWS S3 and Glue)")
	opts := objstore.Options{objstore.EndpointURL: endpoint, objstore.AccessKeyID: "testing",
		objstore.SecretAccessKey: "testing", objstore.Region: "us-east-1", objstore.AllowHTTP: "true"}
	st, err := objstore.NewS3(context.Background(), bucket, "", opts)
	require.NoError(t, err)
	_, _ = st.Client().CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(bucket)})
	return opts, endpoint
}

func fresh(prefix string) string {
	return fmt.Sprintf("%s%d_%06d", prefix, time.Now().Unix()%1e6, rand.IntN(1e6))
}

func newSink(t *testing.T, cfg athena.Config, opts ...athena.Option) *athena.Sink {
	t.Helper()
	st, endpoint := moto(t)
	cfg.Storage, cfg.GlueEndpoint, cfg.Region = st, endpoint, "us-east-1"
	s, err := athena.New(context.Background(), cfg, opts...)
	require.NoError(t, err)
	return s
}

// objects lists every object under the table's LOCATION with the SDK
// (not the sink) and reads the id column of each, failing on any object
// that is not a Parquet part file.
func locationIDs(t *testing.T, location string) []int64 {
	st, _ := moto(t)
	c, err := objstore.NewS3(context.Background(), bucket, "", st)
	require.NoError(t, err)
	prefix := strings.TrimPrefix(location, "s3://"+bucket+"/")
	var ids []int64
	p := awss3.NewListObjectsV2Paginator(c.Client(), &awss3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			require.True(t, strings.HasSuffix(key, ".parquet") && strings.Contains(key, "/part-"), "only part files under LOCATION: %s", key)
			out, err := c.Client().GetObject(context.Background(), &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
			require.NoError(t, err)
			data, err := io.ReadAll(out.Body)
			out.Body.Close()
			require.NoError(t, err)
			ids = append(ids, objsinktest.ParquetIDs(t, data)...)
		}
	}
	return ids
}

func TestIntegrationAthenaConformance(t *testing.T) {
	moto(t)
	location := bucket + "/" + fresh("conf")
	db := fresh("st")
	sinktest.Run(t, sinktest.Harness{
		Guarantee: flightsink.ExactlyOnce,
		Group:     true,
		Parallel:  true,
		NewSink: func(t *testing.T) flightsink.Sink {
			return newSink(t, athena.Config{Location: location, Database: db})
		},
		IDs: func(t *testing.T, p flightsink.Pipeline) []int64 {
			return locationIDs(t, newSink(t, athena.Config{Location: location, Database: db}).Location(p.Target))
		},
	})
}

var eventSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "kind", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func events(t *testing.T, mem memory.Allocator, sc *arrow.Schema, js string) arrow.RecordBatch {
	rec, _, err := array.RecordFromJSON(mem, sc, strings.NewReader(js))
	require.NoError(t, err)
	return rec
}

// check runs testdata/athena_check.py: the table as boto3 and pyarrow see
// it.
type checked struct {
	Columns       [][2]string       `json:"columns"`
	PartitionKeys [][2]string       `json:"partition_keys"`
	Parameters    map[string]string `json:"parameters"`
	SerDe         string            `json:"serde"`
	Location      string            `json:"location"`
	Partitions    []struct {
		Values   []string `json:"values"`
		Location string   `json:"location"`
	} `json:"partitions"`
	Objects []string `json:"objects"`
	IDs     []int64  `json:"ids"`
}

func check(t *testing.T, db, table string) checked {
	py := servicetest.Need(t, "FLIGHTLINE_PYICEBERG_PYTHON", "Python with boto3 and pyarrow (services.sh up iceberg)")
	_, endpoint := moto(t)
	out, err := exec.Command(py, "testdata/athena_check.py", endpoint, db, table).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("athena_check.py: %v\n%s", err, ee.Stderr)
	}
	require.NoError(t, err)
	var c checked
	require.NoError(t, json.Unmarshal(out, &c), string(out))
	sort.Slice(c.IDs, func(i, j int) bool { return c.IDs[i] < c.IDs[j] })
	return c
}

// Three batches over three days (one row without a day) into a table
// partitioned by day, the third adding a nullable column: Glue has the
// table with every column, the day partition key and one partition per
// day at its directory; under LOCATION are Parquet part files only, and
// pyarrow reads every id once.
func TestIntegrationAthenaTableByDay(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	db, location := fresh("db"), bucket+"/"+fresh("day")
	s := newSink(t, athena.Config{Location: location, Database: db, Table: "orders", PartitionByDay: "ts", SchemaEvolution: true})
	w, cp, err := s.Open(ctx, flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	require.Nil(t, cp)
	b1 := events(t, mem, eventSchema, `[{"id": 1, "ts": "2026-01-01T10:00:00Z", "kind": "a"}, {"id": 2, "ts": "2026-01-02T00:00:00Z", "kind": "b"}]`)
	defer b1.Release()
	b2 := events(t, mem, eventSchema, `[{"id": 3, "ts": null, "kind": "a"}, {"id": 4, "ts": "2026-01-01T23:59:59Z", "kind": null}]`)
	defer b2.Release()
	wide := arrow.NewSchema(append(eventSchema.Fields(), arrow.Field{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true}), nil)
	b3 := events(t, mem, wide, `[{"id": 5, "ts": "2026-01-03T12:00:00Z", "kind": "c", "note": "new"}]`)
	defer b3.Release()
	require.NoError(t, w.WriteBatch(ctx, b1, sinktest.CP(2)))
	require.NoError(t, w.WriteBatch(ctx, b2, sinktest.CP(4)))
	require.NoError(t, w.WriteBatch(ctx, b2, sinktest.CP(4)), "a replay")
	require.NoError(t, w.WriteBatch(ctx, b3, sinktest.CP(5)))
	require.NoError(t, w.Close(ctx))

	got := check(t, db, "orders")
	require.Equal(t, [][2]string{{"id", "bigint"}, {"ts", "timestamp"}, {"kind", "string"}, {"note", "string"}}, got.Columns)
	require.Equal(t, [][2]string{{"ts_day", "date"}}, got.PartitionKeys)
	require.Equal(t, "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe", got.SerDe)
	require.Equal(t, "s3://"+location+"/orders/data/", got.Location)
	var parts []string
	for _, p := range got.Partitions {
		parts = append(parts, strings.Join(p.Values, ",")+" "+p.Location)
	}
	require.Equal(t, []string{
		"2026-01-01 " + got.Location + "ts_day=2026-01-01/",
		"2026-01-02 " + got.Location + "ts_day=2026-01-02/",
		"2026-01-03 " + got.Location + "ts_day=2026-01-03/",
		"__HIVE_DEFAULT_PARTITION__ " + got.Location + "ts_day=__HIVE_DEFAULT_PARTITION__/",
	}, parts)
	for _, o := range got.Objects {
		require.Regexp(t, `^ts_day=[^/]+/part-\d{20}(-\d{4})?\.parquet$`, o, "only part files under LOCATION")
	}
	require.Len(t, got.Objects, 5, "b1: two days, b2: two days, b3: one")
	require.Equal(t, []int64{1, 2, 3, 4, 5}, got.IDs)

	// A new process resumes from the checkpoint.
	s2 := newSink(t, athena.Config{Location: location, Database: db, Table: "orders", PartitionByDay: "ts", SchemaEvolution: true})
	_, cp, err = s2.Open(ctx, flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	require.Equal(t, sinktest.CP(5), cp)
}

// Partitioned by a column's value: the column is the partition key (out
// of the columns), values escaped in the directory and plain in Glue.
// With partition projection: the table's projection parameters, no
// partitions registered, the same files.
func TestIntegrationAthenaTableByValueAndProjection(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	db, location := fresh("db"), bucket+"/"+fresh("val")
	rec := events(t, mem, eventSchema, `[{"id": 1, "ts": "2026-01-01T10:00:00Z", "kind": "a/b"}, {"id": 2, "ts": "2026-01-02T00:00:00Z", "kind": "c"}, {"id": 3, "ts": null, "kind": null}]`)
	defer rec.Release()

	s := newSink(t, athena.Config{Location: location, Database: db, Table: "byvalue", PartitionBy: "kind"})
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(3)))
	got := check(t, db, "byvalue")
	require.Equal(t, [][2]string{{"id", "bigint"}, {"ts", "timestamp"}}, got.Columns)
	require.Equal(t, [][2]string{{"kind", "string"}}, got.PartitionKeys)
	var parts []string
	for _, p := range got.Partitions {
		parts = append(parts, strings.Join(p.Values, ",")+" "+strings.TrimPrefix(p.Location, got.Location))
	}
	require.Equal(t, []string{"__HIVE_DEFAULT_PARTITION__ kind=__HIVE_DEFAULT_PARTITION__/", "a/b kind=a%2Fb/", "c kind=c/"}, parts)
	require.Equal(t, []int64{1, 2, 3}, got.IDs)

	s = newSink(t, athena.Config{Location: location, Database: db, Table: "projected", PartitionByDay: "ts", Partitions: athena.Projection, ProjectionFrom: "2025-06-01"})
	w, _, err = s.Open(ctx, flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(3)))
	got = check(t, db, "projected")
	require.Empty(t, got.Partitions, "projection registers no partitions")
	require.Equal(t, "true", got.Parameters["projection.enabled"])
	require.Equal(t, "date", got.Parameters["projection.ts_day.type"])
	require.Equal(t, "2025-06-01,NOW", got.Parameters["projection.ts_day.range"])
	require.Equal(t, "yyyy-MM-dd", got.Parameters["projection.ts_day.format"])
	require.Equal(t, got.Location+"ts_day=${ts_day}/", got.Parameters["storage.location.template"])
	require.Equal(t, []int64{1, 2, 3}, got.IDs)
}

// The pairing: a sink whose settings differ from the existing table's
// (partitioning, location, projection) is refused at Open with
// FAILED_PRECONDITION naming each difference, and nothing is written.
func TestIntegrationAthenaPairingRefused(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	db, location := fresh("db"), bucket+"/"+fresh("pair")
	rec := events(t, mem, eventSchema, `[{"id": 1, "ts": "2026-01-01T10:00:00Z", "kind": "a"}]`)
	defer rec.Release()
	s := newSink(t, athena.Config{Location: location, Database: db, PartitionByDay: "ts"})
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "p", Target: "t"})
	require.NoError(t, err)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(1)))

	for name, c := range map[string]struct {
		cfg  athena.Config
		want []string
	}{
		"partitioning": {athena.Config{Location: location, PartitionBy: "kind"},
			[]string{`partition keys are [ts_day date] in Glue, the sink partitions by [kind]`}},
		"unpartitioned": {athena.Config{Location: location}, []string{`partition keys are [ts_day date] in Glue, the sink partitions by []`}},
		"location": {athena.Config{Location: location + "x", PartitionByDay: "ts"},
			[]string{`location is "s3://` + location + `/t/data/" in Glue, the sink writes to "s3://` + location + `x/t/data/"`}},
		"projection": {athena.Config{Location: location, PartitionByDay: "ts", Partitions: athena.Projection},
			[]string{`parameter projection.enabled is missing in Glue, the sink sets "true"`, `parameter storage.location.template is missing in Glue`}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Database = db
			other := newSink(t, cfg)
			_, _, err := other.Open(ctx, flightsink.Pipeline{ID: "q", Target: "t"})
			require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
			require.Equal(t, codes.FailedPrecondition, flighterr.Code(err))
			for _, w := range c.want {
				require.ErrorContains(t, err, w)
			}
			t.Log(err)
			cp, err := other.Checkpoint(ctx, flightsink.Pipeline{ID: "q", Target: "t"})
			require.NoError(t, err)
			require.Nil(t, cp, "the refused pipeline committed nothing")
		})
	}
	require.Equal(t, []int64{1}, locationIDs(t, s.Location("t")))
}

// Bad input and bad endpoints: a schema Glue cannot hold and a partition
// column Athena cannot partition by are INVALID_ARGUMENT with nothing
// committed; an unreachable S3 or Glue is UNAVAILABLE; wrong S3
// credentials (versitygw checks them; moto's Glue accepts any) are
// UNAUTHENTICATED.
func TestIntegrationAthenaErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := context.Background()
	db, location := fresh("db"), bucket+"/"+fresh("err")

	unsigned := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "span", Type: arrow.PrimitiveTypes.Uint64, Nullable: true}}, nil)
	b := array.NewRecordBuilder(mem, unsigned)
	b.Field(0).(*array.Int64Builder).Append(1)
	b.Field(1).(*array.Uint64Builder).Append(3) // Parquet has uint64, Hive does not
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	s := newSink(t, athena.Config{Location: location, Database: db})
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "p", Target: "unmappable"})
	require.NoError(t, err)
	err = w.WriteBatch(ctx, rec, sinktest.CP(1))
	require.Equal(t, codes.InvalidArgument, flighterr.Code(err), "%v", err)
	require.ErrorContains(t, err, `column "span"`)
	cp, err := s.Checkpoint(ctx, flightsink.Pipeline{ID: "p", Target: "unmappable"})
	require.NoError(t, err)
	require.Nil(t, cp)
	require.Empty(t, locationIDs(t, s.Location("unmappable")))
	_, err = s.CheckTable(ctx, "unmappable")
	require.NoError(t, err, "no table was created")

	tsRec := events(t, mem, eventSchema, `[{"id": 1, "ts": "2026-01-01T10:00:00Z", "kind": "a"}]`)
	defer tsRec.Release()
	s = newSink(t, athena.Config{Location: location, Database: db, PartitionBy: "ts"})
	w, _, err = s.Open(ctx, flightsink.Pipeline{ID: "p", Target: "byts"})
	require.NoError(t, err)
	err = w.WriteBatch(ctx, tsRec, sinktest.CP(1))
	require.Equal(t, codes.InvalidArgument, flighterr.Code(err), "%v", err)
	require.ErrorContains(t, err, "partition by day for a timestamp")
	require.Empty(t, locationIDs(t, s.Location("byts")))

	_, _, err = newSink(t, athena.Config{Location: location, Database: db}).Open(ctx, flightsink.Pipeline{ID: "p", Target: "Bad-Name"})
	require.Equal(t, codes.InvalidArgument, flighterr.Code(err), "%v", err)

	// Unreachable: Glue (S3 up), then S3.
	st, _ := moto(t)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	down, err := athena.New(ctx, athena.Config{Location: location, Storage: st, GlueEndpoint: "http://127.0.0.1:1", Database: db})
	require.NoError(t, err)
	_, _, err = down.Open(cctx, flightsink.Pipeline{ID: "p"})
	require.Equal(t, codes.Unavailable, flighterr.Code(err), "%v", err)
	require.ErrorContains(t, err, "cannot reach Glue")
	t.Log(err)
	noS3 := objstore.Options{}
	for k, v := range st {
		noS3[k] = v
	}
	noS3[objstore.EndpointURL] = "http://127.0.0.1:1"
	_, glueAt := moto(t)
	down, err = athena.New(ctx, athena.Config{Location: location, Storage: noS3, GlueEndpoint: glueAt, Database: db})
	require.NoError(t, err)
	err = down.Ping(cctx)
	require.Equal(t, codes.Unavailable, flighterr.Code(err), "%v", err)
	_, _, err = down.Open(cctx, flightsink.Pipeline{ID: "p"})
	require.Equal(t, codes.Unavailable, flighterr.Code(err), "%v", err)

	// Wrong S3 credentials, on versitygw.
	vgw := s3test.Options(t)
	vgw[objstore.SecretAccessKey] = "wrong"
	bad, err := athena.New(ctx, athena.Config{Location: s3test.Bucket + "/athena", Storage: vgw, GlueEndpoint: glueAt, Database: db})
	require.NoError(t, err)
	_, _, err = bad.Open(cctx, flightsink.Pipeline{ID: "p"})
	require.Equal(t, codes.Unauthenticated, flighterr.Code(err), "%v", err)
	require.ErrorContains(t, err, "credentials refused")
	t.Log(err)
}

func TestOptionsChecked(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		cfg  athena.Config
		want string
	}{
		{athena.Config{Location: "b/p"}, "database"},
		{athena.Config{Database: "d"}, "want BUCKET/PREFIX"},
		{athena.Config{Location: "b/p", Database: "d", Table: "Orders"}, `table "Orders"`},
		{athena.Config{Location: "b/p", Database: "d", PartitionBy: "a", PartitionByDay: "b"}, "give one"},
		{athena.Config{Location: "b/p", Database: "d", PartitionBy: "a", Partitions: athena.Projection}, "needs partition_by_day"},
		{athena.Config{Location: "b/p", Database: "d", PartitionByDay: "a", Partitions: athena.Projection, ProjectionFrom: "2026-1-1"}, "YYYY-MM-DD"},
		{athena.Config{Location: "b/p", Database: "d", Partitions: "sometimes"}, "register or projection"},
		{athena.Config{Location: "b/p", Database: "d", GlueEndpoint: "glue.local"}, "http(s)://"},
		{athena.Config{Location: "b/p", Database: "d", Storage: objstore.Options{"colour": "blue"}}, "unknown storage option"},
	} {
		_, err := athena.New(ctx, c.cfg)
		require.ErrorIs(t, err, flightline.ErrInvalidInput, c.want)
		require.ErrorContains(t, err, c.want)
	}
	s, err := athena.New(ctx, athena.Config{Location: "lake/events/", Database: "d", Region: "eu-west-1"})
	require.NoError(t, err)
	require.Equal(t, "s3://lake/events/orders/data/", s.Location("orders"))
	require.Equal(t, flightsink.ExactlyOnce, flightsink.GuaranteeOf(s))
}
