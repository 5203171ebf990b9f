// Package unitycatalog is a small typed client for the few Unity Catalog
// REST calls Flightline's Databricks endpoints make: resolve a table
// (GET /api/2.1/unity-catalog/tables/{full_name}) and vend temporary
// credentials for it (POST /api/2.1/unity-catalog/temporary-table-credentials),
// authenticated with a Databricks personal access token or OAuth
// machine-to-machine (client credentials against {host}/oidc/v1/token).
//
// Errors wrap flightline's sentinels: 401 ErrUnauthenticated, 403
// ErrPermissionDenied, 404 ErrNotFound, 400 ErrInvalidInput, 429 and 5xx and
// network failures ErrUnavailable; the catalog's error_code and message are
// kept (APIError). Secrets (the token, the client secret, vended keys)
// never appear in errors or logs.
//
// Vended (vend.go) turns temporary credentials into an
// aws.CredentialsProvider that re-vends in the background before they
// expire.
package unitycatalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/flightline/flightline"
)

// The environment variables Config.FromEnv reads, as the Databricks tools
// name them.
const (
	EnvHost         = "DATABRICKS_HOST"
	EnvToken        = "DATABRICKS_TOKEN"
	EnvClientID     = "DATABRICKS_CLIENT_ID"
	EnvClientSecret = "DATABRICKS_CLIENT_SECRET"
)

// Config says where the workspace is and how to authenticate: Token (a
// personal access token) or ClientID and ClientSecret (OAuth M2M), not
// both.
type Config struct {
	Host         string // https://<workspace>; a bare host name means https
	Token        string
	ClientID     string
	ClientSecret string
	// HTTPClient defaults to a client with a 60 s timeout.
	HTTPClient *http.Client
}

// FromEnv returns c with what it lacks taken from the DATABRICKS_*
// variables: the host when Host is empty, and the credentials only when c
// has none at all (options given explicitly are never mixed with the
// environment's).
func (c Config) FromEnv() Config {
	if c.Host == "" {
		c.Host = os.Getenv(EnvHost)
	}
	if c.Token == "" && c.ClientID == "" && c.ClientSecret == "" {
		c.Token = os.Getenv(EnvToken)
		c.ClientID = os.Getenv(EnvClientID)
		c.ClientSecret = os.Getenv(EnvClientSecret)
		if c.Token != "" && (c.ClientID != "" || c.ClientSecret != "") {
			// Both in the environment: the token wins, as in the
			// Databricks CLI's default order.
			c.ClientID, c.ClientSecret = "", ""
		}
	}
	return c
}

// String describes c without its secrets.
func (c Config) String() string {
	switch {
	case c.Token != "":
		return fmt.Sprintf("unity catalog %s (personal access token)", c.Host)
	case c.ClientID != "":
		return fmt.Sprintf("unity catalog %s (OAuth M2M, client %s)", c.Host, c.ClientID)
	}
	return fmt.Sprintf("unity catalog %s (no credentials)", c.Host)
}

// Client calls one workspace's Unity Catalog API. It is safe for
// concurrent use.
type Client struct {
	base string // scheme://host, no trailing slash
	hc   *http.Client
	auth authenticator
}

type authenticator interface {
	header(ctx context.Context) (string, error)
}

// New returns a client for c. It does not call the workspace.
func New(c Config) (*Client, error) {
	host := strings.TrimRight(c.Host, "/")
	if host == "" {
		return nil, fmt.Errorf("%w: unity catalog: no workspace host (option host or %s)", flightline.ErrInvalidInput, EnvHost)
	}
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("%w: unity catalog: host %q: want https://HOST[:PORT]", flightline.ErrInvalidInput, c.Host)
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	cl := &Client{base: u.Scheme + "://" + u.Host, hc: hc}
	switch {
	case c.Token != "" && (c.ClientID != "" || c.ClientSecret != ""):
		return nil, fmt.Errorf("%w: unity catalog: give either a token or client_id and client_secret, not both", flightline.ErrInvalidInput)
	case c.Token != "":
		cl.auth = pat(c.Token)
	case c.ClientID != "" && c.ClientSecret != "":
		cl.auth = &oauthM2M{c: cl, id: c.ClientID, secret: c.ClientSecret}
	case c.ClientID != "" || c.ClientSecret != "":
		return nil, fmt.Errorf("%w: unity catalog: OAuth M2M needs both client_id and client_secret", flightline.ErrInvalidInput)
	default:
		return nil, fmt.Errorf("%w: unity catalog: no credentials: give a token (%s) or client_id and client_secret (%s, %s)",
			flightline.ErrUnauthenticated, EnvToken, EnvClientID, EnvClientSecret)
	}
	return cl, nil
}

