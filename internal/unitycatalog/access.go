package unitycatalog

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/objstore"
)

// CheckTable says whether Flightline can use t for op: a Delta table on
// S3, and for READ_WRITE an EXTERNAL one (Unity Catalog vends write
// credentials for external tables only; managed tables are written by
// Databricks itself). Any other table is flightline.ErrFailedPrecondition
// with the reason.
func CheckTable(t *Table, op Operation) error {
	typ := strings.ToUpper(t.TableType)
	switch {
	case typ != External && typ != Managed:
		return fmt.Errorf("%w: unity catalog: %s is a %s, not a table: Flightline reads and writes Delta tables only",
			flightline.ErrFailedPrecondition, t.FullName, t.TableType)
	case op == ReadWrite && typ != External:
		return fmt.Errorf("%w: unity catalog: %s is a %s table: only EXTERNAL tables can be written (Unity Catalog vends write credentials for external tables only); create it with CREATE TABLE … USING DELTA LOCATION 's3://…'",
			flightline.ErrFailedPrecondition, t.FullName, t.TableType)
	case !strings.EqualFold(t.DataSourceFormat, Delta):
		return fmt.Errorf("%w: unity catalog: %s is stored as %s, not DELTA: Flightline reads and writes Delta tables only",
			flightline.ErrFailedPrecondition, t.FullName, t.DataSourceFormat)
	case !strings.HasPrefix(t.StorageLocation, "s3://") && !strings.HasPrefix(t.StorageLocation, "s3a://"):
		return fmt.Errorf("%w: unity catalog: %s is stored at %q, not on S3: only S3 locations are supported (GCS and Azure are not yet)",
			flightline.ErrFailedPrecondition, t.FullName, t.StorageLocation)
	}
	return nil
}

// Access is a table resolved and checked, with credentials vended for it.
type Access struct {
	Table *Table
	Creds *Vended
}

// Access resolves name, checks it with CheckTable and vends op
// credentials for it, renewed until Close.
func (c *Client) Access(ctx context.Context, name string, op Operation, o VendOptions) (*Access, error) {
	t, err := c.GetTable(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := CheckTable(t, op); err != nil {
		return nil, err
	}
	v, err := c.Vend(ctx, t, op, o)
	if err != nil {
		return nil, err
	}
	return &Access{Table: t, Creds: v}, nil
}

// Close stops renewing the credentials.
func (a *Access) Close() { a.Creds.Close() }

// BucketRegion asks S3 at endpoint (https://s3.amazonaws.com when empty)
// which region bucket is in: the x-amz-bucket-region header S3 sends on
// a HEAD of the bucket, also to an anonymous caller it refuses.
func BucketRegion(ctx context.Context, hc *http.Client, endpoint, bucket string) (string, error) {
	if endpoint == "" {
		endpoint = "https://s3.amazonaws.com"
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, strings.TrimRight(endpoint, "/")+"/"+bucket, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("unity catalog: finding the region of bucket %s: %v: %w", bucket, err, flightline.ErrUnavailable)
	}
	resp.Body.Close()
	if r := resp.Header.Get("X-Amz-Bucket-Region"); r != "" {
		return r, nil
	}
	return "", fmt.Errorf("%w: unity catalog: S3 did not say which region bucket %s is in (HTTP %d): set AWS_REGION",
		flightline.ErrInvalidInput, bucket, resp.StatusCode)
}

// S3Options checks the storage options given for a table reached through
// the catalog and completes them: AWS keys are refused (the catalog vends
// the credentials), and without a region (option or AWS_REGION /
// AWS_DEFAULT_REGION in the environment) and without a custom endpoint the
// bucket's region is asked of S3 (BucketRegion).
func S3Options(ctx context.Context, location string, opts objstore.Options) (objstore.Options, error) {
	out := objstore.Options{}
	for k, v := range opts {
		switch k {
		case objstore.AccessKeyID, objstore.SecretAccessKey, objstore.SessionToken:
			return nil, fmt.Errorf("%w: storage option %s: the credentials of a Unity Catalog table are vended by the catalog", flightline.ErrInvalidInput, k)
		}
		if !objstore.IsOption(k) {
			return nil, fmt.Errorf("%w: unknown storage option %q", flightline.ErrInvalidInput, k)
		}
		out[k] = v
	}
	if out[objstore.Region] != "" || out[objstore.EndpointURL] != "" || os.Getenv("AWS_REGION") != "" || os.Getenv("AWS_DEFAULT_REGION") != "" {
		return out, nil
	}
	u, err := url.Parse(location)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: storage location %q: want s3://bucket/path", flightline.ErrInvalidInput, location)
	}
	r, err := BucketRegion(ctx, nil, "", u.Host)
	if err != nil {
		return nil, err
	}
	out[objstore.Region] = r
	return out, nil
}
