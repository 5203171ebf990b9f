package clickhouse

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
)

// Defaults of the options.
const (
	DefaultCheckpointTable = "flightline_checkpoints"
	DefaultDedupWindow     = 1000
	DefaultOrderBy         = "tuple()"
)

// Config is what a clickhouse sink is given in its URL or YAML.
type Config struct {
	// Endpoint is the server's HTTP interface: http://host:8123 or
	// https://…. Required.
	Endpoint string
	// Database is the database the tables live in (default: the user's
	// default database on the server).
	Database string
	// Table is the default target table ("table" or "db.table").
	// Pipeline.Target overrides it when non-empty.
	Table string
	// CheckpointTable is the checkpoint table (default
	// DefaultCheckpointTable, in the database).
	CheckpointTable string
	// User is the ClickHouse user (default "default").
	User string
	// Password is the user's password (default none).
	Password string
	// OrderBy is the ORDER BY expression of tables the sink creates
	// (default DefaultOrderBy, "tuple()": insertion order). It is SQL,
	// used as given.
	OrderBy string
	// DedupWindow is non_replicated_deduplication_window of tables the
	// sink creates (default DefaultDedupWindow): how many of the table's
	// most recent insert blocks ClickHouse remembers the tokens of. A
	// replay is deduplicated only while fewer blocks than this were
	// inserted into the table since the original insert (see the package
	// documentation).
	DedupWindow int
}

// Option configures a Sink beyond its Config.
type Option func(*options) error

type options struct {
	db, table, cpTable string
	user, password     string
	orderBy            string
	window             int
	hc                 *http.Client
	log                *slog.Logger
	mem                memory.Allocator
}

