package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/flightline/flightline"
)

// DefaultPartSize is the part size of multipart uploads; objects larger
// than MultipartThreshold are uploaded in parts.
const (
	DefaultPartSize    = 16 << 20
	MultipartThreshold = 32 << 20
)

// S3 is a Store on an S3 bucket prefix. PutIfAbsent is PutObject with
// If-None-Match: * (AWS S3 since 2024, versitygw, MinIO, Ceph RGW). Put of
// a large object is a multipart upload, aborted on any error, so no partial
// object is ever visible.
type S3 struct {
	client    *s3.Client
	bucket    string
	prefix    string // no leading or trailing '/'
	partSize  int
	threshold int
	// renewing: credentials come from a provider that renews them
	// (OpenWithCredentials), so an expired token is a transient state.
	renewing bool
}

// ResponseHeaderTimeout bounds the wait for an S3 response's headers once a
// request has been sent (its body included, so large uploads are not
// limited). A server that accepts a request and never answers would
// otherwise hold the call, and the pipeline, forever: the SDK has no
// default timeout (issue 16: a hung S3 stalled a Delta pipeline until the
// connection was reset, 90 s in the test). The SDK retries a timed-out
// request like any transient failure.
const ResponseHeaderTimeout = 10 * time.Second

// NewS3 returns a store on s3://bucket/prefix configured by opts (see
// Options); missing credentials and region come from the SDK default chain.
// With AWS_ENDPOINT_URL set, requests use path-style addressing; an http://
// endpoint requires AWS_ALLOW_HTTP=true.
func NewS3(ctx context.Context, bucket, prefix string, opts Options) (*S3, error) {
	return newS3(ctx, bucket, prefix, opts, nil)
}

func newS3(ctx context.Context, bucket, prefix string, opts Options, creds aws.CredentialsProvider) (*S3, error) {
	var lo []func(*config.LoadOptions) error
	if creds != nil && (opts[AccessKeyID] != "" || opts[SecretAccessKey] != "" || opts[SessionToken] != "") {
		return nil, fmt.Errorf("%w: storage options carry AWS keys and a credentials provider is given: use one", flightline.ErrInvalidInput)
	}
	if id, secret := opts[AccessKeyID], opts[SecretAccessKey]; id != "" || secret != "" {
		if id == "" || secret == "" {
			return nil, fmt.Errorf("%w: storage options need both %s and %s", flightline.ErrInvalidInput, AccessKeyID, SecretAccessKey)
		}
		lo = append(lo, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, opts[SessionToken])))
	}
	endpoint := opts[EndpointURL]
	region := opts[Region]
	if region == "" && endpoint != "" {
		region = "us-east-1" // S3-compatible servers ignore it, the signer needs one
	}
	if region != "" {
		lo = append(lo, config.WithRegion(region))
	}
	allowHTTP := false
	if v := opts[AllowHTTP]; v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s=%q is not a boolean", flightline.ErrInvalidInput, AllowHTTP, v)
		}
		allowHTTP = b
	}
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("%w: %s=%q: want http(s)://host:port", flightline.ErrInvalidInput, EndpointURL, endpoint)
		}
		if u.Scheme == "http" && !allowHTTP {
			return nil, fmt.Errorf("%w: %s=%q is plain http: set %s=true to allow it", flightline.ErrInvalidInput, EndpointURL, endpoint, AllowHTTP)
		}
	}
	lo = append(lo, config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.ResponseHeaderTimeout = ResponseHeaderTimeout
	})))
	cfg, err := config.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, fmt.Errorf("objstore: AWS config: %w", err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if creds != nil {
			// Used as is, not behind the SDK's credentials cache: the
			// provider decides when its credentials are renewed.
			o.Credentials = creds
		} else if o.Credentials != nil {
			// The SDK's chain: a failure to find credentials is marked,
			// so wrap can say so instead of a generic S3 error.
			o.Credentials = markedCredentials{o.Credentials}
		}
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
			o.UsePathStyle = true
		}
		// Checksums only where the API requires them: S3-compatible
		// servers differ in their support of the newer trailing checksums.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &S3{client: client, bucket: bucket, prefix: strings.Trim(prefix, "/"), partSize: DefaultPartSize, threshold: MultipartThreshold,
		renewing: creds != nil}, nil
}

