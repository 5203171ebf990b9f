package iceberg

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	restcat "github.com/apache/iceberg-go/catalog/rest"

	"github.com/flightline/flightline"
)

// The properties of an Iceberg REST catalog, as iceberg-go's catalog/rest
// (and Java's and pyiceberg's REST clients) name them.
const (
	RESTCredential = "credential"           // OAuth2 client credentials, CLIENT_ID:SECRET (or SECRET)
	RESTToken      = "token"                // a bearer token
	RESTScope      = "scope"                // the OAuth2 scope (default catalog)
	RESTAudience   = "audience"             // the OAuth2 audience
	RESTResource   = "resource"             // the OAuth2 resource
	RESTOAuthURI   = "oauth2-server-uri"    // the token endpoint (default URI/v1/oauth/tokens)
	RESTPrefix     = "prefix"               // a path prefix after /v1 (the server's config usually sets it)
	RESTSigV4      = "rest.sigv4-enabled"   // "true": sign requests with AWS SigV4
	RESTSignRegion = "rest.signing-region"  // SigV4's region
	RESTSignName   = "rest.signing-name"    // SigV4's service (default execute-api)
	RESTSkipVerify = "rest.tls.skip-verify" // "true": do not verify the server's certificate
)

// RESTKeys are the properties REST takes; RESTSecretKeys those of them
// whose values are secrets.
var (
	RESTKeys       = []string{RESTCredential, RESTToken, RESTScope, RESTAudience, RESTResource, RESTOAuthURI, RESTPrefix, RESTSigV4, RESTSignRegion, RESTSignName, RESTSkipVerify}
	RESTSecretKeys = []string{RESTCredential, RESTToken}
)

// restConf is a REST catalog to build in New.
type restConf struct {
	uri   string
	props map[string]string
	extra []restcat.Option // for tests: a transport
}

// setREST lists the sink's tables in the Iceberg REST catalog at uri
// (http(s)://HOST[:PORT][/PATH], the path before /v1) instead of the SQL
// catalog, with iceberg-go's catalog/rest; props are its properties
// (RESTKeys). Config.Warehouse, when not empty, is sent as the catalog's
// "warehouse" property: what the server takes it to be (a location, or
// a catalog or warehouse name) is the server's business, and the server
// places new tables. The file-IO properties (Properties) are passed on
// to the catalog too; those the server returns (vended credentials)
// override them.
//
// A commit is the REST UpdateTable request with the requirement
// assert-ref-snapshot-id on the main branch; the server refuses it (409)
// when the branch moved, and the writer then reloads and decides, as on
// the SQL catalog (see the package doc).
func setREST(uri string, props map[string]string) Option {
	return func(o *options) error {
		u, err := url.Parse(uri)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: iceberg sink: REST catalog uri %q: want http(s)://HOST[:PORT][/PATH]", flightline.ErrInvalidInput, uri)
		}
		for k, v := range props {
			if !slices.Contains(RESTKeys, k) {
				return fmt.Errorf("%w: iceberg sink: unknown REST catalog property %q (known: %s)", flightline.ErrInvalidInput, k, strings.Join(RESTKeys, ", "))
			}
			if k == RESTSigV4 || k == RESTSkipVerify {
				if _, err := strconv.ParseBool(v); err != nil {
					return fmt.Errorf("%w: iceberg sink: REST catalog property %s=%q: want true or false", flightline.ErrInvalidInput, k, v)
				}
			}
		}
		o.rest = &restConf{uri: uri, props: maps.Clone(props)}
		if o.rest.props == nil {
			o.rest.props = map[string]string{}
		}
		return nil
	}
}

// newREST returns the REST catalog of o; it asks the server for its
// configuration (GET /v1/config), so an unreachable server fails here.
func newREST(ctx context.Context, o options, warehouse string) (catalog.Catalog, error) {
	p := o.rest.props
	var ro []restcat.Option
	if v := p[RESTCredential]; v != "" {
		ro = append(ro, restcat.WithCredential(v))
	}
	if v := p[RESTToken]; v != "" {
		ro = append(ro, restcat.WithOAuthToken(v))
	}
	if v := p[RESTScope]; v != "" {
		ro = append(ro, restcat.WithScope(v))
	}
	if v := p[RESTAudience]; v != "" {
		ro = append(ro, restcat.WithAudience(v))
	}
	if v := p[RESTResource]; v != "" {
		ro = append(ro, restcat.WithResource(v))
	}
	if v := p[RESTPrefix]; v != "" {
		ro = append(ro, restcat.WithPrefix(v))
	}
	if v := p[RESTOAuthURI]; v != "" {
		u, err := url.Parse(v)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("%w: iceberg sink: %s %q: want a URL", flightline.ErrInvalidInput, RESTOAuthURI, v)
		}
		ro = append(ro, restcat.WithAuthURI(u))
	}
	if on, _ := strconv.ParseBool(p[RESTSigV4]); on {
		ro = append(ro, restcat.WithSigV4RegionSvc(p[RESTSignRegion], p[RESTSignName]))
	}
	if skip, _ := strconv.ParseBool(p[RESTSkipVerify]); skip {
		ro = append(ro, restcat.WithTLSConfig(&tls.Config{InsecureSkipVerify: true})) //nolint:gosec // asked for
	}
	if warehouse != "" {
		ro = append(ro, restcat.WithWarehouseLocation(warehouse))
	}
	if len(o.props) > 0 {
		ro = append(ro, restcat.WithAdditionalProps(iceberg.Properties(maps.Clone(o.props))))
	}
	ro = append(ro, o.rest.extra...)
	cat, err := restcat.NewCatalog(ctx, o.catName, o.rest.uri, ro...)
	switch {
	case err == nil:
		return cat, nil
	case errors.Is(err, restcat.ErrUnauthorized) || errors.Is(err, restcat.ErrAuthorizationExpired) || errors.Is(err, restcat.ErrOAuthError):
		return nil, fmt.Errorf("%w: iceberg sink: REST catalog %s: %w", flightline.ErrUnauthenticated, o.rest.uri, err)
	case errors.Is(err, restcat.ErrForbidden):
		return nil, fmt.Errorf("%w: iceberg sink: REST catalog %s: %w", flightline.ErrPermissionDenied, o.rest.uri, err)
	default:
		return nil, fmt.Errorf("%w: iceberg sink: REST catalog %s: %w", flightline.ErrUnavailable, o.rest.uri, err)
	}
}

// openREST builds the REST catalog of s.o; New's part for REST.
func (s *Sink) openREST(ctx context.Context, warehouse string) (*Sink, error) {
	if s.o.glue != nil || s.o.catURI != "" {
		return nil, fmt.Errorf("%w: iceberg sink: the REST catalog takes neither the Glue catalog nor a SQLite path", flightline.ErrInvalidInput)
	}
	cat, err := newREST(ctx, s.o, warehouse)
	if err != nil {
		return nil, err
	}
	s.cat = cat
	if c, ok := cat.(catalog.Closer); ok {
		s.owned = c
	}
	s.where = "rest catalog " + s.o.rest.uri
	if warehouse != "" {
		s.where += ", warehouse " + warehouse
	}
	return s, nil
}
