package adbc

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	adbcapi "github.com/apache/arrow-adbc/go/adbc"
	"github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
)

// ErrNeedsCgo marks a C driver asked of a binary built without cgo (with
// CGO_ENABLED=0): the ADBC driver manager that loads C drivers is not in
// it. Rebuild with cgo (a C++17 compiler), or use the "flightsql" driver.
var ErrNeedsCgo = fmt.Errorf("%w: ADBC C drivers need a binary built with cgo (CGO_ENABLED=1 and a C++17 compiler); this one was built without, so only the flightsql driver is available", flightline.ErrInvalidInput)

// FlightSQL is the Config.Driver name of the Go-native Flight SQL driver.
const FlightSQL = "flightsql"

// Config says which database to open and how.
type Config struct {
	// Driver is FlightSQL, an absolute path to a driver's shared library or
	// manifest (.toml), or a driver name the ADBC driver manager resolves
	// through driver manifests (ADBC_DRIVER_PATH first). Required.
	Driver string
	// URI is the database's address in the driver's form:
	// postgresql://user@host:port/db, file:/path/to.db (or a path) for
	// SQLite, grpc://host:port for Flight SQL. It is passed as the
	// standard "uri" option when not empty.
	URI string
	// Options are further database options of the driver (username,
	// password, driver-specific keys).
	Options map[string]string
	// Dialect, when set ("postgres", "sqlite", "duckdb", "generic"), overrides the
	// dialect the probe infers from the vendor name.
	Dialect string
	// Alloc allocates the Arrow data of the Go-native drivers; nil means
	// memory.DefaultAllocator. C drivers allocate their own.
	Alloc memory.Allocator
}

// Dialects known by name; every other database gets Generic.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
	DuckDB   = "duckdb"
	Generic  = "generic"
)

// Caps is what a database's driver can do, probed once by Open.
type Caps struct {
	// Vendor and DriverName are what the driver reports (GetInfo); either
	// may be empty.
	Vendor, DriverName string
	// Dialect is Postgres, SQLite, DuckDB or Generic (inferred from Vendor unless
	// Config.Dialect says otherwise). It fixes the placeholder style and
	// the column types of tables created without bulk ingest.
	Dialect string
	// Transactions: autocommit can be turned off, so several statements
	// commit or roll back together.
	Transactions bool
	// BulkIngest: the driver implements ADBC bulk ingest (a COPY on
	// PostgreSQL). Without it, Ingest runs a prepared INSERT bound to the
	// batch.
	BulkIngest bool
}