// HTTPClient sets the HTTP client (default: a client of its own with no
// timeout; contexts bound every call).
func HTTPClient(c *http.Client) Option {
	return func(o *options) error {
		if c == nil {
			return fmt.Errorf("%w: nil HTTP client", flightline.ErrInvalidInput)
		}
		o.hc = c
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

// Allocator sets the allocator of the IPC encoder (default
// memory.DefaultAllocator).
func Allocator(mem memory.Allocator) Option {
	return func(o *options) error {
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		o.mem = mem
		return nil
	}
}

// Sink writes to ClickHouse over its HTTP interface. It is safe for
// concurrent use; see the package documentation for what it guarantees.
type Sink struct {
	c       *client
	o       options
	cp      string // quoted checkpoint table
	log     *slog.Logger
	initMu  sync.Mutex
	cpReady bool
	// afterInsert, set by tests, runs after a batch's data insert and
	// before its checkpoint row: an error there is a crash in between.
	afterInsert func() error
}

// New returns a Sink for the ClickHouse server whose HTTP interface is at
// cfg.Endpoint. It does not connect: errors surface on the first Open,
// Checkpoint or Ping. It validates cfg (an http(s) endpoint, a non-blank
// ORDER BY, a positive dedup window). Close releases the HTTP client's
// idle connections.
func New(_ context.Context, cfg Config, opts ...Option) (*Sink, error) {
	endpoint := cfg.Endpoint
	o := options{db: cfg.Database, table: cfg.Table, cpTable: cfg.CheckpointTable, user: cfg.User, password: cfg.Password,
		orderBy: cfg.OrderBy, window: cfg.DedupWindow, log: slog.Default(), mem: memory.DefaultAllocator}
	if o.cpTable == "" {
		o.cpTable = DefaultCheckpointTable
	}
	if o.user == "" {
		o.user = "default"
	}
	if o.orderBy == "" {
		o.orderBy = DefaultOrderBy
	} else if strings.TrimSpace(o.orderBy) == "" {
		return nil, fmt.Errorf("%w: empty ORDER BY", flightline.ErrInvalidInput)
	}
	if o.window == 0 {
		o.window = DefaultDedupWindow
	} else if o.window < 1 {
		return nil, fmt.Errorf("%w: dedup window %d < 1", flightline.ErrInvalidInput, o.window)
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: clickhouse: endpoint %q is not http(s)://HOST:PORT", flightline.ErrInvalidInput, endpoint)
	}
	u.Path, u.RawQuery, u.User = "/", "", nil
	if o.hc == nil {
		o.hc = &http.Client{}
	}
	s := &Sink{c: &client{base: u, db: o.db, user: o.user, password: o.password, hc: o.hc}, o: o, log: o.log}
	s.cp = tableName(o.cpTable)
	return s, nil
}

// Guarantee implements flightsink.Guaranteer. ClickHouse has no
// transaction over an insert and a checkpoint row; the sink's guarantee is
// exactly-once under the conditions the package documentation states
// (batches re-formed identically on replay, replays within the dedup
// window), at-least-once beyond them. It declares ExactlyOnce because the
// coordinator must resume from its checkpoint for those conditions to hold.
func (s *Sink) Guarantee() flightsink.Guarantee { return flightsink.ExactlyOnce }

// Close releases the HTTP client's idle connections (the sink holds no
// other) and returns nil.
func (s *Sink) Close() error {
	s.o.hc.CloseIdleConnections()
	return nil
}

// Ping checks that the server answers with the configured credentials.
func (s *Sink) Ping(ctx context.Context) error {
	_, err := s.c.exec(ctx, "SELECT 1", nil, nil)
	return err
}

// state is the checkpoint row of one (pipeline, target): the newest row
// by version (ReplacingMergeTree(version), read with FINAL).
type state struct {
	version uint64
	epoch   uint64
	claim   string
	cp      []byte // committed checkpoint
	pending []byte // checkpoint of a batch whose insert was started and not confirmed
	token   string // that batch's deduplication token
}

func (s *Sink) ensureCheckpointTable(ctx context.Context) error {
	s.initMu.Lock()
	defer s.initMu.Unlock()
	if s.cpReady {
		return nil
	}
	_, err := s.c.exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.cp+` (
		pipeline_id String, target String, version UInt64, epoch UInt64, claim String,
		checkpoint String, pending String, token String, updated_at DateTime64(3) DEFAULT now64(3)
	) ENGINE = ReplacingMergeTree(version) ORDER BY (pipeline_id, target)`, nil, nil)
	if err != nil {
		return fmt.Errorf("clickhouse sink: create checkpoint table %s: %w", s.o.cpTable, err)
	}
	s.cpReady = true
	return nil
}

// read returns the state of (id, key), nil when it has none. A missing
// checkpoint table is no state.
func (s *Sink) read(ctx context.Context, id, key string) (*state, error) {
	out, err := s.c.exec(ctx, `SELECT version, epoch, claim, checkpoint, pending, token FROM `+s.cp+
		` FINAL WHERE pipeline_id = `+literal(id)+` AND target = `+literal(key)+` FORMAT TabSeparated`,
		url.Values{"wait_end_of_query": {"1"}}, nil)
	var se *ServerError
	if errors.As(err, &se) && se.Code == 60 {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("clickhouse sink: read checkpoint of %q: %w", id, err)
	}
	line := strings.TrimRight(string(out), "\n")
	if line == "" {
		return nil, nil
	}
	f := strings.Split(line, "\t")
	if len(f) != 6 || strings.Contains(line, "\n") {
		return nil, fmt.Errorf("%w: clickhouse sink: checkpoint row of %q unreadable: %q", flightline.ErrInternal, id, line)
	}
	st := &state{claim: f[2], token: f[5]}
	if st.version, err = strconv.ParseUint(f[0], 10, 64); err == nil {
		st.epoch, err = strconv.ParseUint(f[1], 10, 64)
	}
	if err == nil {
		st.cp, err = base64.StdEncoding.DecodeString(f[3])
	}
	if err == nil {
		st.pending, err = base64.StdEncoding.DecodeString(f[4])
	}
	if err != nil {
		return nil, fmt.Errorf("%w: clickhouse sink: checkpoint row of %q: %w", flightline.ErrInternal, id, err)
	}
	return st, nil
}

// put inserts a new checkpoint row for (id, key).
func (s *Sink) put(ctx context.Context, id, key string, st *state) error {
	q := `INSERT INTO ` + s.cp + ` (pipeline_id, target, version, epoch, claim, checkpoint, pending, token) VALUES (` +
		literal(id) + `, ` + literal(key) + `, ` + strconv.FormatUint(st.version, 10) + `, ` + strconv.FormatUint(st.epoch, 10) + `, ` +
		literal(st.claim) + `, ` + literal(base64.StdEncoding.EncodeToString(st.cp)) + `, ` +
		literal(base64.StdEncoding.EncodeToString(st.pending)) + `, ` + literal(st.token) + `)`
	if _, err := s.c.exec(ctx, q, nil, nil); err != nil {
		return fmt.Errorf("clickhouse sink: write checkpoint row of %q: %w", id, err)
	}
	return nil
}

// targetKey is the checkpoint row's target column: empty for the default
// table, named or not.
func (s *Sink) targetKey(target string) string {
	if target == s.o.table {
		return ""
	}
	return target
}

// Checkpoint implements flightsink.Sink: the committed checkpoint, read
// without claiming.
func (s *Sink) Checkpoint(ctx context.Context, p flightsink.Pipeline) ([]byte, error) {
	if p.ID == "" {
		return nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	st, err := s.read(ctx, p.ID, s.targetKey(p.Target))
	if err != nil || st == nil || len(st.cp) == 0 {
		return nil, err
	}
	return st.cp, nil
}

// Open implements flightsink.Sink: it writes a claim row with the next
// epoch, whose version (epoch<<32) is above every row an earlier writer
// can write, so their checkpoint rows lose under FINAL and their next
// WriteBatch finds the newer claim (ErrFenced). A batch left pending by
// the previous writer stays pending: a replay of it re-forms its token.
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	if p.ID == "" {
		return nil, nil, fmt.Errorf("%w: empty pipeline id", flightline.ErrInvalidInput)
	}
	table := p.Target
	if table == "" {
		table = s.o.table
	}
	if table == "" {
		return nil, nil, fmt.Errorf("%w: pipeline %q has no target table and the sink no default table", flightline.ErrInvalidInput, p.ID)
	}
	if err := s.ensureCheckpointTable(ctx); err != nil {
		return nil, nil, err
	}
	key := s.targetKey(p.Target)
	st, err := s.read(ctx, p.ID, key)
	if err != nil {
		return nil, nil, err
	}
	if st == nil {
		st = &state{}
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, nil, err
	}
	st.epoch++
	if st.epoch >= 1<<31 {
		return nil, nil, fmt.Errorf("%w: clickhouse sink: pipeline %q: epoch overflow", flightline.ErrInternal, p.ID)
	}
	st.version, st.claim = st.epoch<<32, hex.EncodeToString(b[:])
	if err := s.put(ctx, p.ID, key, st); err != nil {
		return nil, nil, err
	}
	s.log.Debug("clickhouse sink: pipeline opened", "pipeline", p.ID, "table", table, "epoch", st.epoch)
	w := &writer{s: s, p: p, key: key, table: table, epoch: st.epoch, claim: st.claim, seq: 0}
	if len(st.cp) == 0 {
		return w, nil, nil
	}
	return w, bytes.Clone(st.cp), nil
}

// writer is the Writer of one pipeline at one epoch.
type writer struct {
	s      *Sink
	p      flightsink.Pipeline
	key    string
	table  string
	epoch  uint64
	claim  string
	seq    uint64
	closed bool

	verified *arrow.Schema // the schema last checked against the table
	insert   string        // its INSERT statement
	notNull  []bool        // per field: the column is not Nullable
}

// WriteBatch implements flightsink.Writer.
func (w *writer) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := flightsink.CheckBatch(rec, cp); err != nil {
		return err
	}
	return w.write(ctx, []flightsink.Batch{{Rec: rec, CP: cp}})
}

