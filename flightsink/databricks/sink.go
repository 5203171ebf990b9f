// Package databricks is an exactly-once sink into Databricks Unity Catalog
// tables: the Delta Lake sink (flightsink/delta) reached through Unity
// Catalog. Nothing about the commit differs from the Delta sink (the same
// log, the same checkpoint in the log, the same fencing); what is new is
// how the sink finds a table and gets the right to write it:
//
//  1. Resolve: GET /api/2.1/unity-catalog/tables/{catalog.schema.table}.
//     The table must exist (a missing one is flightline.ErrNotFound, never
//     created) and be an EXTERNAL Delta table on S3; anything else is
//     flightline.ErrFailedPrecondition saying why.
//  2. Vend: POST /api/2.1/unity-catalog/temporary-table-credentials with
//     operation READ_WRITE. The credentials reach the Delta sink's S3
//     client as a credentials provider (unitycatalog.Vended) that re-vends
//     in the background before they expire; a commit that finds them run
//     out (the catalog was unreachable for the whole margin) fails with
//     flightline.ErrUnavailable. Credentials without expiration_time never
//     expire.
//  3. Write through the Delta sink at the table's storage_location.
//
// Targets: the empty target is the table given to New; a target
// "catalog.schema.table" names another table, and a plain name another
// table in the default table's schema. Each table is resolved once, on
// first use, and keeps its own credentials until Close.
//
// Errors: 401 and 403 from the catalog are ErrUnauthenticated and
// ErrPermissionDenied with the catalog's message; an S3 403 AccessDenied
// with vended credentials (a session policy narrower than the table) is
// ErrPermissionDenied.
package databricks

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/internal/objstore"
	"github.com/flightline/flightline/internal/unitycatalog"
)

// Config is what a databricks sink is given in its URL or YAML.
type Config struct {
	// Table is the default target table, catalog.schema.table. Required.
	Table string
	// Workspace is the workspace and its credentials; what it lacks comes
	// from DATABRICKS_HOST, DATABRICKS_TOKEN, DATABRICKS_CLIENT_ID and
	// DATABRICKS_CLIENT_SECRET (unitycatalog.Config.FromEnv).
	Workspace unitycatalog.Config
	// Storage holds S3 options other than credentials: AWS_REGION,
	// AWS_ENDPOINT_URL, AWS_ALLOW_HTTP. AWS keys are refused: the catalog
	// vends them. Without a region (here or in the environment) and
	// endpoint, the bucket's region is asked of S3.
	Storage map[string]string
	// VendMargin: credentials are re-vended when VendMargin or half their
	// life (whichever is longer) is left. Default
	// unitycatalog.DefaultMargin.
	VendMargin time.Duration
	// VendMaxBackoff bounds the wait between failed vends. Default 10s.
	VendMaxBackoff time.Duration
	// Delta is the Delta sink's Config of every table (Instance,
	// CheckpointInterval, SchemaEvolution, compaction, …); its URI and
	// Storage are the table's, set by the sink.
	Delta delta.Config
}

// Option configures a Sink beyond its Config: a logger, options of the
// Delta sink. Options apply only in New.
type Option func(*options) error

type options struct {
	cfg      unitycatalog.Config
	storage  objstore.Options
	vend     unitycatalog.VendOptions
	deltaCfg delta.Config
	delta    []delta.Option
	log      *slog.Logger
}

// DeltaOptions passes options to the Delta sink of every table (allocator,
// logger, …). Credentials among them is overridden.
func DeltaOptions(opts ...delta.Option) Option {
	return func(o *options) error { o.delta = append(o.delta, opts...); return nil }
}

// Logger sets the logger; nil means slog.Default().
func Logger(l *slog.Logger) Option {
	return func(o *options) error { o.log = l; return nil }
}

// Sink writes Unity Catalog tables. It is safe for concurrent use.
type Sink struct {
	c      *unitycatalog.Client
	name   string // the default table
	o      options
	mu     sync.Mutex
	tables map[string]*table // by full name
	closed bool
}

type table struct {
	a *unitycatalog.Access
	s *delta.Sink
}