// HeadBucket asks S3 whether the bucket exists and the store's credentials
// reach it (s3:HeadBucket), contacting the endpoint. Its error names the
// cause: no credentials found (ErrUnauthenticated), credentials refused
// (ErrUnauthenticated) or lacking access (ErrPermissionDenied), a bucket
// that does not exist (ErrNotFound), an endpoint that cannot be reached
// (ErrUnavailable).
func (s *S3) HeadBucket(ctx context.Context) error {
	where := "s3://" + s.bucket
	if s.client.Options().Credentials == nil {
		return fmt.Errorf("objstore: %s: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (in the environment or the storage options) or AWS_PROFILE: %w", where, flightline.ErrUnauthenticated)
	}
	if _, err := s.client.Options().Credentials.Retrieve(ctx); err != nil {
		return fmt.Errorf("objstore: %s: no AWS credentials found (%v): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (in the environment or the storage options) or AWS_PROFILE: %w", where, err, flightline.ErrUnauthenticated)
	}
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)})
	if err == nil {
		return nil
	}
	var nf *types.NotFound
	var re interface{ HTTPStatusCode() int }
	switch {
	case errors.As(err, &nf):
		return fmt.Errorf("objstore: %s: bucket %q does not exist (or is not visible to these credentials): %w", where, s.bucket, flightline.ErrNotFound)
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound:
		return fmt.Errorf("objstore: %s: bucket %q does not exist: %w", where, s.bucket, flightline.ErrNotFound)
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusForbidden:
		return fmt.Errorf("objstore: %s: access to bucket %q refused (HTTP 403): the credentials are wrong or lack s3:ListBucket on it: %w", where, s.bucket, flightline.ErrPermissionDenied)
	case errors.As(err, &re) && re.HTTPStatusCode() == http.StatusMovedPermanently:
		return fmt.Errorf("objstore: %s: bucket %q is in another region: set AWS_REGION: %w", where, s.bucket, flightline.ErrInvalidInput)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("objstore: %s: cannot reach the S3 endpoint (%v): check AWS_ENDPOINT_URL and that the server is up: %w", where, err, flightline.ErrUnavailable)
	}
	return s.wrap(err, "head bucket", "")
}

// SetPartSize changes the multipart part size and threshold (for tests).
func (s *S3) SetPartSize(part, threshold int) { s.partSize, s.threshold = part, threshold }

// Client returns the underlying S3 client.
func (s *S3) Client() *s3.Client { return s.client }

// WithClientOptions returns a copy of s whose S3 client has fns applied on
// top of its options, e.g. another HTTP client or API middleware (tests
// inject faults this way). s itself is unchanged.
func (s *S3) WithClientOptions(fns ...func(*s3.Options)) *S3 {
	c := *s
	c.client = s3.New(s.client.Options(), fns...)
	return &c
}

func (s *S3) URL() string {
	if s.prefix == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + s.prefix
}

func (s *S3) key(k string) string { return Join(s.prefix, k) }

func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(key))})
	if err != nil {
		return nil, s.wrap(err, "get", key)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, s.wrap(err, "get", key)
	}
	return b, nil
}

func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	if len(data) > s.threshold {
		return s.multipart(ctx, key, data, false)
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(key)),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))})
	return s.wrap(err, "put", key)
}

func (s *S3) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	if len(data) > s.threshold {
		return s.multipart(ctx, key, data, true)
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(key)),
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))), IfNoneMatch: aws.String("*")})
	return s.wrap(err, "put-if-absent", key)
}

func (s *S3) multipart(ctx context.Context, key string, data []byte, ifAbsent bool) error {
	k := aws.String(s.key(key))
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: k})
	if err != nil {
		return s.wrap(err, "multipart create", key)
	}
	ok := false
	defer func() {
		if !ok { // never leave parts behind; the object was never visible
			_, _ = s.client.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: k, UploadId: up.UploadId})
		}
	}()
	var parts []types.CompletedPart
	for n, off := int32(1), 0; off < len(data); n, off = n+1, off+s.partSize {
		end := min(off+s.partSize, len(data))
		p, err := s.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &s.bucket, Key: k, UploadId: up.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(data[off:end]), ContentLength: aws.Int64(int64(end - off))})
		if err != nil {
			return s.wrap(err, "multipart upload part", key)
		}
		parts = append(parts, types.CompletedPart{ETag: p.ETag, PartNumber: aws.Int32(n)})
	}
	in := &s3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: k, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}
	if ifAbsent {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := s.client.CompleteMultipartUpload(ctx, in); err != nil {
		return s.wrap(err, "multipart complete", key)
	}
	ok = true
	return nil
}