// WriteBatches implements flightsink.GroupWriter: one intent row, one
// INSERT per new batch (each with its own token, so a replay that groups
// the batches otherwise still re-forms every token), one commit row with
// the group's checkpoint.
func (w *writer) WriteBatches(ctx context.Context, batches []flightsink.Batch) error {
	if err := flightsink.CheckGroup(batches); err != nil {
		return err
	}
	return w.write(ctx, batches)
}

// nextVersion is the version of the writer's next checkpoint row.
func (w *writer) nextVersion() uint64 {
	w.seq++
	return w.epoch<<32 | w.seq
}

func (w *writer) write(ctx context.Context, batches []flightsink.Batch) error {
	s := w.s
	if w.closed {
		return fmt.Errorf("%w: writer of %q is closed", flightline.ErrInvalidInput, w.p.ID)
	}
	st, err := s.read(ctx, w.p.ID, w.key)
	if err != nil {
		return err
	}
	if st == nil || st.epoch != w.epoch || st.claim != w.claim {
		var e uint64
		if st != nil {
			e = st.epoch
		}
		return fmt.Errorf("%w: clickhouse sink: pipeline %q: writer of epoch %d, the table's claim is epoch %d", flightline.ErrFenced, w.p.ID, w.epoch, e)
	}
	last := st.cp
	fresh, next, n := flightsink.Fold(last, batches)
	if n == 0 {
		return nil
	}
	// Each new batch is its own INSERT with its own token, taken from the
	// running checkpoint before and after it: a replay re-forms a batch
	// from where it starts, whichever group the batches travelled in.
	type insert struct {
		rec   arrow.RecordBatch
		token string
	}
	var recs []arrow.RecordBatch
	var ins []insert
	run := last
	for i, b := range batches {
		if !fresh[i] {
			continue
		}
		if err := checkFields(b.Rec.Schema()); err != nil {
			return err
		}
		if len(recs) > 0 && !flightsink.SameSchema(recs[0].Schema(), b.Rec.Schema()) {
			return fmt.Errorf("%w: clickhouse sink: a group's batches have different schemas", flightline.ErrSchemaMismatch)
		}
		recs = append(recs, b.Rec)
		after := checkpoint.Next(run, b.CP)
		if b.Rec.NumRows() > 0 {
			ins = append(ins, insert{b.Rec, Token(w.p.ID, w.key, run, after, b.Rec.NumRows())})
		}
		run = after
	}
	if err := w.prepare(ctx, recs); err != nil {
		return err
	}
	if len(ins) > 0 {
		token := ins[0].token
		switch {
		case len(st.pending) > 0 && st.token == token:
			s.log.Info("clickhouse sink: replaying the batch a previous writer left pending (deduplicated if it landed)",
				"pipeline", w.p.ID, "table", w.table, "token", token)
		case len(st.pending) > 0:
			s.log.Warn("clickhouse sink: the batch a previous writer left pending was not re-formed identically; "+
				"if its insert landed, rows it shares with this batch are now written twice (at-least-once)",
				"pipeline", w.p.ID, "table", w.table, "pending_token", st.token, "token", token)
		}
		// Intent first: a crash after it leaves the checkpoint behind the
		// data, and the replay carries the same tokens.
		if err := s.put(ctx, w.p.ID, w.key, &state{version: w.nextVersion(), epoch: w.epoch, claim: w.claim,
			cp: last, pending: next, token: token}); err != nil {
			return err
		}
		for _, in := range ins {
			if err := w.insertRows(ctx, in.rec, in.token); err != nil {
				return err
			}
		}
		if s.afterInsert != nil {
			if err := s.afterInsert(); err != nil {
				return err
			}
		}
	}
	return s.put(ctx, w.p.ID, w.key, &state{version: w.nextVersion(), epoch: w.epoch, claim: w.claim, cp: next})
}

