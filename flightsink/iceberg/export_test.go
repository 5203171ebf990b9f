package iceberg

import "github.com/apache/iceberg-go/catalog"

// CatalogForTest returns the sink's catalog.
func (s *Sink) CatalogForTest() catalog.Catalog { return s.cat }