func (s *S3) List(ctx context.Context, prefix, startAfter string) ([]string, error) {
	in := &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.key(prefix))}
	if strings.HasSuffix(prefix, "/") {
		*in.Prefix += "/"
	}
	if startAfter != "" {
		in.StartAfter = aws.String(s.key(startAfter))
	}
	var out []string
	p := s3.NewListObjectsV2Paginator(s.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.wrap(err, "list", prefix)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if s.prefix != "" {
				k = strings.TrimPrefix(k, s.prefix+"/")
			}
			out = append(out, k)
		}
	}
	return out, nil
}

func (s *S3) Delete(ctx context.Context, key string) error {
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(key))})
	return s.wrap(err, "delete", key)
}

// credentialsError marks a failure of the SDK's credentials chain: no
// credentials found (or they could not be refreshed).
type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

// markedCredentials marks its provider's errors as credentialsError.
type markedCredentials struct{ aws.CredentialsProvider }

func (m markedCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	c, err := m.CredentialsProvider.Retrieve(ctx)
	if err != nil {
		return c, &credentialsError{err}
	}
	return c, nil
}

// wrap classifies an S3 error into flightline's sentinels.
func (s *S3) wrap(err error, op, key string) error {
	if err == nil {
		return nil
	}
	where := fmt.Sprintf("s3://%s/%s", s.bucket, s.key(key))
	var ce *credentialsError
	if errors.As(err, &ce) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("objstore: %s %s: no AWS credentials found (%v): set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (in the environment or the storage options) or AWS_PROFILE: %w", op, where, ce.err, flightline.ErrUnauthenticated)
	}
	var nsk *types.NoSuchKey
	if errors.As(err, &nsk) {
		return fmt.Errorf("%s: %w", where, ErrNotExist)
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%s: %w", where, ErrNotExist)
		case "PreconditionFailed", "ConditionalRequestConflict":
			return fmt.Errorf("%s: %w", where, ErrExists)
		case "NoSuchBucket":
			return fmt.Errorf("objstore: %s %s: bucket %q does not exist: %w", op, where, s.bucket, flightline.ErrNotFound)
		case "ExpiredToken":
			if s.renewing {
				// The provider renews its credentials (and refuses to hand
				// out ones about to expire): S3 saw them expire first, e.g.
				// a clock behind S3's. Retrying uses renewed ones.
				return fmt.Errorf("objstore: %s %s: credentials expired before renewal (%s): %w", op, where, ae.ErrorMessage(), flightline.ErrUnavailable)
			}
			return fmt.Errorf("objstore: %s %s: credentials refused (%s): %w", op, where, ae.ErrorCode(), flightline.ErrUnauthenticated)
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "InvalidClientTokenId",
			"XAdminUserNotFound": // versitygw's unknown access key, sent as 404
			return fmt.Errorf("objstore: %s %s: credentials refused (%s): %w", op, where, ae.ErrorCode(), flightline.ErrUnauthenticated)
		case "AccessDenied", "Forbidden":
			return fmt.Errorf("objstore: %s %s: %s: %w", op, where, ae.ErrorMessage(), flightline.ErrPermissionDenied)
		case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout":
			return fmt.Errorf("objstore: %s %s: %s: %w", op, where, ae.ErrorCode(), flightline.ErrUnavailable)
		}
	}
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusPreconditionFailed, http.StatusConflict:
			return fmt.Errorf("%s: %w", where, ErrExists)
		case http.StatusNotFound:
			if op == "get" {
				return fmt.Errorf("%s: %w", where, ErrNotExist)
			}
		case http.StatusForbidden:
			return fmt.Errorf("objstore: %s %s: %v: %w", op, where, err, flightline.ErrPermissionDenied)
		}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// The caller's context ended: say so (callers test for it), not
		// that the store is unavailable.
		return fmt.Errorf("objstore: %s %s: %w", op, where, err)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("objstore: %s %s: %v: %w", op, where, err, flightline.ErrUnavailable)
	}
	return fmt.Errorf("objstore: %s %s: %w", op, where, err)
}
