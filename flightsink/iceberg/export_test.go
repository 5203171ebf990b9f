package iceberg

import (
	"time"

	"github.com/apache/iceberg-go/catalog"
)

// CatalogForTest returns the sink's catalog.
func (s *Sink) CatalogForTest() catalog.Catalog { return s.cat }

// ExpireEvery sets how often a writer expires snapshots at most.
func ExpireEvery(d time.Duration) Option {
	return func(o *options) error { o.expireEvery = d; return nil }
}
