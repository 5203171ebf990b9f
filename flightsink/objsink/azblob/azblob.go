// Package azblob is the objsink Backend of Azure Blob Storage, on the
// azblob SDK (github.com/Azure/azure-sdk-for-go/sdk/storage/azblob, which
// the command already links through gosnowflake, so it adds no module):
// create-if-absent is Put Blob with If-None-Match: * (409 BlobAlreadyExists
// on an existing blob), publication a server-side Copy Blob with the same
// condition on the destination.
//
// Credentials: the storage account's shared key, or a SAS token (with
// read, write, create, delete and list on the container). Endpoint points
// at another service URL, e.g. Azurite's
// http://127.0.0.1:10000/devstoreaccount1.
//
// The SDK's own retries are off: a write retried after a lost answer would
// meet its own blob and read as a lost race. A failed call is an error
// wrapping flightline.ErrUnavailable, and the pipeline resumes from the
// sink's checkpoint.
package azblob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink/objsink"
)

// maxObject bounds what Get reads: a commit record or a part file.
const maxObject = 1 << 30

// copyWait bounds how long Publish waits for a pending server-side copy
// (within one account Azure usually completes it in the call).
const copyWait = 5 * time.Minute

// Backend is an Azure Blob container and prefix as an objsink.Backend.
type Backend struct {
	container, prefix string
	c                 *container.Client
}

// Config is what an azblob sink is given in its URL or YAML.
type Config struct {
	// Container is the blob container. Required.
	Container string
	// Prefix is the prefix of every blob name (default none).
	Prefix string
	// Account names the storage account (the service URL is
	// https://ACCOUNT.blob.core.windows.net unless Endpoint says
	// otherwise). Required with Key or without Endpoint.
	Account string
	// Key is the storage account's key: it authenticates with a shared
	// key. Key and SAS exclude each other; one of them is required.
	Key string
	// SAS is a shared access signature (the query string, with or without
	// its leading '?'), for the account's service URL or Endpoint.
	SAS string
	// Endpoint is the service URL, e.g.
	// http://127.0.0.1:10000/devstoreaccount1 for Azurite (default the
	// account's).
	Endpoint string
}

type config struct {
	endpoint, account, key, sas string
	timeout                     time.Duration
}

// Option configures a Backend beyond its Config.
type Option func(*config)

// Timeout bounds each call (default 5 minutes).
func Timeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// New returns the Backend of cfg.Container and cfg.Prefix. It contacts
// nothing (it makes the container client); it validates cfg (the container
// name, the endpoint, one kind of credentials). Close releases nothing.
func New(_ context.Context, c Config, opts ...Option) (*Backend, error) {
	containerName, prefix := c.Container, c.Prefix
	if containerName == "" || strings.ContainsAny(containerName, "/?#") {
		return nil, fmt.Errorf("%w: azblob: container %q", flightline.ErrInvalidInput, containerName)
	}
	cfg := config{timeout: 5 * time.Minute, account: c.Account, key: c.Key, sas: strings.TrimPrefix(c.SAS, "?"),
		endpoint: strings.TrimRight(c.Endpoint, "/")}
	for _, o := range opts {
		o(&cfg)
	}
	svc := cfg.endpoint
	if svc == "" {
		if cfg.account == "" {
			return nil, fmt.Errorf("%w: azblob: give the storage account (or an endpoint)", flightline.ErrInvalidInput)
		}
		svc = "https://" + cfg.account + ".blob.core.windows.net"
	}
	if u, err := url.Parse(svc); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: azblob: endpoint %q: want http(s)://HOST[:PORT][/ACCOUNT]", flightline.ErrInvalidInput, svc)
	}
	curl := svc + "/" + url.PathEscape(containerName)
	co := &container.ClientOptions{ClientOptions: policy.ClientOptions{
		Retry: policy.RetryOptions{MaxRetries: -1, TryTimeout: cfg.timeout},
	}}
	b := &Backend{container: containerName, prefix: strings.Trim(prefix, "/")}
	var err error
	switch {
	case cfg.key != "" && cfg.sas != "":
		return nil, fmt.Errorf("%w: azblob: give a shared key or a SAS token, not both", flightline.ErrInvalidInput)
	case cfg.key != "":
		if cfg.account == "" {
			return nil, fmt.Errorf("%w: azblob: a shared key needs the account name", flightline.ErrInvalidInput)
		}
		cred, cerr := container.NewSharedKeyCredential(cfg.account, cfg.key)
		if cerr != nil {
			// The key's text stays out of the message.
			return nil, fmt.Errorf("%w: azblob: the account key is not valid base64", flightline.ErrInvalidInput)
		}
		b.c, err = container.NewClientWithSharedKeyCredential(curl, cred, co)
	case cfg.sas != "":
		b.c, err = container.NewClientWithNoCredential(curl+"?"+cfg.sas, co)
	default:
		return nil, fmt.Errorf("%w: azblob: no credentials: give the account key or a SAS token", flightline.ErrUnauthenticated)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: azblob: %v", flightline.ErrInvalidInput, err)
	}
	return b, nil
}

// Close releases nothing (the client holds no connection of its own
// beyond the SDK's pool) and returns nil.
func (b *Backend) Close() error { return nil }

func (b *Backend) name(key string) string {
	if b.prefix == "" {
		return key
	}
	return b.prefix + "/" + key
}

