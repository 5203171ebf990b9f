package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/integration"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/s3test"
)

// testLocation returns a fresh bucket/prefix on the test server and its
// storage options.
func testLocation(t *testing.T) (string, map[string]string) {
	t.Helper()
	opts := s3test.Options(t)
	return fmt.Sprintf("%s/s3sink-%s-%d", s3test.Bucket, sanitize(t.Name()), rand.Uint32()), opts
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, s)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// rawStore is a store on loc that bypasses the sink, for independent reads.
func rawStore(t *testing.T, loc string, opts map[string]string) *objstore.S3 {
	b, p, err := ParseLocation(loc)
	require.NoError(t, err)
	st, err := objstore.NewS3(context.Background(), b, p, opts)
	require.NoError(t, err)
	return st
}

// readIDs reads the int64 "id" column of every Parquet object under dir
// with arrow-go's Parquet reader (not the sink's code), and the rows per
// object name.
func readIDs(t *testing.T, st objstore.Store, dir string) ([]int64, map[string]int64) {
	ctx := ctxT(t)
	keys, err := st.List(ctx, dir+"/", "")
	require.NoError(t, err)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	var ids []int64
	rows := map[string]int64{}
	for _, k := range keys {
		name := k[strings.LastIndex(k, "/")+1:]
		if strings.HasPrefix(name, "_") {
			continue
		}
		data, err := st.Get(ctx, k)
		require.NoError(t, err)
		pf, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(nil))
		require.NoError(t, err)
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, mem)
		require.NoError(t, err)
		tbl, err := fr.ReadTable(ctx)
		require.NoError(t, err)
		idx := tbl.Schema().FieldIndices("id")
		require.Len(t, idx, 1, "object %s has no id column", k)
		for _, ch := range tbl.Column(idx[0]).Data().Chunks() {
			ids = append(ids, ch.(*array.Int64).Int64Values()...)
		}
		rows[name] = tbl.NumRows()
		tbl.Release()
		require.NoError(t, pf.Close())
	}
	return ids, rows
}

func TestIntegrationS3Conformance(t *testing.T) {
	loc, opts := testLocation(t)
	raw := rawStore(t, loc, opts)
	sinktest.Run(t, sinktest.Harness{
		Guarantee: flightsink.AtLeastOnce,
		NewSink: func(t *testing.T) flightsink.Sink {
			s, err := New(context.Background(), Config{Location: loc, Storage: opts})
			require.NoError(t, err)
			return s
		},
		IDs: func(t *testing.T, p flightsink.Pipeline) []int64 {
			// Every pipeline's objects of the target: <target>/<pipeline>/…
			dir := p.Target
			if dir == "" {
				var err error
				dir, err = Dir(p)
				require.NoError(t, err)
			}
			ids, _ := readIDs(t, raw, dir)
			return ids
		},
	})
}

// richSchema covers the types the independent reader checks, including
// the view types the Kafka source produces (stored as binary and string).
var richSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "key", Type: arrow.BinaryTypes.BinaryView, Nullable: true},
	{Name: "tag", Type: arrow.BinaryTypes.StringView, Nullable: true},
}, nil)

func richBatch(mem memory.Allocator, from, to int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, richSchema)
	defer b.Release()
	for i := from; i < to; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("name-%d", i))
		b.Field(2).(*array.Float64Builder).Append(float64(i) / 4)
		b.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(1_700_000_000_000_000 + i))
		if i%5 == 0 {
			b.Field(4).(*array.BinaryViewBuilder).AppendNull()
		} else {
			b.Field(4).(*array.BinaryViewBuilder).Append([]byte(fmt.Sprintf("key-%d-with-a-value-longer-than-twelve-bytes", i)))
		}
		b.Field(5).(*array.StringViewBuilder).Append(fmt.Sprintf("t%d", i%3))
	}
	return b.NewRecordBatch()
}

type pyObject struct {
	Name   string   `json:"name"`
	Rows   int64    `json:"rows"`
	Codecs []string `json:"codecs"`
	Schema [][]any  `json:"schema"`
	Groups int      `json:"row_groups"`
}

type pyResult struct {
	Objects        []pyObject `json:"objects"`
	CommonMetadata [][]any    `json:"common_metadata"`
	Dataset        struct {
		Rows   int64   `json:"rows"`
		Schema [][]any `json:"schema"`
	} `json:"dataset"`
	Values []any `json:"values"`
}

// pyRead runs integration/python/s3_read.py on bucket/dir.
func pyRead(t *testing.T, path, column string) pyResult {
	t.Helper()
	py := integration.Need(t, "FLIGHTLINE_PYTHON", "python with pyarrow")
	args := []string{"../../integration/python/s3_read.py", path}
	if column != "" {
		args = append(args, column)
	}
	out, err := exec.Command(py, args...).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("s3_read.py: %v\n%s", err, ee.Stderr)
	}
	require.NoError(t, err)
	var r pyResult
	require.NoError(t, json.Unmarshal(out, &r), "%s", out)
	return r
}

