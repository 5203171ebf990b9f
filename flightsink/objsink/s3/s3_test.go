package s3_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/objsink/s3"
	"github.com/flightline/flightline/flightsink/sinktest"
	"github.com/flightline/flightline/internal/flighterr"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/testkit/objsinktest"
	"github.com/flightline/flightline/internal/testkit/s3test"
	"github.com/flightline/flightline/internal/testkit/servicetest"
)

// freshPrefix is a prefix no other test run writes under.
func freshPrefix(t *testing.T) string {
	return fmt.Sprintf("objsink-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano())
}

// readIDs lists every object under prefix with the SDK (not the Backend),
// skips names with a component starting with _ or ., and reads the id
// column of each Parquet part file.
func readIDs(t *testing.T, c *awss3.Client, bucket, prefix string) []int64 {
	var ids []int64
	p := awss3.NewListObjectsV2Paginator(c, &awss3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
	objects:
		for _, o := range page.Contents {
			for _, c := range strings.Split(strings.TrimPrefix(aws.ToString(o.Key), prefix+"/"), "/") {
				if strings.HasPrefix(c, "_") || strings.HasPrefix(c, ".") {
					continue objects
				}
			}
			out, err := c.GetObject(context.Background(), &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
			require.NoError(t, err)
			data := make([]byte, aws.ToInt64(out.ContentLength))
			_, err = io.ReadFull(out.Body, data)
			out.Body.Close()
			require.NoError(t, err)
			ids = append(ids, objsinktest.ParquetIDs(t, data)...)
		}
	}
	return ids
}

func TestIntegrationS3Conformance(t *testing.T) {
	opts := s3test.Options(t)
	prefix := freshPrefix(t)
	st, err := objstore.NewS3(context.Background(), s3test.Bucket, "", opts)
	require.NoError(t, err)
	sinktest.Run(t, sinktest.Harness{
		Guarantee: flightsink.ExactlyOnce,
		Group:     true,
		NewSink: func(t *testing.T) flightsink.Sink {
			b, err := s3.New(context.Background(), s3.Config{Bucket: s3test.Bucket, Prefix: prefix, Storage: opts})
			require.NoError(t, err)
			s, err := objsink.New(context.Background(), objsink.Config{Backend: b, Name: "s3 objsink"})
			require.NoError(t, err)
			return s
		},
		IDs: func(t *testing.T, p flightsink.Pipeline) []int64 {
			target, err := objsink.Target(p)
			require.NoError(t, err)
			return readIDs(t, st.Client(), s3test.Bucket, prefix+"/"+target)
		},
	})
}

// exercise checks the Backend contract on a store: create-if-absent with
// one winner of racing writers, publication, listing, deletion.
func exercise(t *testing.T, b *s3.Backend) {
	ctx := context.Background()
	require.NoError(t, b.PutIfAbsent(ctx, "d/a", []byte("one")))
	require.ErrorIs(t, b.PutIfAbsent(ctx, "d/a", []byte("two")), objsink.ErrExists)
	got, err := b.Get(ctx, "d/a")
	require.NoError(t, err)
	require.Equal(t, "one", string(got), "the loser wrote nothing")
	require.NoError(t, b.Publish(ctx, "d/a", "d/b"))
	got, err = b.Get(ctx, "d/b")
	require.NoError(t, err)
	require.Equal(t, "one", string(got))
	require.NoError(t, b.Put(ctx, "d/sub/c", []byte("deeper")))
	objs, err := b.List(ctx, "d")
	require.NoError(t, err)
	require.Len(t, objs, 2, "only the objects directly under d: %v", objs)
	require.NoError(t, b.Delete(ctx, "d/a"))
	require.NoError(t, b.Delete(ctx, "d/a"), "deleting a missing object is no error")
	ok, err := b.Exists(ctx, "d/a")
	require.NoError(t, err)
	require.False(t, ok)
	ok, err = b.Exists(ctx, "d/b")
	require.NoError(t, err)
	require.True(t, ok)
	_, err = b.Get(ctx, "d/a")
	require.ErrorIs(t, err, fs.ErrNotExist)

	// 16 racing writers of one key: exactly one wins.
	var wins, losses atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := b.PutIfAbsent(ctx, "race/k", []byte(fmt.Sprint(i)))
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, objsink.ErrExists):
				losses.Add(1)
			default:
				t.Errorf("racer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int32(1), wins.Load())
	require.Equal(t, int32(15), losses.Load())
}

func TestIntegrationS3Backend(t *testing.T) {
	opts := s3test.Options(t)
	b, err := s3.New(context.Background(), s3.Config{Bucket: s3test.Bucket, Prefix: freshPrefix(t), Storage: opts})
	require.NoError(t, err)
	exercise(t, b)

	missing, err := s3.New(context.Background(), s3.Config{Bucket: "no-such-bucket-38", Prefix: "x", Storage: opts})
	require.NoError(t, err)
	err = missing.PutIfAbsent(context.Background(), "k", []byte("v"))
	require.Equal(t, codes.NotFound, flighterr.Code(err), "%v", err)
	require.ErrorContains(t, err, "no-such-bucket-38")
}

// moto 5 honours If-None-Match: * on PutObject: the same contract holds
// there (the athena: kind's tests run on moto's S3 beside its Glue).
func TestIntegrationS3BackendMoto(t *testing.T) {
	endpoint := servicetest.Need(t, "FLIGHTLINE_MOTO_ENDPOINT", "moto (fake AWS S3)")
	opts := objstore.Options{objstore.EndpointURL: endpoint, objstore.AccessKeyID: "testing",
		objstore.SecretAccessKey: "testing", objstore.Region: "us-east-1", objstore.AllowHTTP: "true"}
	st, err := objstore.NewS3(context.Background(), "flightline-objsink-moto", "", opts)
	require.NoError(t, err)
	_, _ = st.Client().CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String("flightline-objsink-moto")})
	b, err := s3.New(context.Background(), s3.Config{Bucket: "flightline-objsink-moto", Prefix: freshPrefix(t), Storage: opts})
	require.NoError(t, err)
	exercise(t, b)
}