// classify turns an SDK error into the objsink and flightline vocabulary:
// ErrExists for BlobAlreadyExists (and a failed If-None-Match), fs.ErrNotExist
// for a missing blob, flightline.ErrNotFound for a missing container.
func (b *Backend) classify(what string, err error) error {
	if err == nil {
		return nil
	}
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("azblob: %s: %w", what, err)
		}
		// A url.Error quotes the request URL, which holds a SAS token.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("%w: azblob: %s: %v", flightline.ErrUnavailable, what, err)
	}
	detail := fmt.Sprintf("azblob: %s: HTTP %d %s", what, re.StatusCode, re.ErrorCode)
	switch {
	case bloberror.HasCode(err, bloberror.BlobAlreadyExists), re.StatusCode == http.StatusConflict && re.ErrorCode == "",
		re.StatusCode == http.StatusPreconditionFailed && bloberror.HasCode(err, bloberror.ConditionNotMet):
		return fmt.Errorf("%s: %w", detail, objsink.ErrExists)
	case bloberror.HasCode(err, bloberror.ContainerNotFound, bloberror.ContainerBeingDeleted):
		return fmt.Errorf("%w: azblob: container %q does not exist (%s)", flightline.ErrNotFound, b.container, detail)
	case re.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: %w", detail, fs.ErrNotExist)
	case bloberror.HasCode(err, bloberror.AuthenticationFailed), re.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%w: %s (check the account key or SAS token)", flightline.ErrUnauthenticated, detail)
	case re.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w: %s (check the account key, the SAS token's permissions and expiry)", flightline.ErrPermissionDenied, detail)
	case re.StatusCode == http.StatusTooManyRequests || re.StatusCode >= 500:
		return fmt.Errorf("%w: %s", flightline.ErrUnavailable, detail)
	}
	return fmt.Errorf("%w: %s", flightline.ErrInvalidInput, detail)
}

func (b *Backend) upload(ctx context.Context, key string, data []byte, ifAbsent bool) error {
	o := &blockblob.UploadOptions{}
	if ifAbsent {
		o.AccessConditions = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}}
	}
	_, err := b.c.NewBlockBlobClient(b.name(key)).Upload(ctx, streaming.NopCloser(bytes.NewReader(data)), o)
	return b.classify("put "+b.name(key), err)
}

// Put implements objsink.Backend: one Put Blob, which Azure makes visible
// whole or not at all.
func (b *Backend) Put(ctx context.Context, key string, data []byte) error {
	return b.upload(ctx, key, data, false)
}

// PutIfAbsent implements objsink.Backend with If-None-Match: *.
func (b *Backend) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return b.upload(ctx, key, data, true)
}

// Publish implements objsink.Backend with a server-side Copy Blob under
// If-None-Match: * on the destination, waiting for a pending copy to end.
func (b *Backend) Publish(ctx context.Context, from, dstKey string) error {
	what := "copy " + b.name(from) + " to " + b.name(dstKey)
	src := b.c.NewBlobClient(b.name(from)).URL()
	dst := b.c.NewBlobClient(b.name(dstKey))
	resp, err := dst.StartCopyFromURL(ctx, src, &blob.StartCopyFromURLOptions{
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}},
	})
	if err != nil {
		return b.classify(what, err)
	}
	status := blob.CopyStatusTypeSuccess
	if resp.CopyStatus != nil {
		status = *resp.CopyStatus
	}
	deadline := time.Now().Add(copyWait)
	for status == blob.CopyStatusTypePending {
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: azblob: %s: still pending after %v", flightline.ErrUnavailable, what, copyWait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("azblob: %s: %w", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
		p, err := dst.GetProperties(ctx, nil)
		if err != nil {
			return b.classify(what, err)
		}
		status = blob.CopyStatusTypeSuccess
		if p.CopyStatus != nil {
			status = *p.CopyStatus
		}
	}
	if status != blob.CopyStatusTypeSuccess {
		return fmt.Errorf("%w: azblob: %s: copy %s", flightline.ErrUnavailable, what, status)
	}
	return nil
}

// Get implements objsink.Backend.
func (b *Backend) Get(ctx context.Context, key string) ([]byte, error) {
	what := "get " + b.name(key)
	resp, err := b.c.NewBlobClient(b.name(key)).DownloadStream(ctx, nil)
	if err != nil {
		return nil, b.classify(what, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxObject+1))
	if err != nil {
		return nil, fmt.Errorf("%w: azblob: %s: %v", flightline.ErrUnavailable, what, err)
	}
	if len(data) > maxObject {
		return nil, fmt.Errorf("%w: azblob: %s: larger than %d bytes", flightline.ErrInvalidInput, what, maxObject)
	}
	return data, nil
}

// Exists implements objsink.Backend.
func (b *Backend) Exists(ctx context.Context, key string) (bool, error) {
	_, err := b.c.NewBlobClient(b.name(key)).GetProperties(ctx, nil)
	err = b.classify("stat "+b.name(key), err)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// List implements objsink.Backend: the blobs directly under dir.
func (b *Backend) List(ctx context.Context, dir string) ([]objsink.Object, error) {
	prefix := b.name(dir) + "/"
	pager := b.c.NewListBlobsHierarchyPager("/", &container.ListBlobsHierarchyOptions{Prefix: &prefix})
	var out []objsink.Object
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, b.classify("list "+prefix, err)
		}
		for _, it := range page.Segment.BlobItems {
			if it == nil || it.Name == nil {
				continue
			}
			name := strings.TrimPrefix(*it.Name, prefix)
			if name == "" || strings.Contains(name, "/") {
				continue
			}
			o := objsink.Object{Name: name}
			if it.Properties != nil && it.Properties.LastModified != nil {
				o.Modified = *it.Properties.LastModified
			}
			out = append(out, o)
		}
	}
	return out, nil
}

// Delete implements objsink.Backend.
func (b *Backend) Delete(ctx context.Context, key string) error {
	_, err := b.c.NewBlobClient(b.name(key)).Delete(ctx, nil)
	err = b.classify("delete "+b.name(key), err)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
