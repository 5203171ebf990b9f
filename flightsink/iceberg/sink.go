// Package iceberg is an exactly-once Apache Iceberg sink on iceberg-go: a
// SQL catalog (SQLite, embedded, by default), the AWS Glue Data Catalog
// (Glue), an Iceberg REST catalog (REST) or any catalog.Catalog, and a
// warehouse on local disk or S3.
//
// # Commit protocol
//
// Every commit of a pipeline is one Iceberg snapshot on the table's main
// branch. Its summary carries the pipeline's state (epoch, writer id and
// checkpoint) under the key "flightline.checkpoint.<pipeline id>" (the id
// query-escaped), so the data files and the checkpoint land atomically.
// Every snapshot this sink commits carries, besides its own pipeline's, the
// state of every pipeline of the table as of its parent, and the marker
// key "flightline.sink": Checkpoint and Open read the newest marked
// snapshot in the current snapshot's ancestry (snapshots committed by
// other writers, which carry no marker, are skipped).
//
// Each commit asserts that the main branch still points at the snapshot
// it was built on (iceberg-go's AssertRefSnapshotID, which also turns the
// library's own retries off). When the catalog refuses it, the writer
// reloads the table, reads the states again and decides itself: another
// writer id under its pipeline's key fences it (ErrFenced); a checkpoint
// that covers the batch makes it a replay (nothing written); otherwise it
// commits again on the new head, with the data files it already wrote.
//
// Open claims a pipeline by committing an empty snapshot whose state holds
// the next epoch and a fresh writer id. On a table that does not exist yet
// Open first creates it with an empty schema, so that the claim has a
// place to live; the first batch sets the columns (a schema update in the
// same commit as its data).
//
// # Schemas
//
// Columns map by name to the table's columns. A column is stored as its
// Iceberg type, with the lossless widenings of StoredType where Iceberg
// has no exact match (views, small and unsigned ints, second and
// millisecond timestamps); a type with no lossless Iceberg type (uint64,
// nanosecond timestamps, durations, ...) is ErrInvalidInput. A batch
// whose types differ from the table's is ErrSchemaMismatch. With
// SchemaEvolution, new nullable columns are added to the table in the
// commit, and batches may omit optional columns.
// Nothing is committed on either error.
package iceberg

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/memory"
	iceberg "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	gluecat "github.com/apache/iceberg-go/catalog/glue"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // s3:// warehouses
	"github.com/apache/iceberg-go/table"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
)

// SummaryPrefix starts the snapshot-summary key of a pipeline's state:
// SummaryPrefix + url.QueryEscape(pipeline id).
const SummaryPrefix = "flightline.checkpoint."

// MarkerKey is set in the summary of every snapshot this sink commits:
// such a snapshot carries the state of every pipeline of the table.
const MarkerKey = "flightline.sink"

// DefaultNamespace and DefaultTable name the table of a sink without Table.
const (
	DefaultNamespace = "flightline"
	DefaultTable     = "events"
)