// Placeholder returns the n-th (1-based) bind placeholder of the dialect:
// "$n" on PostgreSQL, "?" elsewhere.
func (c Caps) Placeholder(n int) string {
	if c.Dialect == Postgres {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// Quote quotes one identifier in double quotes (standard SQL; PostgreSQL,
// SQLite and Flight SQL servers accept it).
func Quote(ident string) string {
	return `"` + strings.ReplaceAll(ident, `"`, `""`) + `"`
}

// DB is an open ADBC database: a driver and its options. It is safe for
// concurrent use; its Conns are not.
type DB struct {
	db    adbcapi.Database
	cfg   Config
	caps  Caps
	alloc memory.Allocator
}

// Open loads the driver, opens the database and probes its capabilities on
// one connection (which it closes again). Errors from a C driver that
// cannot load, or a server that refuses the connection, surface here.
func Open(ctx context.Context, cfg Config) (*DB, error) {
	if cfg.Driver == "" {
		return nil, fmt.Errorf("%w: adbc: no driver given", flightline.ErrInvalidInput)
	}
	if cfg.Alloc == nil {
		cfg.Alloc = memory.DefaultAllocator
	}
	opts := make(map[string]string, len(cfg.Options)+2)
	for k, v := range cfg.Options {
		opts[k] = v
	}
	if cfg.URI != "" {
		opts[adbcapi.OptionKeyURI] = cfg.URI
	}
	var drv adbcapi.Driver
	if cfg.Driver == FlightSQL {
		drv = flightsql.NewDriver(cfg.Alloc)
	} else {
		var err error
		if drv, err = driverManager(); err != nil {
			return nil, fmt.Errorf("adbc driver %q: %w", cfg.Driver, err)
		}
		opts["driver"] = cfg.Driver
	}
	db, err := drv.NewDatabase(opts)
	if err != nil {
		return nil, Wrap(err, "adbc: open database with driver %q", cfg.Driver)
	}
	d := &DB{db: db, cfg: cfg, alloc: cfg.Alloc}
	if err := d.probe(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return d, nil
}

// Caps returns the capabilities probed at Open.
func (d *DB) Caps() Caps { return d.caps }

// Driver is the Config.Driver the database was opened with.
func (d *DB) Driver() string { return d.cfg.Driver }

// Alloc is the allocator of the Go-native drivers' data.
func (d *DB) Alloc() memory.Allocator { return d.alloc }

// Close closes the database. Close every Conn first.
func (d *DB) Close() error { return d.db.Close() }

// probe fills d.caps: vendor, dialect, transactions, bulk ingest.
func (d *DB) probe(ctx context.Context) error {
	ctx, done := d.driverCtx(ctx)
	defer done()
	c, err := d.db.Open(ctx)
	if err != nil {
		return Wrap(err, "adbc: connect with driver %q", d.cfg.Driver)
	}
	defer c.Close()
	d.caps.Vendor, d.caps.DriverName = info(ctx, c)
	d.caps.Dialect = d.cfg.Dialect
	if d.caps.Dialect == "" {
		d.caps.Dialect = dialectOf(d.caps.Vendor + " " + d.caps.DriverName + " " + filepath.Base(d.cfg.Driver))
	}
	switch d.caps.Dialect {
	case Postgres, SQLite, DuckDB, Generic:
	default:
		return fmt.Errorf("%w: adbc: unknown dialect %q (want postgres, sqlite, duckdb or generic)", flightline.ErrInvalidInput, d.caps.Dialect)
	}
	if o, ok := c.(adbcapi.PostInitOptions); ok {
		if o.SetOption(adbcapi.OptionKeyAutoCommit, adbcapi.OptionValueDisabled) == nil {
			d.caps.Transactions = true
			_ = c.Rollback(ctx)
			if err := o.SetOption(adbcapi.OptionKeyAutoCommit, adbcapi.OptionValueEnabled); err != nil {
				return Wrap(err, "adbc: turn autocommit back on")
			}
		}
	}
	d.caps.BulkIngest = probeIngest(ctx, c)
	return nil
}

// probeIngest asks the driver to append zero rows to a table that does not
// exist: a driver without bulk ingest answers "not implemented"; one with it
// fails otherwise (no such table) and creates nothing.
func probeIngest(ctx context.Context, c adbcapi.Connection) bool {
	st, err := c.NewStatement()
	if err != nil {
		return false
	}
	defer st.Close()
	if err := st.SetOption(adbcapi.OptionKeyIngestTargetTable, "__flightline_ingest_probe_absent"); err != nil {
		return !isNotImplemented(err)
	}
	if err := st.SetOption(adbcapi.OptionKeyIngestMode, adbcapi.OptionValueIngestModeAppend); err != nil {
		return !isNotImplemented(err)
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	if err := st.Bind(ctx, rec); err != nil {
		return !isNotImplemented(err)
	}
	_, err = st.ExecuteUpdate(ctx)
	return err == nil || !isNotImplemented(err)
}

func isNotImplemented(err error) bool {
	var ae adbcapi.Error
	if errors.As(err, &ae) {
		return ae.Code == adbcapi.StatusNotImplemented
	}
	return false
}

// dialectOf infers the dialect from what the driver says of itself.
func dialectOf(s string) string {
	s = strings.ToLower(s)
	switch {
	case strings.Contains(s, "postgres"):
		return Postgres
	case strings.Contains(s, "sqlite"):
		return SQLite
	case strings.Contains(s, "duckdb"):
		return DuckDB
	}
	return Generic
}

// info reads the vendor and driver names (empty when the driver does not
// say).
func info(ctx context.Context, c adbcapi.Connection) (vendor, driver string) {
	rdr, err := c.GetInfo(ctx, []adbcapi.InfoCode{adbcapi.InfoVendorName, adbcapi.InfoDriverName})
	if err != nil {
		return "", ""
	}
	defer drainRelease(rdr)
	for rdr.Next() {
		rec := rdr.RecordBatch()
		codes, ok1 := rec.Column(0).(*array.Uint32)
		vals, ok2 := rec.Column(1).(*array.DenseUnion)
		if !ok1 || !ok2 {
			return vendor, driver
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			if vals.TypeCode(i) != adbcapi.InfoValueStringType {
				continue
			}
			s, ok := vals.Field(vals.ChildID(i)).(*array.String)
			if !ok {
				continue
			}
			v := strings.Clone(s.Value(int(vals.ValueOffset(i))))
			switch adbcapi.InfoCode(codes.Value(i)) {
			case adbcapi.InfoVendorName:
				vendor = v
			case adbcapi.InfoDriverName:
				driver = v
			}
		}
	}
	return vendor, driver
}

// Conn opens a connection. On SQLite (through its C driver) it sets a busy
// timeout of SQLiteBusyTimeoutMillis so writers queue rather than fail, and
// asks for WAL mode (readers then do not block on a writer).
func (d *DB) Conn(ctx context.Context) (*Conn, error) {
	ctx, done := d.driverCtx(ctx)
	defer done()
	c, err := d.db.Open(ctx)
	if err != nil {
		return nil, Wrap(err, "adbc: connect with driver %q", d.cfg.Driver)
	}
	cn := &Conn{c: c, db: d}
	if d.caps.Dialect == SQLite && d.cfg.Driver != FlightSQL { // SQLite in this process, not behind a server
		for _, q := range []string{"PRAGMA busy_timeout = " + strconv.Itoa(SQLiteBusyTimeoutMillis), "PRAGMA journal_mode = WAL"} {
			if err := cn.query(ctx, q); err != nil {
				_ = c.Close()
				return nil, err
			}
		}
	}
	return cn, nil
}

// SQLiteBusyTimeoutMillis is how long a SQLite connection waits for
// another's write lock before failing with "database is locked".
const SQLiteBusyTimeoutMillis = 60_000

// driverCtx returns the context to hand the driver for one call and the
// function that ends it; call done once the call and its result are
// finished, in the goroutine that made the call.
//
// With the Flight SQL driver it is ctx without its cancellation and
// deadline, ended by done only, and results are read to their end before
// they are released (drainRelease). The driver (arrow-adbc v1.11.0 over
// arrow-go v18.9.0) hands gRPC the addresses of header and trailer
// variables (grpc.Header, grpc.Trailer) and reads them when a call or a
// result ends. gRPC writes them when it finishes a stream, and it finishes
// a stream whose context ends from a goroutine of its own: a context that
// ends while a result is read (the reader goroutine then reads the
// variables while gRPC writes them), or while a prepared statement runs
// (its parameters go on a DoPut stream the driver never reads to the end;
// gRPC writes that stream's header variable, which the driver also hands
// to the GetFlightInfo that follows) is a data race. Ended by done, after
// the driver is through with the variables and in the same goroutine, the
// context orders gRPC's late writes after the driver's reads. The price:
// the caller's context does not interrupt a Flight SQL call once sent
// (see docs/sinks/adbc.md).
func (d *DB) driverCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if d.cfg.Driver != FlightSQL {
		return ctx, func() {}
	}
	return context.WithCancel(context.WithoutCancel(ctx))
}

// drainRelease reads r to its end, then releases it. A Flight SQL result
// released before its end cancels its stream, which races inside the
// driver (driverCtx).
func drainRelease(r array.RecordReader) {
	for r.Next() {
	}
	r.Release()
}

// Conn is one connection. It is not safe for concurrent use.
type Conn struct {
	c    adbcapi.Connection
	db   *DB
	inTx bool
}

// Caps returns the database's capabilities.
func (c *Conn) Caps() Caps { return c.db.caps }

// PrefersLiterals reports whether values the caller can spell safely as
// SQL literals (Incremental.Inline) are better not bound: with the Flight
// SQL driver a bound query costs a prepare and a DoPut round trip more.
// (Its binding also raced inside the driver when the call's context ended
// early; driverCtx now keeps off that path, binding or not.)
func (c *Conn) PrefersLiterals() bool { return c.db.cfg.Driver == FlightSQL }

// Raw is the underlying ADBC connection, for what this package does not
// cover. Do not Close it.
func (c *Conn) Raw() adbcapi.Connection { return c.c }

// Close closes the connection, rolling back an open transaction.
func (c *Conn) Close() error {
	if c.inTx {
		_ = c.Rollback(context.Background())
	}
	return c.c.Close()
}

// Begin starts a transaction (turns autocommit off). It fails with
// ErrInvalidInput on a driver without transactions.
func (c *Conn) Begin(ctx context.Context) error {
	if !c.db.caps.Transactions {
		return fmt.Errorf("%w: adbc: driver %q has no transactions", flightline.ErrInvalidInput, c.db.cfg.Driver)
	}
	if c.inTx {
		return fmt.Errorf("%w: adbc: transaction already open", flightline.ErrInvalidInput)
	}
	if err := c.c.(adbcapi.PostInitOptions).SetOption(adbcapi.OptionKeyAutoCommit, adbcapi.OptionValueDisabled); err != nil {
		return Wrap(err, "adbc: begin")
	}
	c.inTx = true
	return nil
}

// Commit commits the open transaction and returns to autocommit. An error
// may hide a commit that landed.
func (c *Conn) Commit(ctx context.Context) error {
	if !c.inTx {
		return fmt.Errorf("%w: adbc: no transaction to commit", flightline.ErrInvalidInput)
	}
	c.inTx = false
	ctx, done := c.db.driverCtx(ctx)
	defer done()
	if err := c.c.Commit(ctx); err != nil {
		_ = c.c.Rollback(ctx)
		_ = c.c.(adbcapi.PostInitOptions).SetOption(adbcapi.OptionKeyAutoCommit, adbcapi.OptionValueEnabled)
		return Wrap(err, "adbc: commit")
	}
	return Wrap(c.c.(adbcapi.PostInitOptions).SetOption(adbcapi.OptionKeyAutoCommit, adbcapi.OptionValueEnabled), "adbc: autocommit on")
}

// Rollback rolls the open transaction back and returns to autocommit. It is
// a no-op without one.
func (c *Conn) Rollback(ctx context.Context) error {
	if !c.inTx {
		return nil
	}
	c.inTx = false
	ctx, done := c.db.driverCtx(ctx)
	defer done()
	err := c.c.Rollback(ctx)
	err2 := c.c.(adbcapi.PostInitOptions).SetOption(adbcapi.OptionKeyAutoCommit, adbcapi.OptionValueEnabled)
	if err == nil {
		err = err2
	}
	return Wrap(err, "adbc: rollback")
}

// statement prepares q with args bound as one row.
func (c *Conn) statement(ctx context.Context, q string, args []any) (adbcapi.Statement, error) {
	st, err := c.c.NewStatement()
	if err != nil {
		return nil, Wrap(err, "adbc: new statement")
	}
	if err := st.SetSqlQuery(q); err != nil {
		st.Close()
		return nil, Wrap(err, "adbc: %s", q)
	}
	if len(args) > 0 {
		rec, err := argsRecord(c.db.alloc, args)
		if err != nil {
			st.Close()
			return nil, err
		}
		defer rec.Release()
		if err := st.Prepare(ctx); err != nil {
			st.Close()
			return nil, Wrap(err, "adbc: prepare %s", q)
		}
		if err := st.Bind(ctx, rec); err != nil {
			st.Close()
			return nil, Wrap(err, "adbc: bind %s", q)
		}
	}
	return st, nil
}

// Exec runs a statement and returns how many rows it changed (-1 where the
// driver does not say). Arguments are bound by position: string, []byte,
// int64, int, float64, bool, or nil.
func (c *Conn) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	ctx, done := c.db.driverCtx(ctx)
	defer done() // after st.Close
	st, err := c.statement(ctx, q, args)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	n, err := st.ExecuteUpdate(ctx)
	return n, Wrap(err, "adbc: %s", q)
}

// query runs q and drains its result (for statements such as PRAGMA that
// answer with rows).
func (c *Conn) query(ctx context.Context, q string) error {
	r, err := c.Query(ctx, q)
	if err != nil {
		return err
	}
	defer r.Release()
	for r.Next() {
	}
	return Wrap(r.Err(), "adbc: %s", q)
}

// QueryRow runs a query of at most one row and scans its columns into dest
// (pointers to int64, string, []byte, bool, float64 or any; a NULL leaves
// the zero value). found is false when there is no row.
func (c *Conn) QueryRow(ctx context.Context, q string, dest []any, args ...any) (found bool, err error) {
	r, err := c.Query(ctx, q, args...)
	if err != nil {
		return false, err
	}
	defer r.Release()
	for r.Next() {
		rec := r.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		if int(rec.NumCols()) < len(dest) {
			return false, fmt.Errorf("adbc: %s: %d columns, want %d", q, rec.NumCols(), len(dest))
		}
		for i, d := range dest {
			if err := scan(rec.Column(i), 0, d); err != nil {
				return false, fmt.Errorf("adbc: %s: column %d: %w", q, i, err)
			}
		}
		return true, nil
	}
	return false, Wrap(r.Err(), "adbc: %s", q)
}

// Query runs a query and returns its result as Arrow. Release the reader
// (which closes the statement) before the next call on c.
//
// With the Flight SQL driver ctx does not interrupt the query once sent,
// and Release reads what is left of the result before it lets go of it
// (see driverCtx).
func (c *Conn) Query(ctx context.Context, q string, args ...any) (array.RecordReader, error) {
	ctx, done := c.db.driverCtx(ctx)
	st, err := c.statement(ctx, q, args)
	if err != nil {
		done()
		return nil, err
	}
	r, _, err := st.ExecuteQuery(ctx)
	if err != nil {
		st.Close()
		done()
		return nil, Wrap(err, "adbc: %s", q)
	}
	return &stmtReader{RecordReader: r, st: st, drain: c.db.cfg.Driver == FlightSQL, ctxDone: done}, nil
}

// stmtReader closes its statement when released.
// With drain set it first reads the result to its end, and it ends the
// driver's context (ctxDone) last (see driverCtx).
type stmtReader struct {
	array.RecordReader
	st      adbcapi.Statement
	drain   bool
	ctxDone context.CancelFunc
	done    bool
}

func (r *stmtReader) Release() {
	if r.done {
		return
	}
	r.done = true
	if r.drain {
		for r.RecordReader.Next() {
		}
	}
	r.RecordReader.Release()
	r.st.Close()
	r.ctxDone()
}

// Table names a table, optionally in a schema.
type Table struct{ Schema, Name string }

// ParseTable splits "schema.table" at its first dot; a name without one is
// a table of the connection's default schema. Names are taken as written
// (no case folding) and quoted wherever they are used.
func ParseTable(s string) (Table, error) {
	if s == "" {
		return Table{}, fmt.Errorf("%w: adbc: empty table name", flightline.ErrInvalidInput)
	}
	if i := strings.IndexByte(s, '.'); i >= 0 {
		if i == 0 || i == len(s)-1 {
			return Table{}, fmt.Errorf("%w: adbc: bad table name %q", flightline.ErrInvalidInput, s)
		}
		return Table{Schema: s[:i], Name: s[i+1:]}, nil
	}
	return Table{Name: s}, nil
}

// String is the table's name as given.
func (t Table) String() string {
	if t.Schema != "" {
		return t.Schema + "." + t.Name
	}
	return t.Name
}

// Quoted is the table's name quoted for SQL.
func (t Table) Quoted() string {
	if t.Schema != "" {
		return Quote(t.Schema) + "." + Quote(t.Name)
	}
	return Quote(t.Name)
}

// TableSchema returns the Arrow schema of a table as the driver maps its
// columns, or nil when the table does not exist. On SQLite (C driver) the
// schema comes from the declared types by SQLite's affinity rules (the
// driver's own lookup infers types from stored values, which SQLite does not
// hold to the declaration): INT → int64; CHAR, CLOB, TEXT → utf8; BLOB →
// binary; REAL, FLOA, DOUB → float64; other declared types → float64
// (NUMERIC); no declared type → the type the driver reads it as (null,
// a column that takes any value, when it cannot say).
func (c *Conn) TableSchema(ctx context.Context, t Table) (*arrow.Schema, error) {
	if c.db.caps.Dialect == Postgres {
		// The driver's lookup of a missing table is an error, which would
		// abort an open transaction: ask first in a way that cannot fail.
		var exists bool
		if _, err := c.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", []any{&exists}, t.Quoted()); err != nil {
			return nil, err
		}
		if !exists {
			return nil, nil
		}
	}
	if c.db.caps.Dialect == DuckDB {
		// A failed statement aborts DuckDB's open transaction too, and
		// the driver's lookup of a missing table is one: ask first.
		var n int64
		q := "SELECT count(*) FROM information_schema.tables WHERE table_catalog = current_database() AND table_schema = coalesce(?, current_schema()) AND table_name = ?"
		var schema any
		if t.Schema != "" {
			schema = t.Schema
		}
		if _, err := c.QueryRow(ctx, q, []any{&n}, schema, t.Name); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, nil
		}
	}
	if c.db.caps.Dialect == SQLite && c.db.cfg.Driver != FlightSQL {
		return c.sqliteSchema(ctx, t)
	}
	var schema *string
	if t.Schema != "" {
		schema = &t.Schema
	}
	dctx, done := c.db.driverCtx(ctx)
	sc, err := c.c.GetTableSchema(dctx, nil, schema, t.Name)
	done()
	if err != nil {
		var ae adbcapi.Error
		if errors.As(err, &ae) && ae.Code == adbcapi.StatusNotFound {
			return nil, nil
		}
		return nil, Wrap(err, "adbc: schema of table %s", t)
	}
	if sc == nil || sc.NumFields() == 0 {
		return nil, nil
	}
	return sc, nil
}