// Token is the insert_deduplication_token of a batch of rows rows taking pipeline id's target key from checkpoint last to next. It
// names the batch by what a replay re-forms, not by its bytes: a replay
// from last that ends at next with as many rows carries it again, whichever
// writer (epoch) sends it.
func Token(id, key string, last, next []byte, rows int64) string {
	h := sha256.New()
	for _, p := range [][]byte{[]byte(id), []byte(key), last, next} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(rows))
	h.Write(n[:])
	return "flightline-" + hex.EncodeToString(h.Sum(nil)[:20])
}

// insertRows sends rec as an Arrow IPC stream in one INSERT … FORMAT
// ArrowStream with the token. The stream is encoded while it is sent.
func (w *writer) insertRows(ctx context.Context, rec arrow.RecordBatch, token string) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		var err error
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: clickhouse sink: encoding the batch: %v", flightline.ErrInternal, r)
			}
			pw.CloseWithError(err)
			done <- err
		}()
		iw := ipc.NewWriter(pw, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(w.s.o.mem))
		if err = iw.Write(rec); err != nil {
			_ = iw.Close()
			return
		}
		err = iw.Close()
	}()
	_, err := w.s.c.exec(ctx, w.insert, url.Values{
		"insert_deduplicate":         {"1"},
		"insert_deduplication_token": {token},
	}, pr)
	pr.CloseWithError(errors.New("clickhouse sink: request ended"))
	encErr := <-done // rec is not released before the encoder is done
	if err != nil {
		return fmt.Errorf("clickhouse sink: insert into %s: %w", w.table, err)
	}
	if encErr != nil {
		return encErr
	}
	return nil
}