// Host is the workspace URL the client calls.
func (c *Client) Host() string { return c.base }

type pat string

func (p pat) header(context.Context) (string, error) { return "Bearer " + string(p), nil }

// oauthM2M gets workspace tokens with the client-credentials grant and
// renews them before they expire.
type oauthM2M struct {
	c          *Client
	id, secret string
	mu         sync.Mutex
	token      string
	exp        time.Time
}

// tokenRefreshMargin is how long before its expiry a token is renewed (at
// most half its life).
const tokenRefreshMargin = 5 * time.Minute

func (o *oauthM2M) header(ctx context.Context) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.token != "" && time.Now().Before(o.exp) {
		return "Bearer " + o.token, nil
	}
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"all-apis"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.c.base+"/oidc/v1/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.SetBasicAuth(o.id, o.secret)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	var tok struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	if err := o.c.do(req, "OAuth token", &tok); err != nil {
		return "", err
	}
	if tok.AccessToken == "" {
		return "", fmt.Errorf("unity catalog: OAuth token endpoint %s/oidc/v1/token answered without access_token: %w", o.c.base, flightline.ErrUnavailable)
	}
	now := time.Now()
	life := time.Duration(tok.ExpiresIn) * time.Second
	if life <= 0 {
		life = time.Hour // the documented default lifetime
	}
	o.token = tok.AccessToken
	o.exp = now.Add(life - min(tokenRefreshMargin, life/2))
	return "Bearer " + o.token, nil
}

// forget drops the token sent as header h, unless it was renewed meanwhile.
func (o *oauthM2M) forget(h string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if "Bearer "+o.token == h {
		o.token = ""
	}
}

// APIError is an error answer of the workspace: its HTTP status and, when
// the body is the documented JSON, the catalog's error_code and message
// (OAuth errors: error and error_description). It unwraps to the
// flightline sentinel its status stands for.
type APIError struct {
	Call      string // what was called, e.g. "get table main.sales.orders"
	Status    int
	ErrorCode string
	Message   string
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.ErrorCode != "" {
		return fmt.Sprintf("unity catalog: %s: HTTP %d %s: %s", e.Call, e.Status, e.ErrorCode, msg)
	}
	return fmt.Sprintf("unity catalog: %s: HTTP %d: %s", e.Call, e.Status, msg)
}

// Unwrap returns the sentinel of the status.
func (e *APIError) Unwrap() error {
	switch {
	case e.Status == http.StatusUnauthorized:
		return flightline.ErrUnauthenticated
	case e.Status == http.StatusForbidden:
		return flightline.ErrPermissionDenied
	case e.Status == http.StatusNotFound:
		return flightline.ErrNotFound
	case e.Status == http.StatusTooManyRequests || e.Status >= 500:
		return flightline.ErrUnavailable
	case e.Status >= 400 && e.Status < 500:
		return flightline.ErrInvalidInput
	}
	return nil
}

// do sends req and decodes a 2xx JSON answer into out.
func (c *Client) do(req *http.Request, call string, out any) error {
	resp, err := c.hc.Do(req)
	if err != nil {
		// The URL holds no secret (tokens travel in headers); err may
		// repeat the URL only.
		var ne net.Error
		if errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || strings.Contains(err.Error(), "connection refused") {
			return fmt.Errorf("unity catalog: %s: %v: %w", call, err, flightline.ErrUnavailable)
		}
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return fmt.Errorf("unity catalog: %s: %w", call, ctxErr)
		}
		return fmt.Errorf("unity catalog: %s: %v: %w", call, err, flightline.ErrUnavailable)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("unity catalog: %s: reading the answer: %v: %w", call, err, flightline.ErrUnavailable)
	}
	if resp.StatusCode/100 != 2 {
		e := &APIError{Call: call, Status: resp.StatusCode}
		var eb struct {
			ErrorCode string `json:"error_code"`
			Message   string `json:"message"`
			OAuthErr  string `json:"error"`
			OAuthDesc string `json:"error_description"`
		}
		if json.Unmarshal(body, &eb) == nil {
			e.ErrorCode, e.Message = eb.ErrorCode, eb.Message
			if e.ErrorCode == "" && e.Message == "" {
				e.ErrorCode, e.Message = eb.OAuthErr, eb.OAuthDesc
			}
		} else {
			e.Message = strings.TrimSpace(string(body[:min(len(body), 200)]))
		}
		return e
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("unity catalog: %s: malformed answer: %v: %w", call, err, flightline.ErrUnavailable)
	}
	return nil
}