// TestIntegrationS3IndependentRead writes batches of several sizes and
// reads them back with pyarrow's own S3 client: one object per batch with
// the batch's row count, snappy everywhere, the right schema, and the whole
// directory as one dataset. Then a restarted writer replays the same
// batches: same keys, nothing added.
func TestIntegrationS3IndependentRead(t *testing.T) {
	loc, opts := testLocation(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := ctxT(t)
	s, err := New(context.Background(), Config{Location: loc, Storage: opts}, Allocator(mem))
	require.NoError(t, err)
	p := flightsink.Pipeline{ID: "orders-to-s3"}
	sizes := []int64{1, 7, 250, 1000, 4096, 3}

	write := func() map[string]int64 {
		w, cp, err := s.Open(ctx, p)
		require.NoError(t, err)
		require.Nil(t, cp, "an at-least-once sink has no checkpoint")
		// The source announces where it starts, as the Kafka source does.
		empty := richBatch(mem, 0, 0)
		require.NoError(t, w.WriteBatch(ctx, empty, checkpoint.Positions{"orders/0": 0, "orders/1": 0}.Encode()))
		empty.Release()
		want := map[string]int64{}
		at := checkpoint.Positions{"orders/0": 0, "orders/1": 0}
		from := int64(0)
		for i, n := range sizes {
			part := fmt.Sprintf("orders/%d", i%2)
			prev := at.Encode()
			at[part] += n
			rec := richBatch(mem, from, from+n)
			require.NoError(t, w.WriteBatch(ctx, rec, at.Encode()))
			rec.Release()
			want[ObjectName(prev, at.Encode())] = n
			from += n
		}
		require.NoError(t, w.Close(ctx))
		return want
	}
	want := write()
	again := write() // a restart that replays every batch
	require.Equal(t, want, again)
	// Batches alternate partitions: each object is named by its partition
	// and the offset it ended at.
	require.Equal(t, int64(3), want["orders!2F1~00000000000000001010.parquet"])
	require.Equal(t, int64(4096), want["orders!2F0~00000000000000004347.parquet"])

	total := int64(0)
	for _, n := range sizes {
		total += n
	}
	r := pyRead(t, loc+"/orders-to-s3", "id")
	require.Len(t, r.Objects, len(sizes), "one object per batch, replays overwrote")
	wantSchema := [][]any{
		{"id", "int64", false}, {"name", "string", true}, {"amount", "double", true},
		{"at", "timestamp[us, tz=UTC]", true}, {"key", "binary", true}, {"tag", "string", true},
	}
	for _, o := range r.Objects {
		require.Equalf(t, want[o.Name], o.Rows, "rows of %s", o.Name)
		require.Equal(t, []string{"SNAPPY"}, o.Codecs, o.Name)
		require.Equal(t, wantSchema, o.Schema, o.Name)
	}
	require.Equal(t, wantSchema, r.CommonMetadata, "_common_metadata holds the pipeline's schema")
	require.Equal(t, total, r.Dataset.Rows)
	require.Equal(t, wantSchema, r.Dataset.Schema)
	ids := make([]int64, 0, len(r.Values))
	for _, v := range r.Values {
		ids = append(ids, int64(v.(float64)))
	}
	slices.Sort(ids)
	for i, id := range ids {
		require.Equal(t, int64(i), id)
	}
}

func TestIntegrationS3SchemaMismatchAcrossWriters(t *testing.T) {
	loc, opts := testLocation(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := ctxT(t)
	p := flightsink.Pipeline{ID: "p"}
	s1, err := New(context.Background(), Config{Location: loc, Storage: opts}, Allocator(mem))
	require.NoError(t, err)
	w, _, err := s1.Open(ctx, p)
	require.NoError(t, err)
	rec := sinktest.Batch(mem, 0, 3)
	require.NoError(t, w.WriteBatch(ctx, rec, sinktest.CP(3)))
	rec.Release()

	// Another process, another schema: refused at its first batch.
	s2, err := New(context.Background(), Config{Location: loc, Storage: opts}, Allocator(mem))
	require.NoError(t, err)
	w2, _, err := s2.Open(ctx, p)
	require.NoError(t, err)
	other := richBatch(mem, 3, 5)
	err = w2.WriteBatch(ctx, other, sinktest.CP(5))
	other.Release()
	require.ErrorIs(t, err, flightline.ErrSchemaMismatch)
	require.Contains(t, err.Error(), "pipeline \"p\"")
	ids, _ := readIDs(t, rawStore(t, loc, opts), "p")
	require.Equal(t, []int64{0, 1, 2}, ids)

	// Another pipeline under the same prefix has its own schema.
	w3, _, err := s2.Open(ctx, flightsink.Pipeline{ID: "q"})
	require.NoError(t, err)
	other = richBatch(mem, 0, 2)
	require.NoError(t, w3.WriteBatch(ctx, other, sinktest.CP(2)))
	other.Release()
}

func TestIntegrationS3WrongCredentials(t *testing.T) {
	loc, opts := testLocation(t)
	bad := map[string]string{}
	for k, v := range opts {
		bad[k] = v
	}
	bad[objstore.SecretAccessKey] = "not-the-secret"
	s, err := New(context.Background(), Config{Location: loc, Storage: bad})
	require.NoError(t, err, "New contacts nothing")
	_, _, err = s.Open(ctxT(t), flightsink.Pipeline{ID: "p"})
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
	require.False(t, flightline.IsRetryable(err))
	require.Contains(t, err.Error(), "refused the credentials")
	require.Contains(t, err.Error(), "AWS_SECRET_ACCESS_KEY")
	t.Log(err)

	bad[objstore.AccessKeyID] = "nobody"
	s, err = New(context.Background(), Config{Location: loc, Storage: bad})
	require.NoError(t, err)
	_, _, err = s.Open(ctxT(t), flightsink.Pipeline{ID: "p"})
	require.ErrorIs(t, err, flightline.ErrUnauthenticated)
	t.Log(err)
}

func TestIntegrationS3MissingBucket(t *testing.T) {
	_, opts := testLocation(t)
	s, err := New(context.Background(), Config{Location: "no-such-bucket-flightline/x", Storage: opts})
	require.NoError(t, err)
	_, _, err = s.Open(ctxT(t), flightsink.Pipeline{ID: "p"})
	require.ErrorIs(t, err, flightline.ErrNotFound)
	require.False(t, flightline.IsRetryable(err))
	require.Contains(t, err.Error(), `bucket "no-such-bucket-flightline" not found`)
	t.Log(err)
}

// failUploadPart makes every UploadPart with part number n fail before it
// is sent, as a connection reset would.
func failUploadPart(n int32) func(*awss3.Options) {
	return func(o *awss3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("flightline-fail-part",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if up, ok := in.Parameters.(*awss3.UploadPartInput); ok && aws.ToInt32(up.PartNumber) == n {
						return middleware.InitializeOutput{}, middleware.Metadata{}, errors.New("injected failure: connection reset during part upload")
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.Before)
		})
	}
}

// bigBatch is about size bytes of incompressible binary in rows of 64 KiB.
func bigBatch(mem memory.Allocator, size int) arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "blob", Type: arrow.BinaryTypes.Binary},
	}, nil)
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	rng := rand.New(rand.NewPCG(1, 2))
	blob := make([]byte, 64<<10)
	for i := 0; i*len(blob) < size; i++ {
		for j := 0; j < len(blob); j += 8 {
			v := rng.Uint64()
			for k := range 8 {
				blob[j+k] = byte(v >> (8 * k))
			}
		}
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.BinaryBuilder).Append(blob)
	}
	return b.NewRecordBatch()
}