// Config is what an iceberg sink is given in its URL or YAML.
type Config struct {
	// Warehouse is where the tables go: a local path, file:///path or
	// s3://bucket/prefix. Required unless the Catalog option gives a
	// catalog; for the rest catalog, optional: sent as the catalog's
	// warehouse property (the server places tables).
	Warehouse string
	// Table names the default table, "namespace.table" (the namespace may
	// have several dotted levels). A non-empty Pipeline.Target names a
	// table in the same namespace instead. Default "flightline.events".
	Table string
	// Catalog is the catalog the tables are listed in: "sql" (the
	// default: the SQL catalog on SQLite), "glue" (the AWS Glue Data
	// Catalog, with the Glue properties) or "rest" (an Iceberg REST
	// catalog at URI, with the REST properties).
	Catalog string
	// SQLite is the SQLite database file of the SQL catalog (default
	// catalog.db in a local warehouse; required for an s3:// warehouse).
	// It is created when missing. Several processes may share it.
	SQLite string
	// CatalogName is the catalog name rows are kept under in the SQL
	// catalog's tables (pyiceberg's SqlCatalog name); default
	// "flightline".
	CatalogName string
	// Properties are catalog and file-IO properties as iceberg-go takes
	// them (s3.endpoint, s3.region, s3.access-key-id,
	// s3.secret-access-key, ...).
	Properties map[string]string
	// Glue are the Glue catalog's properties (GlueKeys: glue.region,
	// glue.endpoint, glue.id, glue.access-key-id, glue.secret-access-key,
	// glue.session-token; credentials default to the SDK's chain), for
	// Catalog "glue" only. A namespace is a Glue database (created if
	// missing), and new tables' files go under the warehouse.
	//
	// A commit is refused by iceberg-go itself when the table's main
	// branch moved since the writer loaded it ("branch main has
	// changed"), and by Glue when the table's VersionId did (UpdateTable
	// with the VersionId the table was loaded with: optimistic locking);
	// the writer then reloads and decides, as on the SQL catalog (see the
	// package doc).
	Glue map[string]string
	// URI is the REST catalog's endpoint, http(s)://HOST[:PORT][/PATH]
	// (the path before /v1), for Catalog "rest": required there.
	URI string
	// REST are the REST catalog's properties (RESTKeys: credential,
	// token, scope, prefix, …), for Catalog "rest" only. A commit is the
	// REST UpdateTable request with the requirement assert-ref-snapshot-id
	// on the main branch; the server refuses it (409) when the branch
	// moved, and the writer then reloads and decides, as on the SQL
	// catalog (see the package doc).
	REST map[string]string
	// SchemaEvolution allows batches with new nullable columns (added to
	// the table in the commit of the batch) and batches without some
	// optional columns. Off by default: any schema difference is
	// ErrSchemaMismatch.
	SchemaEvolution bool
	// Partition is the partition spec of the tables the sink creates:
	// comma-separated fields, each COLUMN (identity), identity(COLUMN),
	// year|month|day|hour(COLUMN), bucket(N, COLUMN) or truncate(W,
	// COLUMN), e.g. "day(ts), bucket(16, id)". It is applied with the
	// first batch's columns (a table is created before its columns are
	// known); a column it names must be in that batch, else the batch is
	// ErrInvalidInput. An existing table keeps its spec. Default none.
	Partition string
	// ExpireSnapshotsOlderThan makes each writer expire the table's
	// snapshots older than it (keeping the current one), at most every
	// ten minutes, after a commit of its own, so that the table's metadata
	// does not grow by a snapshot per commit for ever; 0 (the default)
	// never expires. The expiry runs only while the current snapshot is
	// the writer's own, which carries every pipeline's state, so no state
	// is expired with its snapshot. Files only expired snapshots
	// referenced (their manifest lists and manifests) are deleted. An
	// expiry that fails is logged; the commit before it stands.
	ExpireSnapshotsOlderThan time.Duration
}

// apply validates c and sets its values, defaults left for zero fields.
func (c Config) apply(o *options) error {
	set := []func(*options) error{setProperties(c.Properties), setSchemaEvolution(c.SchemaEvolution),
		setPartition(c.Partition), setExpire(c.ExpireSnapshotsOlderThan)}
	if c.Table != "" {
		set = append(set, setTable(c.Table))
	}
	if c.SQLite != "" {
		set = append(set, setSQLite(c.SQLite))
	}
	if c.CatalogName != "" {
		set = append(set, setCatalogName(c.CatalogName))
	}
	switch c.Catalog {
	case "", "sql":
		if len(c.Glue) > 0 {
			return fmt.Errorf("%w: iceberg sink: the glue.* properties are for the glue catalog", flightline.ErrInvalidInput)
		}
	case "glue":
		set = append(set, setGlue(c.Glue))
	case "rest":
		set = append(set, setREST(c.URI, c.REST))
	default:
		return fmt.Errorf("%w: iceberg sink: catalog %q: want sql, glue or rest", flightline.ErrInvalidInput, c.Catalog)
	}
	if c.Catalog != "rest" && (c.URI != "" || len(c.REST) > 0) {
		return fmt.Errorf("%w: iceberg sink: URI and the REST properties are for the rest catalog", flightline.ErrInvalidInput)
	}
	for _, f := range set {
		if err := f(o); err != nil {
			return err
		}
	}
	return nil
}

// Option configures a Sink beyond its Config.
type Option func(*options) error

