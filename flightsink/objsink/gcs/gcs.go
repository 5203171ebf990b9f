// Package gcs is the objsink Backend of Google Cloud Storage, spoken over
// its JSON API with net/http: create-if-absent is ifGenerationMatch=0 (412
// on an existing object), publication a server-side copy with the same
// condition. It uses no GCS SDK: cloud.google.com/go/storage would add
// gRPC direct-path, xDS and OpenTelemetry exporter modules to every
// build of the command for the seven calls this needs.
//
// Credentials: Google's application default credentials
// (golang.org/x/oauth2/google), or none with Endpoint (an emulator such
// as fake-gcs-server).
package gcs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2/google"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink/objsink"
)

// DefaultEndpoint is Google Cloud Storage's.
const DefaultEndpoint = "https://storage.googleapis.com"

// maxObject bounds what Get reads: a commit record or a part file.
const maxObject = 1 << 30

// Backend is a GCS bucket and prefix as an objsink.Backend.
type Backend struct {
	base, bucket, prefix string
	hc                   *http.Client
}

// Config is what a gcs sink is given in its URL or YAML.
type Config struct {
	// Bucket is the bucket. Required.
	Bucket string
	// Prefix is the prefix of every object name (default none).
	Prefix string
	// Endpoint is the API endpoint, e.g. http://127.0.0.1:4443 for
	// fake-gcs-server; it turns authentication off (default
	// DefaultEndpoint, with the application default credentials).
	Endpoint string
}

// Option configures a Backend beyond its Config. The backend has none
// yet; the type keeps New's shape the same as every other one's.
type Option func(*Backend)

// New returns the Backend of gs://BUCKET/PREFIX. Without cfg.Endpoint it
// finds the application default credentials at construction and fails if
// there are none; it validates the bucket name. Close releases the HTTP
// client's idle connections.
func New(ctx context.Context, cfg Config, opts ...Option) (*Backend, error) {
	bucket, prefix := cfg.Bucket, cfg.Prefix
	if bucket == "" || strings.ContainsAny(bucket, "/?#") {
		return nil, fmt.Errorf("%w: gcs: bucket %q", flightline.ErrInvalidInput, bucket)
	}
	b := &Backend{base: DefaultEndpoint, bucket: bucket, prefix: strings.Trim(prefix, "/")}
	if cfg.Endpoint != "" {
		b.base, b.hc = strings.TrimRight(cfg.Endpoint, "/"), &http.Client{}
	}
	for _, o := range opts {
		o(b)
	}
	if b.hc == nil {
		hc, err := google.DefaultClient(ctx, "https://www.googleapis.com/auth/devstorage.read_write")
		if err != nil {
			return nil, fmt.Errorf("%w: gcs: no application default credentials (GOOGLE_APPLICATION_CREDENTIALS or gcloud auth application-default login): %v", flightline.ErrUnauthenticated, err)
		}
		b.hc = hc
	}
	b.hc.Timeout = 5 * time.Minute
	return b, nil
}

// Close releases the HTTP client's idle connections and returns nil.
func (b *Backend) Close() error {
	b.hc.CloseIdleConnections()
	return nil
}

func (b *Backend) name(key string) string {
	if b.prefix == "" {
		return key
	}
	return b.prefix + "/" + key
}

func (b *Backend) objURL(key string) string {
	return b.base + "/storage/v1/b/" + url.PathEscape(b.bucket) + "/o/" + url.PathEscape(b.name(key))
}

// do sends req and classifies the answer: nil for 2xx, ErrExists for 412,
// fs.ErrNotExist for 404 on an object (notFound says what 404 means).
func (b *Backend) do(req *http.Request, what string, out any) error {
	resp, err := b.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w: gcs: %s: %v", flightline.ErrUnavailable, what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		if out == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			return nil
		}
		if w, ok := out.(*bytes.Buffer); ok {
			_, err := io.Copy(w, io.LimitReader(resp.Body, maxObject))
			if err != nil {
				return fmt.Errorf("%w: gcs: %s: %v", flightline.ErrUnavailable, what, err)
			}
			return nil
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return fmt.Errorf("%w: gcs: %s: %v", flightline.ErrUnavailable, what, err)
		}
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	detail := fmt.Sprintf("gcs: %s: HTTP %d: %s", what, resp.StatusCode, strings.TrimSpace(string(msg)))
	switch {
	case resp.StatusCode == http.StatusPreconditionFailed:
		return fmt.Errorf("%s: %w", detail, objsink.ErrExists)
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("%s: %w", detail, fs.ErrNotExist)
	case resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("%w: %s", flightline.ErrUnauthenticated, detail)
	case resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%w: %s", flightline.ErrPermissionDenied, detail)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("%w: %s", flightline.ErrUnavailable, detail)
	}
	return fmt.Errorf("%w: %s", flightline.ErrInvalidInput, detail)
}