// TestIntegrationS3MultipartFailureLeavesNothing uploads a 12 MiB batch in
// 5 MiB parts and fails the second part: WriteBatch fails, no object is
// visible and no upload is left open. The same batch then goes through.
func TestIntegrationS3MultipartFailureLeavesNothing(t *testing.T) {
	loc, opts := testLocation(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ctx := ctxT(t)
	p := flightsink.Pipeline{ID: "big"}
	rec := bigBatch(mem, 12<<20)
	defer rec.Release()
	cp := sinktest.CP(rec.NumRows())
	key := "big/" + ObjectName(nil, cp)

	faulty, err := New(context.Background(), Config{Location: loc, Storage: opts, PartSize: 5 << 20, MultipartThreshold: 6 << 20}, Allocator(mem),
		func(o *options) error {
			o.clientOverride = func(s *objstore.S3) *objstore.S3 { return s.WithClientOptions(failUploadPart(2)) }
			return nil
		})
	require.NoError(t, err)
	w, _, err := faulty.Open(ctx, p)
	require.NoError(t, err)
	err = w.WriteBatch(ctx, rec, cp)
	require.Error(t, err)
	require.Contains(t, err.Error(), "injected failure")
	t.Log(err)

	raw := rawStore(t, loc, opts)
	_, err = raw.Get(ctx, key)
	require.ErrorIs(t, err, objstore.ErrNotExist, "a failed multipart upload leaves no object")
	b, prefix, _ := ParseLocation(loc)
	ups, err := raw.Client().ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: aws.String(b), Prefix: aws.String(prefix + "/")})
	require.NoError(t, err)
	require.Empty(t, ups.Uploads, "the failed upload was aborted")
	ids, _ := readIDs(t, raw, "big")
	require.Empty(t, ids)

	good, err := New(context.Background(), Config{Location: loc, Storage: opts, PartSize: 5 << 20, MultipartThreshold: 6 << 20}, Allocator(mem))
	require.NoError(t, err)
	w, _, err = good.Open(ctx, p)
	require.NoError(t, err)
	require.NoError(t, w.WriteBatch(ctx, rec, cp))
	data, err := raw.Get(ctx, key)
	require.NoError(t, err)
	require.Greater(t, len(data), 12<<20)
	ids, rows := readIDs(t, raw, "big")
	require.Len(t, ids, int(rec.NumRows()))
	require.Equal(t, map[string]int64{ObjectName(nil, cp): rec.NumRows()}, rows)
}