type options struct {
	cat      catalog.Catalog
	catURI   string
	catName  string
	props    map[string]string
	ns       []string
	table    string
	evolve   bool
	mem      memory.Allocator
	log      *slog.Logger
	attempts int
	expire   time.Duration // 0: no snapshot expiry
	part     []partField
	// expireEvery is how often a writer runs the expiry at most.
	expireEvery time.Duration
	// glue, when set, are the glue.* properties of the Glue catalog the
	// sink lists its tables in.
	glue map[string]string
	// rest, when set, is the REST catalog the sink lists its tables in.
	rest *restConf
}

// GlueKeys are the properties Glue takes (iceberg-go's catalog/glue).
var GlueKeys = []string{gluecat.Region, gluecat.Endpoint, gluecat.CatalogIdKey, gluecat.AccessKeyID,
	gluecat.SecretAccessKey, gluecat.SessionToken}

// setGlue lists the sink's tables in the AWS Glue Data Catalog (iceberg-go's
// catalog/glue) instead of the SQL catalog: a namespace is a Glue
// database (created if missing), and new tables' files go under the
// warehouse. props are the catalog's properties (GlueKeys: glue.region,
// glue.endpoint, glue.id, glue.access-key-id, glue.secret-access-key,
// glue.session-token; credentials default to the SDK's chain); the file-IO
// properties (Properties) apply as with the SQL catalog.
//
// A commit is refused by iceberg-go itself when the table's main branch
// moved since the writer loaded it ("branch main has changed"), and by
// Glue when the table's VersionId did (UpdateTable with the VersionId
// the table was loaded with: optimistic locking); the writer then
// reloads and decides, as on the SQL catalog (see the package doc).
func setGlue(props map[string]string) Option {
	return func(o *options) error {
		for k := range props {
			if !slices.Contains(GlueKeys, k) {
				return fmt.Errorf("%w: iceberg sink: unknown Glue property %q (known: %s)", flightline.ErrInvalidInput, k, strings.Join(GlueKeys, ", "))
			}
		}
		o.glue = maps.Clone(props)
		if o.glue == nil {
			o.glue = map[string]string{}
		}
		return nil
	}
}

// newGlue returns the Glue catalog of warehouse wh.
func newGlue(ctx context.Context, o options, wh string) (catalog.Catalog, error) {
	var lo []func(*awsconfig.LoadOptions) error
	if r := o.glue[gluecat.Region]; r != "" {
		lo = append(lo, awsconfig.WithRegion(r))
	}
	if e := o.glue[gluecat.Endpoint]; e != "" {
		lo = append(lo, awsconfig.WithBaseEndpoint(e))
	}
	if id, secret := o.glue[gluecat.AccessKeyID], o.glue[gluecat.SecretAccessKey]; id != "" || secret != "" {
		if id == "" || secret == "" {
			return nil, fmt.Errorf("%w: iceberg sink: give both %s and %s", flightline.ErrInvalidInput, gluecat.AccessKeyID, gluecat.SecretAccessKey)
		}
		lo = append(lo, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, o.glue[gluecat.SessionToken])))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, lo...)
	if err != nil {
		return nil, fmt.Errorf("%w: iceberg sink: AWS config for Glue: %v", flightline.ErrInvalidInput, err)
	}
	props := gluecat.AwsProperties{"warehouse": wh}
	for k, v := range o.props {
		props[k] = v
	}
	for k, v := range o.glue {
		props[k] = v
	}
	cat, err := gluecat.NewCatalog(gluecat.WithAwsConfig(cfg), gluecat.WithAwsProperties(props))
	if err != nil {
		return nil, fmt.Errorf("%w: iceberg sink: Glue catalog: %v", flightline.ErrInvalidInput, err)
	}
	return cat, nil
}

// Catalog sets the catalog to use instead of the SQL catalog on SQLite
// (a REST or Glue catalog built by the caller). The sink does not close
// it.
func Catalog(c catalog.Catalog) Option {
	return func(o *options) error { o.cat = c; return nil }
}

// setSQLite sets the SQLite database file of the SQL catalog (default
// catalog.db in a local warehouse; required for an s3:// warehouse). It
// is created when missing. Several processes may share it.
func setSQLite(path string) Option {
	return func(o *options) error {
		if path == "" {
			return fmt.Errorf("%w: empty SQLite catalog path", flightline.ErrInvalidInput)
		}
		o.catURI = path
		return nil
	}
}

