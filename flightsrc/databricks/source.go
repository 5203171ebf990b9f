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
	"time"

	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/flightsrc/delta"
	"github.com/flightline/flightline/internal/unitycatalog"
)

// Config is the table a Source serves and how: the keys of the
// databricks: source kind. The zero value of an optional field means its
// default.
type Config struct {
	// Table is the table's full name, catalog.schema.table. Required.
	Table string
	// Workspace is the workspace and its credentials; what it lacks comes
	// from the DATABRICKS_* environment variables
	// (unitycatalog.Config.FromEnv).
	Workspace unitycatalog.Config
	// StorageOptions are S3 options other than credentials (AWS_REGION,
	// AWS_ENDPOINT_URL, AWS_ALLOW_HTTP); AWS keys are refused.
	StorageOptions map[string]string
	// VendMargin: credentials are re-vended when VendMargin or half their
	// life (whichever is longer) is left. Default
	// unitycatalog.DefaultMargin.
	VendMargin time.Duration
	// VendMaxBackoff bounds the wait between failed vends. Default 10s.
	VendMaxBackoff time.Duration

	// Stream names the stream (default: the table's name, its last part).
	Stream string
	// Once makes every read stop with io.EOF at the version that was
	// current when it began, instead of following new commits.
	Once bool
	// BatchRows bounds the rows per batch (default 65536).
	BatchRows int
	// PollInterval is how often tail mode looks for a new commit (default
	// 1s).
	PollInterval time.Duration
}

// Option configures a Source beyond its Config: a logger, options of the
// Delta source. Options apply only in New.
type Option func(*options) error

type options struct {
	delta []delta.Option
	log   *slog.Logger
}

// DeltaOptions passes options to the Delta source (its allocator).
// Credentials among them is overridden by the vended credentials.
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

// New resolves cfg.Table in the catalog (it must exist and be a Delta
// table on S3), vends READ credentials for it and starts renewing them in
// the background, and opens the Delta source at its storage location: a
// missing table, a refused grant or an unreachable catalog fails here, with
// ctx bounding the calls. Options apply only here. Close stops the
// renewal.
func New(ctx context.Context, cfg Config, opts ...Option) (*Source, error) {
	o := options{}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	vend := unitycatalog.VendOptions{Margin: cfg.VendMargin, MaxBackoff: cfg.VendMaxBackoff, Logger: o.log}
	name := cfg.Table
	if err := unitycatalog.CheckName(name); err != nil {
		return nil, err
	}
	c, err := unitycatalog.New(cfg.Workspace.FromEnv())
	if err != nil {
		return nil, err
	}
	a, err := c.Access(ctx, name, unitycatalog.Read, vend)
	if err != nil {
		return nil, fmt.Errorf("databricks source: %w", err)
	}
	storage, err := unitycatalog.S3Options(ctx, a.Table.StorageLocation, cfg.StorageOptions)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("databricks source: table %s: %w", name, err)
	}
	dcfg := delta.Config{URI: a.Table.StorageLocation, StorageOptions: storage, Stream: cfg.Stream,
		Once: cfg.Once, BatchRows: cfg.BatchRows, PollInterval: cfg.PollInterval}
	if dcfg.Stream == "" {
		dcfg.Stream = a.Table.Name
	}
	ds, err := delta.New(ctx, dcfg, append(o.delta, delta.Credentials(a.Creds))...)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("databricks source: table %s: %w", name, err)
	}
	o.log.Info("databricks source: table resolved", "table", name, "table_id", a.Table.TableID, "location", a.Table.StorageLocation)
	return &Source{Source: ds, a: a}, nil
}

// Close stops renewing the credentials and returns nil; reads still open
// fail once the credentials run out. Call it once, after every Reader is
// closed.
func (s *Source) Close() error {
	s.a.Close()
	return nil
}

var _ flightsrc.Source = (*Source)(nil)
