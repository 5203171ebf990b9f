package iceberg

import (
	"errors"
	"net/http"

	restcat "github.com/apache/iceberg-go/catalog/rest"
)

// RESTTransport sends the REST catalog's requests through rt; after REST.
func RESTTransport(rt http.RoundTripper) Option {
	return func(o *options) error {
		if o.rest == nil {
			return errors.New("RESTTransport before REST")
		}
		o.rest.extra = append(o.rest.extra, restcat.WithCustomTransport(rt))
		return nil
	}
}