// setCatalogName sets the catalog name rows are kept under in the SQL
// catalog's tables (pyiceberg's SqlCatalog name); default "flightline".
func setCatalogName(name string) Option {
	return func(o *options) error {
		if name == "" {
			return fmt.Errorf("%w: empty catalog name", flightline.ErrInvalidInput)
		}
		o.catName = name
		return nil
	}
}

// setProperties sets catalog and file-IO properties as iceberg-go takes them
// (s3.endpoint, s3.region, s3.access-key-id, s3.secret-access-key, ...).
func setProperties(p map[string]string) Option {
	return func(o *options) error {
		for k, v := range p {
			o.props[k] = v
		}
		return nil
	}
}

// setTable names the default table, "namespace.table" (the namespace may
// have several dotted levels). A non-empty Pipeline.Target names a table
// in the same namespace instead. Default "flightline.events".
func setTable(ident string) Option {
	return func(o *options) error {
		parts := strings.Split(ident, ".")
		if len(parts) < 2 || slicesHasEmpty(parts) {
			return fmt.Errorf("%w: table %q: want namespace.table", flightline.ErrInvalidInput, ident)
		}
		o.ns, o.table = parts[:len(parts)-1], parts[len(parts)-1]
		return nil
	}
}

func slicesHasEmpty(s []string) bool {
	for _, p := range s {
		if p == "" {
			return true
		}
	}
	return false
}

// setSchemaEvolution allows batches with new nullable columns (added to the
// table in the commit of the batch) and batches without some optional
// columns. Off by default: any schema difference is ErrSchemaMismatch.
func setSchemaEvolution(on bool) Option { return func(o *options) error { o.evolve = on; return nil } }

// Allocator sets the allocator for the batches the sink builds; nil means
// memory.DefaultAllocator.
func Allocator(mem memory.Allocator) Option {
	return func(o *options) error {
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		o.mem = mem
		return nil
	}
}

// Logger sets the logger; nil means slog.Default().
func Logger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.Default()
		}
		o.log = l
		return nil
	}
}

// MaxCommitAttempts bounds the commits one batch tries after refusals by
// the catalog (another writer moved the branch; default 100); then
// WriteBatch returns ErrConflict.
func MaxCommitAttempts(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: MaxCommitAttempts %d < 1", flightline.ErrInvalidInput, n)
		}
		o.attempts = n
		return nil
	}
}

// setPartition sets the partition spec of the tables the sink creates:
// comma-separated fields, each COLUMN (identity), identity(COLUMN),
// year|month|day|hour(COLUMN), bucket(N, COLUMN) or truncate(W, COLUMN),
// e.g. "day(ts), bucket(16, id)". It is applied with the first batch's
// columns (a table is created before its columns are known); a column it
// names must be in that batch, else the batch is ErrInvalidInput. An
// existing table keeps its spec.
func setPartition(spec string) Option {
	return func(o *options) error {
		if spec == "" {
			o.part = nil
			return nil
		}
		p, err := parsePartition(spec)
		if err != nil {
			return err
		}
		o.part = p
		return nil
	}
}

// setExpire makes each writer expire the table's snapshots
// older than d (keeping the current one), at most every ten minutes, after
// a commit of its own, so that the table's metadata does not grow by a
// snapshot per commit for ever; 0 (the default) never expires. The
// expiry runs only while the current snapshot is the writer's own, which
// carries every pipeline's state, so no state is expired with its
// snapshot. Files only expired snapshots referenced (their manifest
// lists and manifests) are deleted. An expiry that fails is logged; the
// commit before it stands.
func setExpire(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: expire_snapshots_older_than %v < 0", flightline.ErrInvalidInput, d)
		}
		o.expire = d
		return nil
	}
}

// Sink is an exactly-once Iceberg sink. It is safe for concurrent use by
// several pipelines. See the package documentation.
type Sink struct {
	o     options
	cat   catalog.Catalog
	db    *sql.DB        // the SQL catalog's, when the sink opened it
	owned catalog.Closer // the REST catalog, when the sink built it
	where string
}

