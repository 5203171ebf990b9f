// Package uctest is a fake Unity Catalog server for tests: the two REST
// calls Flightline uses (GET /api/2.1/unity-catalog/tables/{full_name},
// POST /api/2.1/unity-catalog/temporary-table-credentials) and the
// workspace OAuth token endpoint (POST /oidc/v1/token), with the request
// and answer shapes and error bodies ({"error_code", "message"}) the Unity
// Catalog REST API documents, plus hooks tests turn: credential lifetime,
// failing vends, refused vends, tables of any type, wrong tokens.
//
// It is a fake, not a catalog: it holds tables in memory, checks no
// privileges beyond the hooks, and vends credentials from a Vender: moto's
// STS (MotoSTS: real AssumeRole session credentials that moto's S3 accepts)
// or fixed keys. moto checks neither session policies nor expiry, so the
// server also runs an S3 proxy (S3Proxy) in front of moto that refuses,
// with the 403 ExpiredToken AWS sends, any request signed with a vended
// access key that arrives after that key's expiry, and refuses with 403
// AccessDenied the keys of tables marked with DenyS3 (a session policy
// narrower than the table).
package uctest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/flightline/flightline/internal/unitycatalog"
)

// Vender makes the credentials the server vends for a table.
type Vender interface {
	Vend(ctx context.Context, t unitycatalog.Table, op unitycatalog.Operation) (unitycatalog.AWSCredentials, error)
}

// VenderFunc adapts a function to Vender.
type VenderFunc func(ctx context.Context, t unitycatalog.Table, op unitycatalog.Operation) (unitycatalog.AWSCredentials, error)

// Vend implements Vender.
func (f VenderFunc) Vend(ctx context.Context, t unitycatalog.Table, op unitycatalog.Operation) (unitycatalog.AWSCredentials, error) {
	return f(ctx, t, op)
}

// Static vends fresh random access key ids that all carry the same secret
// and a session token: for unit tests that never reach S3.
func Static() Vender {
	return VenderFunc(func(context.Context, unitycatalog.Table, unitycatalog.Operation) (unitycatalog.AWSCredentials, error) {
		return unitycatalog.AWSCredentials{AccessKeyID: "ASIA" + strings.ToUpper(randHex(8)), SecretAccessKey: "secret", SessionToken: "token-" + randHex(8)}, nil
	})
}