var windowRE = regexp.MustCompile(`non_replicated_deduplication_window\s*=\s*(\d+)`)

// prepare creates the table from recs' schema if absent and checks that its
// columns take the schema and that it deduplicates inserts.
func (w *writer) prepare(ctx context.Context, recs []arrow.RecordBatch) error {
	if len(recs) == 0 {
		return nil
	}
	sc := recs[0].Schema()
	if w.verified == nil || !flightsink.SameSchema(w.verified, sc) {
		cols, engine, create, err := w.describe(ctx)
		if err != nil {
			return err
		}
		if cols == nil {
			if err := w.create(ctx, sc); err != nil {
				return err
			}
			if cols, engine, create, err = w.describe(ctx); err != nil {
				return err
			}
		}
		if !strings.HasPrefix(engine, "Replicated") && !strings.HasPrefix(engine, "Shared") {
			m := windowRE.FindStringSubmatch(create)
			if m == nil || m[1] == "0" {
				return fmt.Errorf("%w: clickhouse sink: table %s (%s) does not deduplicate inserts (non_replicated_deduplication_window is 0), "+
					"so a replay after a crash would write twice; run ALTER TABLE %s MODIFY SETTING non_replicated_deduplication_window = %d",
					flightline.ErrFailedPrecondition, w.table, engine, tableName(w.table), w.s.o.window)
			}
		}
		if err := w.check(sc, cols); err != nil {
			return err
		}
	}
	for _, rec := range recs {
		for i, f := range sc.Fields() {
			if w.notNull[i] && rec.Column(i).NullN() > 0 {
				return fmt.Errorf("%w: table %s: column %q is not Nullable, the batch has %d nulls in it",
					flightline.ErrSchemaMismatch, w.table, f.Name, rec.Column(i).NullN())
			}
		}
	}
	return nil
}

type column struct{ name, typ string }