// New returns a sink writing tables under cfg.Warehouse, listed in the SQL
// catalog on SQLite (Config.SQLite), in Glue (Config.Catalog "glue") or in
// a REST catalog (Config.Catalog "rest", where the warehouse is optional:
// the server places tables) unless the Catalog option gives another. It
// connects at construction: it opens the SQL catalog's database, creating
// its tables when missing, loads the AWS configuration of Glue, or asks
// the REST catalog for its configuration; it touches no Iceberg table. It
// validates cfg (table name, partition spec, catalog and its properties).
// Close releases what New opened.
func New(ctx context.Context, cfg Config, opts ...Option) (*Sink, error) {
	warehouse := cfg.Warehouse
	o := options{catName: "flightline", props: map[string]string{}, ns: []string{DefaultNamespace}, table: DefaultTable,
		mem: memory.DefaultAllocator, log: slog.Default(), attempts: 100, expireEvery: 10 * time.Minute}
	if err := cfg.apply(&o); err != nil {
		return nil, err
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	s := &Sink{o: o, cat: o.cat}
	if s.cat != nil {
		s.where = fmt.Sprintf("%s catalog %s", s.cat.CatalogType(), warehouse)
		return s, nil
	}
	if o.rest != nil {
		return s.openREST(ctx, warehouse)
	}
	if warehouse == "" {
		return nil, fmt.Errorf("%w: iceberg sink: empty warehouse", flightline.ErrInvalidInput)
	}
	wh, local, err := warehouseURL(warehouse)
	if err != nil {
		return nil, err
	}
	if o.glue != nil {
		if local || o.catURI != "" {
			return nil, fmt.Errorf("%w: iceberg sink: the Glue catalog needs an s3:// warehouse and no SQLite path (uri)", flightline.ErrInvalidInput)
		}
		if s.cat, err = newGlue(ctx, o, wh); err != nil {
			return nil, err
		}
		s.where = fmt.Sprintf("glue catalog %s, warehouse %s", cmp.Or(o.glue[gluecat.Endpoint], "of the region"), wh)
		return s, nil
	}
	if o.catURI == "" {
		if !local {
			return nil, fmt.Errorf("%w: iceberg sink: an %s warehouse needs the SQLite catalog's path (uri)", flightline.ErrInvalidInput, warehouse)
		}
		o.catURI = filepath.Join(strings.TrimPrefix(wh, "file://"), "catalog.db")
	}
	if local {
		if err := os.MkdirAll(strings.TrimPrefix(wh, "file://"), 0o755); err != nil {
			return nil, fmt.Errorf("iceberg sink: %w", err)
		}
	}
	if dir := filepath.Dir(o.catURI); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("iceberg sink: %w", err)
		}
	}
	db, err := sql.Open("sqlite", "file:"+o.catURI+"?_pragma=busy_timeout(60000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("iceberg sink: open SQLite catalog %s: %w", o.catURI, err)
	}
	props := iceberg.Properties{"warehouse": wh}
	for k, v := range o.props {
		props[k] = v
	}
	cat, err := newSQLCatalog(ctx, o.catName, db, props)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("%w: iceberg sink: SQL catalog %s: %w", flightline.ErrUnavailable, o.catURI, err)
	}
	s.cat, s.db = cat, db
	s.where = fmt.Sprintf("sql catalog %s, warehouse %s", o.catURI, wh)
	return s, nil
}