// MotoSTS vends session credentials from STS AssumeRole on the moto server
// at endpoint (moto accepts any signing keys).
func MotoSTS(endpoint string) Vender {
	c := sts.New(sts.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", "")})
	return VenderFunc(func(ctx context.Context, t unitycatalog.Table, op unitycatalog.Operation) (unitycatalog.AWSCredentials, error) {
		out, err := c.AssumeRole(ctx, &sts.AssumeRoleInput{
			RoleArn:         aws.String("arn:aws:iam::123456789012:role/unity-catalog-" + t.TableID),
			RoleSessionName: aws.String(strings.ToLower(string(op)) + "-" + randHex(4)),
			DurationSeconds: aws.Int32(900),
		})
		if err != nil {
			return unitycatalog.AWSCredentials{}, err
		}
		return unitycatalog.AWSCredentials{AccessKeyID: aws.ToString(out.Credentials.AccessKeyId),
			SecretAccessKey: aws.ToString(out.Credentials.SecretAccessKey), SessionToken: aws.ToString(out.Credentials.SessionToken)}, nil
	})
}

// Server is the fake catalog. Its hooks are safe to turn while it serves.
type Server struct {
	// URL is the workspace host, http://127.0.0.1:PORT.
	URL string
	// Token is the personal access token it accepts; ClientID and
	// ClientSecret the OAuth M2M client it knows.
	Token, ClientID, ClientSecret string

	srv    *httptest.Server
	vender Vender

	mu         sync.Mutex
	tables     map[string]unitycatalog.Table // by full name
	auto       map[string]string             // catalog.schema -> location prefix
	credLife   time.Duration                 // 0: no expiration_time
	tokenLife  time.Duration
	tokens     map[string]time.Time // OAuth access token -> expiry
	failUntil  time.Time
	failAlways bool
	denyVend   map[string]bool // table full names
	denyS3     map[string]bool // table ids
	keys       map[string]vended
	stats      Stats
}

type vended struct {
	table   string
	tableID string
	op      unitycatalog.Operation
	exp     time.Time // zero: never
}

// Stats counts what the server saw.
type Stats struct {
	Vends, FailedVends, TokenGrants, Unauthenticated int
	// S3Requests counts the requests through the proxy signed with vended
	// keys; ExpiredRejected those refused because the key had expired;
	// DeniedRejected those refused by DenyS3.
	S3Requests, ExpiredRejected, DeniedRejected int
}

// New starts a fake catalog vending with v, stopped at the test's end.
// Credentials expire after an hour until SetCredentialLife changes it;
// OAuth tokens after an hour until SetTokenLife.
func New(t testing.TB, v Vender) *Server {
	s := &Server{Token: "dapi-" + randHex(16), ClientID: "client-" + randHex(4), ClientSecret: "dose-" + randHex(16), vender: v,
		tables: map[string]unitycatalog.Table{}, auto: map[string]string{}, credLife: time.Hour, tokenLife: time.Hour,
		tokens: map[string]time.Time{}, denyVend: map[string]bool{}, denyS3: map[string]bool{}, keys: map[string]vended{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/2.1/unity-catalog/tables/{full_name}", s.getTable)
	mux.HandleFunc("POST /api/2.1/unity-catalog/temporary-table-credentials", s.vend)
	mux.HandleFunc("POST /oidc/v1/token", s.token)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	t.Cleanup(s.srv.Close)
	return s
}

// AddTable registers a table (table_id is filled in when empty) and
// returns it.
func (s *Server) AddTable(tb unitycatalog.Table) unitycatalog.Table {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addLocked(tb)
}

func (s *Server) addLocked(tb unitycatalog.Table) unitycatalog.Table {
	parts := strings.SplitN(tb.FullName, ".", 3)
	if len(parts) == 3 {
		tb.CatalogName, tb.SchemaName, tb.Name = parts[0], parts[1], parts[2]
	}
	if tb.TableID == "" {
		tb.TableID = uuid()
	}
	s.tables[tb.FullName] = tb
	return tb
}

// AddExternal registers an EXTERNAL DELTA table at location.
func (s *Server) AddExternal(fullName, location string) unitycatalog.Table {
	return s.AddTable(unitycatalog.Table{FullName: fullName, TableType: unitycatalog.External,
		DataSourceFormat: unitycatalog.Delta, StorageLocation: location})
}

// AutoExternal makes every table name in catalog.schema that is not
// registered resolve, on first lookup, to a new EXTERNAL DELTA table at
// locationPrefix/<name> (conformance suites name their targets freely).
func (s *Server) AutoExternal(catalogSchema, locationPrefix string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auto[catalogSchema] = strings.TrimRight(locationPrefix, "/")
}

// SetCredentialLife sets the life of the credentials vended from now on;
// 0 omits expiration_time (as the OSS server does).
func (s *Server) SetCredentialLife(d time.Duration) { s.mu.Lock(); s.credLife = d; s.mu.Unlock() }

// SetTokenLife sets the expires_in of OAuth tokens granted from now on.
func (s *Server) SetTokenLife(d time.Duration) { s.mu.Lock(); s.tokenLife = d; s.mu.Unlock() }

// FailVendsFor makes vends fail with 503 TEMPORARILY_UNAVAILABLE for d
// from now.
func (s *Server) FailVendsFor(d time.Duration) {
	s.mu.Lock()
	s.failUntil = time.Now().Add(d)
	s.mu.Unlock()
}

// FailVends makes every vend fail with 503 until called with false.
func (s *Server) FailVends(on bool) { s.mu.Lock(); s.failAlways = on; s.mu.Unlock() }

// DenyVend makes vends for the table answer 403 PERMISSION_DENIED.
func (s *Server) DenyVend(fullName string, on bool) {
	s.mu.Lock()
	s.denyVend[fullName] = on
	s.mu.Unlock()
}

// DenyS3 makes the S3 proxy refuse, with 403 AccessDenied, every request
// signed with keys vended for the table (a session policy narrower than
// the table).
func (s *Server) DenyS3(fullName string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.denyS3[s.tables[fullName].TableID] = on
}

// RevokeTokens forgets every OAuth token granted so far: requests carrying
// them get 401 (a token the workspace no longer honours).
func (s *Server) RevokeTokens() { s.mu.Lock(); s.tokens = map[string]time.Time{}; s.mu.Unlock() }

// Stats returns the counters.
func (s *Server) Stats() Stats { s.mu.Lock(); defer s.mu.Unlock(); return s.stats }

// writeError sends the documented error body.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error_code": code, "message": msg, "details": []any{}})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// authorized checks the bearer token: the PAT or a live OAuth token.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	exp, isOAuth := s.tokens[tok]
	good := ok && tok != "" && (tok == s.Token || (isOAuth && time.Now().Before(exp)))
	if !good {
		s.stats.Unauthenticated++
	}
	s.mu.Unlock()
	if !good {
		writeError(w, http.StatusUnauthorized, "UNAUTHENTICATED", "Invalid access token.")
	}
	return good
}

func (s *Server) lookup(name string) (unitycatalog.Table, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tb, ok := s.tables[name]; ok {
		return tb, true
	}
	parts := strings.Split(name, ".")
	if len(parts) != 3 {
		return unitycatalog.Table{}, false
	}
	prefix, ok := s.auto[parts[0]+"."+parts[1]]
	if !ok {
		return unitycatalog.Table{}, false
	}
	return s.addLocked(unitycatalog.Table{FullName: name, TableType: unitycatalog.External,
		DataSourceFormat: unitycatalog.Delta, StorageLocation: prefix + "/" + parts[2]}), true
}

func (s *Server) getTable(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	name := r.PathValue("full_name")
	tb, ok := s.lookup(name)
	if !ok {
		writeError(w, http.StatusNotFound, "TABLE_DOES_NOT_EXIST", fmt.Sprintf("Table '%s' does not exist.", name))
		return
	}
	writeJSON(w, map[string]any{"name": tb.Name, "catalog_name": tb.CatalogName, "schema_name": tb.SchemaName,
		"full_name": tb.FullName, "table_id": tb.TableID, "table_type": tb.TableType,
		"data_source_format": tb.DataSourceFormat, "storage_location": tb.StorageLocation,
		"columns": []any{}, "created_at": time.Now().UnixMilli()})
}

func (s *Server) vend(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var in struct {
		TableID   string `json:"table_id"`
		Operation string `json:"operation"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.TableID == "" {
		writeError(w, http.StatusBadRequest, "INVALID_PARAMETER_VALUE", "table_id is required")
		return
	}
	op := unitycatalog.Operation(in.Operation)
	if op != unitycatalog.Read && op != unitycatalog.ReadWrite {
		writeError(w, http.StatusBadRequest, "INVALID_PARAMETER_VALUE", fmt.Sprintf("Invalid operation %q: want READ or READ_WRITE", in.Operation))
		return
	}
	s.mu.Lock()
	var tb unitycatalog.Table
	found := false
	for _, t := range s.tables {
		if t.TableID == in.TableID {
			tb, found = t, true
		}
	}
	failing := s.failAlways || time.Now().Before(s.failUntil)
	denied := s.denyVend[tb.FullName]
	life := s.credLife
	if failing {
		s.stats.FailedVends++
	}
	s.mu.Unlock()
	switch {
	case failing:
		writeError(w, http.StatusServiceUnavailable, "TEMPORARILY_UNAVAILABLE", "The service is temporarily unavailable.")
		return
	case !found:
		writeError(w, http.StatusNotFound, "TABLE_DOES_NOT_EXIST", fmt.Sprintf("Table with id '%s' does not exist.", in.TableID))
		return
	case denied:
		writeError(w, http.StatusForbidden, "PERMISSION_DENIED", fmt.Sprintf("User does not have EXTERNAL USE SCHEMA on Schema '%s.%s'.", tb.CatalogName, tb.SchemaName))
		return
	case op == unitycatalog.ReadWrite && tb.TableType != unitycatalog.External:
		writeError(w, http.StatusForbidden, "PERMISSION_DENIED", fmt.Sprintf("Table '%s' is not an external table: write credentials are vended for external tables only.", tb.FullName))
		return
	}
	c, err := s.vender.Vend(r.Context(), tb, op)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR", "vending failed: "+err.Error())
		return
	}
	out := map[string]any{"aws_temp_credentials": c, "url": tb.StorageLocation}
	k := vended{table: tb.FullName, tableID: tb.TableID, op: op}
	if life > 0 {
		k.exp = time.Now().Add(life)
		out["expiration_time"] = k.exp.UnixMilli()
	}
	s.mu.Lock()
	s.keys[c.AccessKeyID] = k
	s.stats.Vends++
	s.mu.Unlock()
	writeJSON(w, out)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	id, secret, ok := r.BasicAuth()
	if err := r.ParseForm(); err != nil {
		ok = false
	}
	if !ok || id != s.ClientID || secret != s.ClientSecret {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "Client authentication failed"})
		return
	}
	if r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("scope") != "all-apis" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_request", "error_description": "want grant_type=client_credentials and scope=all-apis"})
		return
	}
	tok := "oauth-" + randHex(16)
	s.mu.Lock()
	life := s.tokenLife
	s.tokens[tok] = time.Now().Add(life)
	s.stats.TokenGrants++
	s.mu.Unlock()
	writeJSON(w, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int64(life / time.Second), "scope": "all-apis"})
}

var credRe = regexp.MustCompile(`Credential=([A-Za-z0-9]+)/`)

// S3Proxy starts a reverse proxy to the S3 server at upstream (moto) that
// enforces what moto does not: it refuses with 403 ExpiredToken a request
// signed with a key this server vended that arrives after the key's
// expiry, and with 403 AccessDenied a key of a table marked by DenyS3.
// Keys it did not vend pass unchecked. It returns the proxy's URL.
func (s *Server) S3Proxy(t testing.TB, upstream string) string {
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		if !errors.Is(err, context.Canceled) { // a client that gave up is no news
			log.Printf("uctest S3 proxy: %s %s: %v", r.Method, r.URL.Path, err)
		}
		w.WriteHeader(http.StatusBadGateway)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("X-Amz-Credential")
		if m := credRe.FindStringSubmatch(r.Header.Get("Authorization")); m != nil {
			key = m[1]
		} else if i := strings.IndexByte(key, '/'); i > 0 {
			key = key[:i]
		}
		s.mu.Lock()
		k, ok := s.keys[key]
		expired := ok && !k.exp.IsZero() && !time.Now().Before(k.exp)
		denied := ok && s.denyS3[k.tableID]
		if ok {
			s.stats.S3Requests++
			if expired {
				s.stats.ExpiredRejected++
			} else if denied {
				s.stats.DeniedRejected++
			}
		}
		s.mu.Unlock()
		switch {
		case expired:
			s3Error(w, "ExpiredToken", "The provided token has expired.")
		case denied:
			s3Error(w, "AccessDenied", "Access Denied")
		default:
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func s3Error(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusForbidden)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message><RequestId>uctest</RequestId></Error>`, code, msg)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func uuid() string {
	h := randHex(16)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Close stops the server (the catalog goes away).
func (s *Server) Close() { s.srv.Close() }