// New returns a sink whose default target is cfg.Table. It connects at
// construction: it resolves the table in the catalog and vends its
// credentials at once, so a wrong name, a managed table or refused
// credentials fail here. It validates cfg (the table name, the storage
// keys). Close releases the credential renewals.
func New(ctx context.Context, cfg Config, opts ...Option) (*Sink, error) {
	name := cfg.Table
	o := options{cfg: cfg.Workspace, storage: cfg.Storage, deltaCfg: cfg.Delta, log: slog.Default(),
		vend: unitycatalog.VendOptions{Margin: cfg.VendMargin, MaxBackoff: cfg.VendMaxBackoff}}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	o.vend.Logger = o.log
	if err := unitycatalog.CheckName(name); err != nil {
		return nil, err
	}
	c, err := unitycatalog.New(o.cfg.FromEnv())
	if err != nil {
		return nil, err
	}
	s := &Sink{c: c, name: name, o: o, tables: map[string]*table{}}
	if _, err := s.table(ctx, ""); err != nil {
		return nil, err
	}
	return s, nil
}

// Guarantee implements flightsink.Guaranteer.
func (s *Sink) Guarantee() flightsink.Guarantee { return flightsink.ExactlyOnce }

// TableName returns the full name of target's table.
func (s *Sink) TableName(target string) (string, error) {
	switch {
	case target == "":
		return s.name, nil
	case strings.Count(target, ".") == 2:
		return target, unitycatalog.CheckName(target)
	case strings.ContainsAny(target, "./` "):
		return "", fmt.Errorf("%w: databricks sink: target %q: want a table name or catalog.schema.table", flightline.ErrInvalidInput, target)
	}
	return s.name[:strings.LastIndexByte(s.name, '.')+1] + target, nil
}

func (s *Sink) table(ctx context.Context, target string) (*table, error) {
	name, err := s.TableName(target)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("%w: databricks sink is closed", flightline.ErrUnavailable)
	}
	if t, ok := s.tables[name]; ok {
		return t, nil
	}
	a, err := s.c.Access(ctx, name, unitycatalog.ReadWrite, s.o.vend)
	if err != nil {
		return nil, fmt.Errorf("databricks sink: %w", err)
	}
	storage, err := unitycatalog.S3Options(ctx, a.Table.StorageLocation, s.o.storage)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("databricks sink: table %s: %w", name, err)
	}
	opts := append([]delta.Option{delta.Logger(s.o.log)}, s.o.delta...)
	opts = append(opts, delta.Credentials(a.Creds))
	dc := s.o.deltaCfg
	dc.URI, dc.Storage = a.Table.StorageLocation, storage
	ds, err := delta.New(ctx, dc, opts...)
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("databricks sink: table %s: %w", name, err)
	}
	s.o.log.Info("databricks sink: table resolved", "table", name, "table_id", a.Table.TableID,
		"location", a.Table.StorageLocation, "credentials_expire", a.Creds.Expiration())
	t := &table{a: a, s: ds}
	s.tables[name] = t
	return t, nil
}

// Checkpoint implements flightsink.Sink.
func (s *Sink) Checkpoint(ctx context.Context, p flightsink.Pipeline) ([]byte, error) {
	t, err := s.table(ctx, p.Target)
	if err != nil {
		return nil, err
	}
	p.Target = ""
	return t.s.Checkpoint(ctx, p)
}

// Open implements flightsink.Sink: the Delta sink's Open on the target's
// table (a claim that fences earlier writers of the pipeline).
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	t, err := s.table(ctx, p.Target)
	if err != nil {
		return nil, nil, err
	}
	p.Target = ""
	return t.s.Open(ctx, p)
}

// Location returns the storage location of target's table, resolving it
// if needed.
func (s *Sink) Location(ctx context.Context, target string) (string, error) {
	t, err := s.table(ctx, target)
	if err != nil {
		return "", err
	}
	return t.a.Table.StorageLocation, nil
}

// Close releases the credential renewals of every table resolved (it
// stops renewing them). Writers still open fail once their credentials run
// out. It returns nil.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, t := range s.tables {
		t.a.Close()
	}
	return nil
}

var _ flightsink.Sink = (*Sink)(nil)
var _ flightsink.Guaranteer = (*Sink)(nil)