func (c *Client) call(ctx context.Context, method, path, call string, in, out any) error {
	var payload []byte
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		payload = b
	}
	for attempt := 0; ; attempt++ {
		var body io.Reader
		if payload != nil {
			body = bytes.NewReader(payload)
		}
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
		if err != nil {
			return err
		}
		h, err := c.auth.header(ctx)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", h)
		req.Header.Set("Accept", "application/json")
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		err = c.do(req, call, out)
		var ae *APIError
		if o, ok := c.auth.(*oauthM2M); ok && attempt == 0 && errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
			// The workspace no longer honours the OAuth token (revoked
			// or expired early): get a new one and try once more.
			o.forget(h)
			continue
		}
		return err
	}
}

// Table types and formats (TableInfo.table_type, data_source_format).
const (
	External = "EXTERNAL"
	Managed  = "MANAGED"
	Delta    = "DELTA"
)

// Table is the part of a TableInfo the endpoints use.
type Table struct {
	Name             string `json:"name"`
	CatalogName      string `json:"catalog_name"`
	SchemaName       string `json:"schema_name"`
	FullName         string `json:"full_name"`
	TableID          string `json:"table_id"`
	TableType        string `json:"table_type"`
	DataSourceFormat string `json:"data_source_format"`
	StorageLocation  string `json:"storage_location"`
}

// GetTable resolves catalog.schema.table. A missing table is an APIError
// wrapping flightline.ErrNotFound.
func (c *Client) GetTable(ctx context.Context, fullName string) (*Table, error) {
	if err := CheckName(fullName); err != nil {
		return nil, err
	}
	var t Table
	call := "get table " + fullName
	if err := c.call(ctx, http.MethodGet, "/api/2.1/unity-catalog/tables/"+url.PathEscape(fullName), call, nil, &t); err != nil {
		return nil, err
	}
	if t.FullName == "" {
		t.FullName = fullName
	}
	if t.TableID == "" {
		return nil, fmt.Errorf("unity catalog: %s: the answer has no table_id: %w", call, flightline.ErrUnavailable)
	}
	return &t, nil
}

// CheckName checks that name is catalog.schema.table with three non-empty
// parts.
func CheckName(name string) error {
	parts := strings.Split(name, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return fmt.Errorf("%w: unity catalog: table name %q: want catalog.schema.table", flightline.ErrInvalidInput, name)
	}
	return nil
}

// Operation is what vended credentials allow.
type Operation string

// The operations of temporary-table-credentials.
const (
	Read      Operation = "READ"
	ReadWrite Operation = "READ_WRITE"
)

// AWSCredentials are AWS session credentials.
type AWSCredentials struct {
	AccessKeyID     string `json:"access_key_id"`
	SecretAccessKey string `json:"secret_access_key"`
	SessionToken    string `json:"session_token"`
}

// TempCredentials is a temporary-table-credentials answer. Expiration is
// zero when the answer has no expiration_time (the OSS server with fixed
// test credentials omits it): the credentials then do not expire.
type TempCredentials struct {
	AWS        *AWSCredentials
	Expiration time.Time
	URL        string
}

// TemporaryTableCredentials vends credentials for the table with id
// tableID. An answer without AWS credentials (a table on GCS or Azure) is
// ErrInvalidInput.
func (c *Client) TemporaryTableCredentials(ctx context.Context, tableID string, op Operation) (*TempCredentials, error) {
	var out struct {
		AWS        *AWSCredentials `json:"aws_temp_credentials"`
		Expiration *int64          `json:"expiration_time"`
		URL        string          `json:"url"`
	}
	call := fmt.Sprintf("vend %s credentials for table %s", op, tableID)
	in := map[string]string{"table_id": tableID, "operation": string(op)}
	if err := c.call(ctx, http.MethodPost, "/api/2.1/unity-catalog/temporary-table-credentials", call, in, &out); err != nil {
		return nil, err
	}
	if out.AWS == nil || out.AWS.AccessKeyID == "" || out.AWS.SecretAccessKey == "" {
		return nil, fmt.Errorf("%w: unity catalog: %s: no AWS credentials in the answer (only S3 tables are supported)", flightline.ErrInvalidInput, call)
	}
	tc := &TempCredentials{AWS: out.AWS, URL: out.URL}
	if out.Expiration != nil && *out.Expiration > 0 {
		tc.Expiration = time.UnixMilli(*out.Expiration)
	}
	return tc, nil
}