// Ingest appends rec to table t, creating t from rec's schema first when
// create is set. With bulk ingest the driver maps the types (a binary COPY
// on PostgreSQL); without, the table is created with ColumnType's types and
// the rows go in through one INSERT prepared once and bound to rec. It
// returns the rows written (-1 where the driver does not say).
func (c *Conn) Ingest(ctx context.Context, t Table, rec arrow.RecordBatch, create bool) (int64, error) {
	return c.ingest(ctx, t, rec, create, false)
}

// IngestTemp creates the temporary table name (in the connection's
// temporary schema: it lives as long as the connection, and inside a
// transaction its creation rolls back with the transaction on PostgreSQL,
// SQLite and DuckDB) from rec's schema and writes rec into it, as Ingest
// does: through the driver's bulk ingest with its temporary option, or
// CREATE TEMPORARY TABLE with ColumnType's types and a prepared INSERT.
// The table must not exist. Refer to it by its unqualified name, which
// the temporary schema comes first for on those databases; drop it with
// DROP TABLE.
func (c *Conn) IngestTemp(ctx context.Context, name string, rec arrow.RecordBatch) (int64, error) {
	return c.ingest(ctx, Table{Name: name}, rec, true, true)
}

func (c *Conn) ingest(ctx context.Context, t Table, rec arrow.RecordBatch, create, temp bool) (int64, error) {
	ctx, done := c.db.driverCtx(ctx)
	defer done() // after st.Close
	if c.db.caps.BulkIngest {
		st, err := c.c.NewStatement()
		if err != nil {
			return 0, Wrap(err, "adbc: new statement")
		}
		defer st.Close()
		mode := adbcapi.OptionValueIngestModeAppend
		if create {
			mode = adbcapi.OptionValueIngestModeCreate
		}
		set := [][2]string{{adbcapi.OptionKeyIngestTargetTable, t.Name}, {adbcapi.OptionKeyIngestMode, mode}}
		if t.Schema != "" {
			set = append(set, [2]string{adbcapi.OptionValueIngestTargetDBSchema, t.Schema})
		}
		if temp {
			set = append(set, [2]string{adbcapi.OptionValueIngestTemporary, adbcapi.OptionValueEnabled})
		}
		for _, kv := range set {
			if err := st.SetOption(kv[0], kv[1]); err != nil {
				return 0, Wrap(err, "adbc: ingest into %s: option %s", t, kv[0])
			}
		}
		if err := st.Bind(ctx, rec); err != nil {
			return 0, Wrap(err, "adbc: ingest into %s: bind", t)
		}
		n, err := st.ExecuteUpdate(ctx)
		return n, Wrap(err, "adbc: ingest into %s", t)
	}
	sc := rec.Schema()
	if create {
		ddl, err := c.CreateTableSQL(t, sc)
		if err != nil {
			return 0, err
		}
		if temp {
			ddl = "CREATE TEMPORARY TABLE" + strings.TrimPrefix(ddl, "CREATE TABLE")
		}
		if _, err := c.Exec(ctx, ddl); err != nil {
			return 0, err
		}
	}
	if rec.NumRows() == 0 {
		return 0, nil
	}
	cols := make([]string, sc.NumFields())
	ph := make([]string, sc.NumFields())
	for i, f := range sc.Fields() {
		cols[i], ph[i] = Quote(f.Name), c.db.caps.Placeholder(i+1)
	}
	q := "INSERT INTO " + t.Quoted() + " (" + strings.Join(cols, ", ") + ") VALUES (" + strings.Join(ph, ", ") + ")"
	st, err := c.c.NewStatement()
	if err != nil {
		return 0, Wrap(err, "adbc: new statement")
	}
	defer st.Close()
	if err := st.SetSqlQuery(q); err != nil {
		return 0, Wrap(err, "adbc: %s", q)
	}
	if err := st.Prepare(ctx); err != nil {
		return 0, Wrap(err, "adbc: prepare %s", q)
	}
	if err := st.Bind(ctx, rec); err != nil {
		return 0, Wrap(err, "adbc: bind %s", q)
	}
	n, err := st.ExecuteUpdate(ctx)
	return n, Wrap(err, "adbc: %s", q)
}