// describe returns the table's columns (nil when it does not exist), its
// engine and its CREATE statement.
func (w *writer) describe(ctx context.Context) ([]column, string, string, error) {
	db, tbl, ok := strings.Cut(w.table, ".")
	dbExpr := "currentDatabase()"
	if ok {
		dbExpr = literal(db)
	} else {
		tbl = w.table
	}
	out, err := w.s.c.exec(ctx, `SELECT engine, replaceAll(replaceAll(create_table_query, '\n', ' '), '\t', ' ') FROM system.tables WHERE database = `+
		dbExpr+` AND name = `+literal(tbl)+` FORMAT TabSeparated`, url.Values{"wait_end_of_query": {"1"}}, nil)
	if err != nil {
		return nil, "", "", fmt.Errorf("clickhouse sink: look up table %s: %w", w.table, err)
	}
	line := strings.TrimRight(string(out), "\n")
	if line == "" {
		return nil, "", "", nil
	}
	engine, create, _ := strings.Cut(line, "\t")
	engine, create = unescapeTSV(engine), unescapeTSV(create)
	out, err = w.s.c.exec(ctx, `SELECT name, type FROM system.columns WHERE database = `+dbExpr+` AND table = `+literal(tbl)+
		` ORDER BY position FORMAT TabSeparated`, url.Values{"wait_end_of_query": {"1"}}, nil)
	if err != nil {
		return nil, "", "", fmt.Errorf("clickhouse sink: read columns of %s: %w", w.table, err)
	}
	cols := []column{}
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if name, typ, ok := strings.Cut(l, "\t"); ok {
			cols = append(cols, column{unescapeTSV(name), unescapeTSV(typ)})
		}
	}
	return cols, engine, create, nil
}

func (w *writer) create(ctx context.Context, sc *arrow.Schema) error {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS " + tableName(w.table) + " (")
	for i, f := range sc.Fields() {
		t, err := chType(f.Type)
		if err != nil {
			return err
		}
		if f.Nullable {
			t = nullable(t)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(ident(f.Name) + " " + t)
	}
	fmt.Fprintf(&b, ") ENGINE = MergeTree ORDER BY %s SETTINGS non_replicated_deduplication_window = %d", w.s.o.orderBy, w.s.o.window)
	if _, err := w.s.c.exec(ctx, b.String(), nil, nil); err != nil {
		return fmt.Errorf("clickhouse sink: create table %s: %w", w.table, err)
	}
	w.s.log.Info("clickhouse sink: created table", "table", w.table, "pipeline", w.p.ID, "dedup_window", w.s.o.window)
	return nil
}

// check compares the table's columns with the schema: every field needs a
// column of its mapped type (or Nullable of it); a nullable field into a
// column that is not Nullable is checked batch by batch for nulls.
func (w *writer) check(sc *arrow.Schema, cols []column) error {
	byName := make(map[string]string, len(cols))
	for _, c := range cols {
		byName[c.name] = c.typ
	}
	names := make([]string, sc.NumFields())
	notNull := make([]bool, sc.NumFields())
	for i, f := range sc.Fields() {
		typ, ok := byName[f.Name]
		if !ok {
			return fmt.Errorf("%w: table %s has no column %q (batch type %s)", flightline.ErrSchemaMismatch, w.table, f.Name, f.Type)
		}
		want, _ := chType(f.Type)
		inner, isNull := unwrapNullable(typ)
		if !sameType(inner, want) {
			return fmt.Errorf("%w: table %s: column %q has type %s, the batch has %s (which maps to %s)",
				flightline.ErrSchemaMismatch, w.table, f.Name, typ, f.Type, want)
		}
		notNull[i] = !isNull
		names[i] = ident(f.Name)
	}
	w.verified, w.notNull = sc, notNull
	w.insert = "INSERT INTO " + tableName(w.table) + " (" + strings.Join(names, ", ") + ") FORMAT ArrowStream"
	return nil
}

// Close implements flightsink.Writer. It commits nothing.
func (w *writer) Close(context.Context) error {
	w.closed = true
	return nil
}

var (
	_ flightsink.Sink        = (*Sink)(nil)
	_ flightsink.Guaranteer  = (*Sink)(nil)
	_ flightsink.GroupWriter = (*writer)(nil)
)
