package kafkadecode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// ErrUnknownSchema means the registry has no schema with the requested id,
// or the schema is not Avro. It is not retryable: records carrying that id
// are dead-lettered.
var ErrUnknownSchema = errors.New("kafkadecode: unknown schema id")

// Registry is a minimal Confluent-compatible schema-registry client: it
// fetches schemas by id (GET {base}/schemas/ids/{id}) and caches them
// forever, since ids are immutable. It is safe for concurrent use.
type Registry struct {
	base   string
	client *http.Client
	user   string
	pass   string

	mu    sync.Mutex
	cache map[uint32]string
}

// RegistryOption configures a Registry.
type RegistryOption func(*Registry)

// RegistryHTTPClient sets the HTTP client (default http.DefaultClient).
func RegistryHTTPClient(c *http.Client) RegistryOption { return func(r *Registry) { r.client = c } }

// RegistryBasicAuth sets HTTP basic-auth credentials.
func RegistryBasicAuth(user, pass string) RegistryOption {
	return func(r *Registry) { r.user, r.pass = user, pass }
}

// NewRegistry returns a client for the registry at baseURL (http or https).
func NewRegistry(baseURL string, opts ...RegistryOption) (*Registry, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: registry URL %q", ErrInvalidOption, baseURL)
	}
	r := &Registry{base: strings.TrimRight(baseURL, "/"), client: http.DefaultClient, cache: map[uint32]string{}}
	for _, o := range opts {
		o(r)
	}
	if r.client == nil {
		return nil, fmt.Errorf("%w: nil HTTP client", ErrInvalidOption)
	}
	return r, nil
}

// Schema returns the Avro schema text with the given id. Transport errors
// and 5xx/429 answers wrap ErrSchemaRegistry (retryable); a 404 or a
// non-Avro schema wraps ErrUnknownSchema.
func (r *Registry) Schema(ctx context.Context, id uint32) (string, error) {
	r.mu.Lock()
	s, ok := r.cache[id]
	r.mu.Unlock()
	if ok {
		return s, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/schemas/ids/"+strconv.FormatUint(uint64(id), 10), nil)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrSchemaRegistry, err)
	}
	req.Header.Set("Accept", "application/vnd.schemaregistry.v1+json, application/json")
	if r.user != "" {
		req.SetBasicAuth(r.user, r.pass)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("%w: schema id %d: %w", ErrSchemaRegistry, id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("%w: schema id %d: reading response: %w", ErrSchemaRegistry, id, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return "", fmt.Errorf("%w: %d (registry answered 404)", ErrUnknownSchema, id)
	case resp.StatusCode != http.StatusOK:
		return "", fmt.Errorf("%w: schema id %d: HTTP %d", ErrSchemaRegistry, id, resp.StatusCode)
	}
	var doc struct {
		Schema     string `json:"schema"`
		SchemaType string `json:"schemaType"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Schema == "" {
		return "", fmt.Errorf("%w: schema id %d: malformed registry response", ErrSchemaRegistry, id)
	}
	if doc.SchemaType != "" && doc.SchemaType != "AVRO" {
		return "", fmt.Errorf("%w: %d is a %s schema, not Avro", ErrUnknownSchema, id, doc.SchemaType)
	}
	r.mu.Lock()
	r.cache[id] = doc.Schema
	r.mu.Unlock()
	return doc.Schema, nil
}