// newSQLCatalog opens the SQL catalog on db, creating its tables when
// missing. Processes that open a new catalog file at the same moment race
// for it: switching the file to WAL and creating the tables take its write
// lock in ways SQLite answers with SQLITE_BUSY at once, without waiting
// out busy_timeout (two sinks started together failed so). It retries
// those for up to a minute, as busy_timeout would have waited.
func newSQLCatalog(ctx context.Context, name string, db *sql.DB, props iceberg.Properties) (*sqlcat.Catalog, error) {
	deadline := time.Now().Add(time.Minute)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		cat, err := sqlcat.NewCatalog(name, db, sqlcat.SQLite, props)
		var se *sqlite.Error
		if err == nil || !errors.As(err, &se) || se.Code()&0xff != sqliteBusy || time.Now().After(deadline) {
			return cat, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}

// sqliteBusy is SQLITE_BUSY, the primary result code of a locked database.
const sqliteBusy = 5

// warehouseURL returns warehouse as the URL iceberg-go takes and whether
// it is on local disk.
func warehouseURL(w string) (string, bool, error) {
	u, err := url.Parse(w)
	switch {
	case err == nil && (u.Scheme == "s3" || u.Scheme == "s3a"):
		if u.Host == "" {
			return "", false, fmt.Errorf("%w: warehouse %q: no bucket", flightline.ErrInvalidInput, w)
		}
		return "s3://" + u.Host + strings.TrimSuffix(u.Path, "/"), false, nil
	case err == nil && u.Scheme == "file":
		return "file://" + filepath.Clean(u.Path), true, nil
	case err == nil && u.Scheme != "":
		return "", false, fmt.Errorf("%w: warehouse %q: scheme %q (want a path, file:// or s3://)", flightline.ErrInvalidInput, w, u.Scheme)
	}
	abs, err := filepath.Abs(w)
	if err != nil {
		return "", false, fmt.Errorf("%w: warehouse %q: %v", flightline.ErrInvalidInput, w, err)
	}
	return "file://" + abs, true, nil
}

// Close releases the SQL catalog's database, or the REST catalog's
// connections, when New opened them (a catalog given by the Catalog option
// is its caller's) and returns its error.
func (s *Sink) Close() error {
	if s.owned != nil {
		return s.owned.Close()
	}
	if s.db != nil {
		return s.db.Close()
	}
	return nil
}

// Guarantee implements flightsink.Guaranteer.
func (s *Sink) Guarantee() flightsink.Guarantee { return flightsink.ExactlyOnce }

// Ident returns the table identifier of target ("" for the default).
func (s *Sink) Ident(target string) (table.Identifier, error) {
	if target == "" {
		return append(append(table.Identifier{}, s.o.ns...), s.o.table), nil
	}
	if err := flightsink.CheckDirTarget(target); err != nil || strings.Contains(target, ".") {
		return nil, fmt.Errorf("%w: iceberg sink: target %q: want a plain table name", flightline.ErrInvalidInput, target)
	}
	return append(append(table.Identifier{}, s.o.ns...), target), nil
}

// state is a pipeline's JSON state in a snapshot summary.
type state struct {
	Epoch         int64  `json:"epoch"`
	Writer        string `json:"writer"`
	Seq           int64  `json:"seq"`
	Checkpoint    string `json:"checkpoint,omitempty"`
	CheckpointB64 string `json:"checkpoint_b64,omitempty"`
}

func (st *state) cp() []byte {
	if st.CheckpointB64 != "" {
		b, _ := base64.StdEncoding.DecodeString(st.CheckpointB64)
		return b
	}
	if st.Checkpoint == "" {
		return nil
	}
	return []byte(st.Checkpoint)
}

func (st *state) setCP(cp []byte) {
	st.Checkpoint, st.CheckpointB64 = "", ""
	if utf8.Valid(cp) {
		st.Checkpoint = string(cp)
	} else {
		st.CheckpointB64 = base64.StdEncoding.EncodeToString(cp)
	}
}

// Key is the snapshot-summary key of pipeline's state.
func Key(pipeline string) string { return SummaryPrefix + url.QueryEscape(pipeline) }

// states returns the flightline keys of the newest marked snapshot in the
// ancestry of tbl's current snapshot (empty when none).
func states(tbl *table.Table) map[string]string {
	out := map[string]string{}
	if tbl == nil {
		return out
	}
	meta := tbl.Metadata()
	for snap := tbl.CurrentSnapshot(); snap != nil; {
		if snap.Summary != nil {
			if _, ok := snap.Summary.Properties[MarkerKey]; ok {
				for k, v := range snap.Summary.Properties {
					if strings.HasPrefix(k, SummaryPrefix) {
						out[k] = v
					}
				}
				return out
			}
		}
		if snap.ParentSnapshotID == nil {
			break
		}
		snap = meta.SnapshotByID(*snap.ParentSnapshotID)
	}
	return out
}

func readState(st map[string]string, pipeline string) (*state, error) {
	v, ok := st[Key(pipeline)]
	if !ok {
		return nil, nil
	}
	var s state
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return nil, fmt.Errorf("%w: iceberg sink: summary key %s: %v", flightline.ErrInvalidInput, Key(pipeline), err)
	}
	return &s, nil
}

