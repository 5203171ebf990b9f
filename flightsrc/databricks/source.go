// Package databricks is a source reading a Databricks Unity Catalog table:
// the Delta source (flightsrc/delta) behind Unity Catalog. It resolves the
// table (GET /api/2.1/unity-catalog/tables/{full_name}; it must exist and
// be a Delta table on S3, EXTERNAL or MANAGED), vends READ credentials
// (POST /api/2.1/unity-catalog/temporary-table-credentials), renews them
// in the background before they expire (see unitycatalog.Vended), and
// serves the table at its storage_location exactly as the Delta source
// does: its snapshot, then new commits. Reads fail with
// flightline.ErrUnavailable only once the credentials held have run out
// because the catalog could not vend new ones.
package databricks

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/delta"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/unitycatalog"
)

// Option configures a Source.
type Option func(*options) error

type options struct {
	cfg     unitycatalog.Config
	storage objstore.Options
	vend    unitycatalog.VendOptions
	delta   []delta.Option
	log     *slog.Logger
}

// Workspace sets the workspace and its credentials; what it lacks comes
// from the DATABRICKS_* environment variables (unitycatalog.Config.FromEnv).
func Workspace(c unitycatalog.Config) Option {
	return func(o *options) error { o.cfg = c; return nil }
}

// StorageOptions sets S3 options other than credentials (AWS_REGION,
// AWS_ENDPOINT_URL, AWS_ALLOW_HTTP); AWS keys are refused.
func StorageOptions(o map[string]string) Option {
	return func(op *options) error { op.storage = o; return nil }
}

// Vend tunes the renewal of vended credentials.
func Vend(v unitycatalog.VendOptions) Option {
	return func(o *options) error { o.vend = v; return nil }
}

// DeltaOptions passes options to the Delta source (stream name, once,
// batch rows, poll interval, allocator). StorageOptions and Credentials
// among them are overridden. The stream is named after the table (its last
// name part) unless delta.Stream says otherwise.
func DeltaOptions(opts ...delta.Option) Option {
	return func(o *options) error { o.delta = append(o.delta, opts...); return nil }
}

// Logger sets the logger; nil means slog.Default().
func Logger(l *slog.Logger) Option {
	return func(o *options) error { o.log = l; return nil }
}

// Source serves one Unity Catalog table. It is safe for concurrent use.
type Source struct {
	*delta.Source
	a *unitycatalog.Access
}

// New resolves name (catalog.schema.table), vends READ credentials for it
// and returns the source; Close stops renewing the credentials.
func New(ctx context.Context, name string, opts ...Option) (*Source, error) {
	o := options{}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if o.vend.Logger == nil {
		o.vend.Logger = o.log
	}
	if err := unitycatalog.CheckName(name); err != nil {
		return nil, err
	}
	c, err := unitycatalog.New(o.cfg.FromEnv())
	if err != nil {
		return nil, err
	}
	a, err := c.Access(ctx, name, unitycatalog.Read, o.vend)
	if err != nil {
		return nil, fmt.Errorf("databricks source: %w", err)
	}
	storage, err := unitycatalog.S3Options(ctx, a.Table.StorageLocation, o.storage)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("databricks source: table %s: %w", name, err)
	}
	dopts := append([]delta.Option{delta.Stream(a.Table.Name)}, o.delta...)
	dopts = append(dopts, delta.StorageOptions(storage), delta.Credentials(a.Creds))
	ds, err := delta.New(ctx, a.Table.StorageLocation, dopts...)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("databricks source: table %s: %w", name, err)
	}
	o.log.Info("databricks source: table resolved", "table", name, "table_id", a.Table.TableID, "location", a.Table.StorageLocation)
	return &Source{Source: ds, a: a}, nil
}

// Close stops renewing the credentials; open reads fail once they run out.
func (s *Source) Close() error {
	s.a.Close()
	return nil
}

var _ flightsrc.Source = (*Source)(nil)