// missingBucket turns a 404 of a write into ErrNotFound naming the bucket.
func (b *Backend) missingBucket(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: gcs: bucket %q: %v", flightline.ErrNotFound, b.bucket, err)
	}
	return err
}

func (b *Backend) upload(ctx context.Context, key string, data []byte, ifAbsent bool) error {
	q := url.Values{"uploadType": {"media"}, "name": {b.name(key)}}
	if ifAbsent {
		q.Set("ifGenerationMatch", "0")
	}
	u := b.base + "/upload/storage/v1/b/" + url.PathEscape(b.bucket) + "/o?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: gcs: %v", flightline.ErrInvalidInput, err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	return b.missingBucket(b.do(req, "put "+b.name(key), nil))
}

// Put implements objsink.Backend: one media upload, which GCS makes
// visible whole or not at all.
func (b *Backend) Put(ctx context.Context, key string, data []byte) error {
	return b.upload(ctx, key, data, false)
}

// PutIfAbsent implements objsink.Backend with ifGenerationMatch=0.
func (b *Backend) PutIfAbsent(ctx context.Context, key string, data []byte) error {
	return b.upload(ctx, key, data, true)
}

// Publish implements objsink.Backend with a server-side copy under
// ifGenerationMatch=0.
func (b *Backend) Publish(ctx context.Context, from, to string) error {
	u := b.objURL(from) + "/copyTo/b/" + url.PathEscape(b.bucket) + "/o/" + url.PathEscape(b.name(to)) + "?ifGenerationMatch=0"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return fmt.Errorf("%w: gcs: %v", flightline.ErrInvalidInput, err)
	}
	return b.do(req, "copy "+b.name(from)+" to "+b.name(to), nil)
}

// Get implements objsink.Backend.
func (b *Backend) Get(ctx context.Context, key string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.objURL(key)+"?alt=media", nil)
	if err != nil {
		return nil, fmt.Errorf("%w: gcs: %v", flightline.ErrInvalidInput, err)
	}
	var buf bytes.Buffer
	if err := b.do(req, "get "+b.name(key), &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Exists implements objsink.Backend.
func (b *Backend) Exists(ctx context.Context, key string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.objURL(key)+"?fields=name", nil)
	if err != nil {
		return false, fmt.Errorf("%w: gcs: %v", flightline.ErrInvalidInput, err)
	}
	err = b.do(req, "stat "+b.name(key), nil)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// List implements objsink.Backend: the objects directly under dir.
func (b *Backend) List(ctx context.Context, dir string) ([]objsink.Object, error) {
	prefix := b.name(dir) + "/"
	var out []objsink.Object
	token := ""
	for {
		q := url.Values{"prefix": {prefix}, "delimiter": {"/"}, "fields": {"items(name,updated),nextPageToken"}}
		if token != "" {
			q.Set("pageToken", token)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/storage/v1/b/"+url.PathEscape(b.bucket)+"/o?"+q.Encode(), nil)
		if err != nil {
			return nil, fmt.Errorf("%w: gcs: %v", flightline.ErrInvalidInput, err)
		}
		var page struct {
			Items []struct {
				Name    string    `json:"name"`
				Updated time.Time `json:"updated"`
			} `json:"items"`
			NextPageToken string `json:"nextPageToken"`
		}
		if err := b.do(req, "list "+prefix, &page); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%w: gcs: bucket %q: %v", flightline.ErrNotFound, b.bucket, err)
			}
			return nil, err
		}
		for _, it := range page.Items {
			name := strings.TrimPrefix(it.Name, prefix)
			if name == "" || strings.Contains(name, "/") {
				continue
			}
			out = append(out, objsink.Object{Name: name, Modified: it.Updated})
		}
		if page.NextPageToken == "" {
			return out, nil
		}
		token = page.NextPageToken
	}
}

// Delete implements objsink.Backend.
func (b *Backend) Delete(ctx context.Context, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, b.objURL(key), nil)
	if err != nil {
		return fmt.Errorf("%w: gcs: %v", flightline.ErrInvalidInput, err)
	}
	err = b.do(req, "delete "+b.name(key), nil)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