// CreateTableSQL is the CREATE TABLE statement for t with sc's columns in
// the dialect's types (ColumnType).
func (c *Conn) CreateTableSQL(t Table, sc *arrow.Schema) (string, error) {
	var b strings.Builder
	b.WriteString("CREATE TABLE " + t.Quoted() + " (")
	for i, f := range sc.Fields() {
		typ, err := ColumnType(c.db.caps.Dialect, f.Type)
		if err != nil {
			return "", fmt.Errorf("column %q: %w", f.Name, err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(Quote(f.Name) + " " + typ)
		if !f.Nullable {
			b.WriteString(" NOT NULL")
		}
	}
	b.WriteString(")")
	return b.String(), nil
}

// ColumnType is the SQL column type a table created without bulk ingest
// (or a column added to one) gets for an Arrow type. DuckDB gets its own
// types (duckType). SQLite and Generic keep to the types SQLite
// itself (and so the SQLite-backed Flight SQL servers) understand: INTEGER,
// REAL, TEXT, BLOB; timestamps are TEXT on SQLite, TIMESTAMP on Generic.
func ColumnType(dialect string, t arrow.DataType) (string, error) {
	if dialect == DuckDB {
		return duckType(t)
	}
	pg := dialect == Postgres
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32:
		if pg {
			return "bigint", nil
		}
		return "INTEGER", nil
	case arrow.BOOL:
		if pg {
			return "boolean", nil
		}
		return "INTEGER", nil
	case arrow.FLOAT32, arrow.FLOAT64:
		if pg {
			return "double precision", nil
		}
		return "REAL", nil
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		if pg {
			return "text", nil
		}
		return "TEXT", nil
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW, arrow.FIXED_SIZE_BINARY:
		if pg {
			return "bytea", nil
		}
		return "BLOB", nil
	case arrow.TIMESTAMP:
		if pg {
			if t.(*arrow.TimestampType).TimeZone != "" {
				return "timestamptz", nil
			}
			return "timestamp", nil
		}
		if dialect == SQLite {
			return "TEXT", nil // what SQLite's Go drivers write for a time parameter
		}
		return "TIMESTAMP", nil
	}
	return "", fmt.Errorf("%w: adbc: no column type for Arrow %s without bulk ingest", flightline.ErrSchemaMismatch, t)
}

// Wrap adds context to an ADBC error and classifies it with Flightline's
// sentinels (credentials, rights, serialisation conflicts); nil stays nil.
// The result carries the driver's SQLSTATE (an SQLState method, as pgx's
// errors have), so code written for one SQL driver reads it alike.
func Wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	e := &Error{msg: fmt.Sprintf(format, args...), err: err}
	var ae adbcapi.Error
	if errors.As(err, &ae) {
		state := SQLState(err)
		switch {
		case ae.Code == adbcapi.StatusUnauthenticated || state == "28P01" || state == "28000":
			e.kind = flightline.ErrUnauthenticated
		case ae.Code == adbcapi.StatusUnauthorized || state == "42501":
			e.kind = flightline.ErrPermissionDenied
		case state == "40001" || state == "40P01" || isDuckDBConflict(ae):
			e.kind = flightline.ErrConflict
		}
	}
	return e
}