func TestS3ErrorCodes(t *testing.T) {
	_, err := s3.New(context.Background(), s3.Config{Bucket: "a/b", Prefix: "x", Storage: objstore.Options{}})
	require.Equal(t, codes.InvalidArgument, flighterr.Code(err), "%v", err)
	down, err := s3.New(context.Background(), s3.Config{Bucket: "b", Prefix: "x", Storage: objstore.Options{objstore.EndpointURL: "http://127.0.0.1:1",
		objstore.AccessKeyID: "k", objstore.SecretAccessKey: "s", objstore.AllowHTTP: "true"}})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = down.PutIfAbsent(ctx, "k", []byte("v"))
	require.ErrorIs(t, err, flightline.ErrUnavailable)
	require.Equal(t, codes.Unavailable, flighterr.Code(err), "%v", err)
}

// ignoreIfNoneMatch drops If-None-Match from every PutObject before it is
// sent: the client of a store that ignores the precondition.
func ignoreIfNoneMatch(o *awss3.Options) {
	o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("flightline-ignore-if-none-match",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if put, ok := in.Parameters.(*awss3.PutObjectInput); ok {
					c := *put
					c.IfNoneMatch = nil
					in.Parameters = &c
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}

// Open probes the store: one that lets a second create-if-absent of a key
// succeed is refused with FAILED_PRECONDITION naming commit=at-least-once,
// nothing is committed and the probe object is removed; a store that
// honours it opens, and is probed once per Sink.
func TestIntegrationS3ProbeRefusesStoreIgnoringIfNoneMatch(t *testing.T) {
	opts := s3test.Options(t)
	prefix := freshPrefix(t)
	good, err := s3.New(context.Background(), s3.Config{Bucket: s3test.Bucket, Prefix: prefix, Storage: opts})
	require.NoError(t, err)
	bad := good.WithClientOptions(ignoreIfNoneMatch)
	sink, err := objsink.New(context.Background(), objsink.Config{Backend: bad, Name: "s3 sink"})
	require.NoError(t, err)
	_, _, err = sink.Open(context.Background(), flightsink.Pipeline{ID: "p"})
	require.ErrorIs(t, err, flightline.ErrFailedPrecondition)
	require.Equal(t, codes.FailedPrecondition, flighterr.Code(err), "%v", err)
	require.ErrorContains(t, err, "commit=at-least-once")
	require.ErrorContains(t, err, "ignores If-None-Match: *")
	t.Log(err)

	st, err := objstore.NewS3(context.Background(), s3test.Bucket, "", opts)
	require.NoError(t, err)
	keys, err := st.List(context.Background(), prefix+"/", "")
	require.NoError(t, err)
	require.Empty(t, keys, "the refused Open left nothing: no probe object, no commit record")

	sink, err = objsink.New(context.Background(), objsink.Config{Backend: good, Name: "s3 sink"})
	require.NoError(t, err)
	w, _, err := sink.Open(context.Background(), flightsink.Pipeline{ID: "p"})
	require.NoError(t, err)
	require.NoError(t, w.Close(context.Background()))
	probes, err := st.List(context.Background(), prefix+"/"+s3.ProbeDir+"/", "")
	require.NoError(t, err)
	require.Empty(t, probes, "the probe object is removed")
}