// load returns the table of ident, or nil when it does not exist.
func (s *Sink) load(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	tbl, err := s.cat.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
		return nil, nil
	}
	if err != nil {
		return nil, s.wrap(fmt.Sprintf("load table %s", strings.Join(ident, ".")), err)
	}
	return tbl, nil
}

// create creates the table of ident with an empty schema (and its
// namespace), or loads it when a racing writer created it first. Its
// data files are zstd at level 1 (write.parquet.compression-level), the
// level pyarrow (so pyiceberg) writes by default: arrow-go's default level
// took half the sink's CPU. A table created elsewhere keeps its own.
func (s *Sink) create(ctx context.Context, ident table.Identifier) (*table.Table, error) {
	ns := catalog.NamespaceFromIdent(ident)
	if err := s.cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return nil, s.wrap(fmt.Sprintf("create namespace %s", strings.Join(ns, ".")), err)
	}
	props := iceberg.Properties{table.PropertyFormatVersion: "2", table.CommitNumRetriesKey: "0",
		table.MetadataDeleteAfterCommitEnabledKey: "true", table.ParquetCompressionLevelKey: "1"}
	tbl, err := s.cat.CreateTable(ctx, ident, iceberg.NewSchema(0), catalog.WithProperties(props))
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		return s.load(ctx, ident)
	}
	if err != nil {
		return nil, s.wrap(fmt.Sprintf("create table %s", strings.Join(ident, ".")), err)
	}
	return tbl, nil
}

func (s *Sink) wrap(what string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: iceberg sink (%s): %s: %w", flightline.ErrUnavailable, s.where, what, err)
}

// Checkpoint implements flightsink.Sink: the pipeline's checkpoint in the
// table's current snapshot ancestry. It neither claims nor fences.
func (s *Sink) Checkpoint(ctx context.Context, p flightsink.Pipeline) ([]byte, error) {
	if p.ID == "" {
		return nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	ident, err := s.Ident(p.Target)
	if err != nil {
		return nil, err
	}
	tbl, err := s.load(ctx, ident)
	if err != nil || tbl == nil {
		return nil, err
	}
	st, err := readState(states(tbl), p.ID)
	if err != nil || st == nil {
		return nil, err
	}
	return st.cp(), nil
}

func nonce() string {
	var b [12]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Open implements flightsink.Sink. It commits a claim: an empty snapshot
// whose state of p holds the next epoch and a fresh writer id, which
// fences every earlier writer of p (their next commit is refused by the
// catalog, and the state they then read names another writer). A table
// that does not exist yet is created first, with an empty schema.
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	if p.ID == "" {
		return nil, nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	ident, err := s.Ident(p.Target)
	if err != nil {
		return nil, nil, err
	}
	w := &writer{s: s, p: p, ident: ident, id: nonce(), key: Key(p.ID)}
	for attempt := 0; ; attempt++ {
		tbl, err := s.load(ctx, ident)
		if err == nil && tbl == nil {
			tbl, err = s.create(ctx, ident)
		}
		if err != nil {
			return nil, nil, err
		}
		all := states(tbl)
		prev, err := readState(all, p.ID)
		if err != nil {
			return nil, nil, err
		}
		st := state{Epoch: 1, Writer: w.id}
		if prev != nil {
			st.Epoch, st.Seq = prev.Epoch+1, prev.Seq
			st.setCP(prev.cp())
		}
		next, err := w.commit(ctx, tbl, all, st, nil, nil)
		if err == nil {
			w.tbl, w.st, w.last = next, st, st.cp()
			s.o.log.Debug("iceberg sink: pipeline opened", "pipeline", p.ID, "epoch", st.Epoch, "table", strings.Join(ident, "."))
			return w, w.last, nil
		}
		if !errors.Is(err, errRefused) {
			return nil, nil, err
		}
		if attempt+1 >= s.o.attempts {
			return nil, nil, fmt.Errorf("iceberg sink: claim pipeline %q: gave up after %d refused commits: %w", p.ID, attempt+1, flightline.ErrConflict)
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, nil, err
		}
	}
}

func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(5<<min(attempt, 8)) * time.Millisecond
	d = min(d, time.Second)
	d = d/2 + time.Duration(rand.Int64N(int64(d)))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

var _ flightsink.Sink = (*Sink)(nil)
var _ flightsink.Guaranteer = (*Sink)(nil)