// Error is an error of a driver with the context of the call that failed.
type Error struct {
	msg  string
	kind error // a flightline sentinel, or nil
	err  error
}

func (e *Error) Error() string {
	if e.kind != nil {
		return e.msg + ": " + e.kind.Error() + ": " + e.err.Error()
	}
	return e.msg + ": " + e.err.Error()
}

// Unwrap returns the Flightline sentinel (if any) and the driver's error.
func (e *Error) Unwrap() []error {
	if e.kind != nil {
		return []error{e.kind, e.err}
	}
	return []error{e.err}
}

// SQLState is the SQLSTATE the driver reported ("" when none).
func (e *Error) SQLState() string { return SQLState(e.err) }

// SQLState is the SQLSTATE an ADBC error carries ("" when none).
func SQLState(err error) string {
	var ae adbcapi.Error
	if errors.As(err, &ae) {
		return strings.TrimRight(string(ae.SqlState[:]), "\x00")
	}
	return ""
}

// sqliteSchema reads t's declared columns with PRAGMA table_info.
func (c *Conn) sqliteSchema(ctx context.Context, t Table) (*arrow.Schema, error) {
	q := "PRAGMA table_info(" + Quote(t.Name) + ")"
	if t.Schema != "" {
		q = "PRAGMA " + Quote(t.Schema) + ".table_info(" + Quote(t.Name) + ")"
	}
	r, err := c.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer r.Release()
	var fields []arrow.Field
	for r.Next() {
		rec := r.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			var name, decl string
			var notNull int64
			if err := scan(rec.Column(1), i, &name); err != nil {
				return nil, fmt.Errorf("adbc: %s: %w", q, err)
			}
			if err := scan(rec.Column(2), i, &decl); err != nil {
				return nil, fmt.Errorf("adbc: %s: %w", q, err)
			}
			if err := scan(rec.Column(3), i, &notNull); err != nil {
				return nil, fmt.Errorf("adbc: %s: %w", q, err)
			}
			fields = append(fields, arrow.Field{Name: name, Type: sqliteAffinity(decl), Nullable: notNull == 0})
		}
	}
	if err := r.Err(); err != nil {
		return nil, Wrap(err, "adbc: %s", q)
	}
	if len(fields) == 0 {
		return nil, nil
	}
	// Columns without a declared type: as the driver reads them.
	for i, f := range fields {
		if f.Type.ID() != arrow.NULL {
			continue
		}
		var schema *string
		if t.Schema != "" {
			schema = &t.Schema
		}
		if sc, err := c.c.GetTableSchema(ctx, nil, schema, t.Name); err == nil {
			if j := sc.FieldIndices(f.Name); len(j) == 1 {
				fields[i].Type = sc.Field(j[0]).Type
			}
		}
	}
	return arrow.NewSchema(fields, nil), nil
}

// sqliteAffinity maps a declared column type to Arrow by SQLite's rules
// for column affinity (section 3.1 of its datatype documentation).
func sqliteAffinity(decl string) arrow.DataType {
	d := strings.ToUpper(decl)
	switch {
	case strings.Contains(d, "INT"):
		return arrow.PrimitiveTypes.Int64
	case strings.Contains(d, "CHAR"), strings.Contains(d, "CLOB"), strings.Contains(d, "TEXT"):
		return arrow.BinaryTypes.String
	case strings.Contains(d, "BLOB"):
		return arrow.BinaryTypes.Binary
	case d == "":
		return arrow.Null
	}
	return arrow.PrimitiveTypes.Float64 // REAL, FLOA, DOUB, and NUMERIC affinity
}

// duckType is DuckDB's column type for an Arrow type: the types DuckDB's own
// Arrow import gives them.
func duckType(t arrow.DataType) (string, error) {
	switch t.ID() {
	case arrow.INT8:
		return "TINYINT", nil
	case arrow.INT16:
		return "SMALLINT", nil
	case arrow.INT32:
		return "INTEGER", nil
	case arrow.INT64:
		return "BIGINT", nil
	case arrow.UINT8:
		return "UTINYINT", nil
	case arrow.UINT16:
		return "USMALLINT", nil
	case arrow.UINT32:
		return "UINTEGER", nil
	case arrow.UINT64:
		return "UBIGINT", nil
	case arrow.BOOL:
		return "BOOLEAN", nil
	case arrow.FLOAT32: // no FLOAT16: DuckDB's Arrow import has none
		return "FLOAT", nil
	case arrow.FLOAT64:
		return "DOUBLE", nil
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return "VARCHAR", nil
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW, arrow.FIXED_SIZE_BINARY:
		return "BLOB", nil
	case arrow.DATE32, arrow.DATE64:
		return "DATE", nil
	case arrow.TIMESTAMP:
		if t.(*arrow.TimestampType).TimeZone != "" {
			return "TIMESTAMPTZ", nil
		}
		return "TIMESTAMP", nil
	case arrow.TIME32, arrow.TIME64:
		return "TIME", nil
	case arrow.INTERVAL_MONTH_DAY_NANO:
		return "INTERVAL", nil
	case arrow.DICTIONARY:
		return duckType(t.(*arrow.DictionaryType).ValueType)
	case arrow.DECIMAL128, arrow.DECIMAL256:
		d := t.(arrow.DecimalType)
		if d.GetPrecision() <= 38 {
			return fmt.Sprintf("DECIMAL(%d,%d)", d.GetPrecision(), d.GetScale()), nil
		}
	}
	return "", fmt.Errorf("%w: adbc: no DuckDB column type for Arrow %s", flightline.ErrSchemaMismatch, t)
}

// isDuckDBConflict tells DuckDB's write-write conflict between transactions
// (optimistic concurrency: the later writer of a row fails). DuckDB reports
// no SQLSTATE, so its message is the only sign; this is the one place that
// reads it.
func isDuckDBConflict(ae adbcapi.Error) bool {
	return strings.Contains(ae.Msg, "TransactionContext Error") && strings.Contains(ae.Msg, "onflict")
}
