package bigquery

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/bigquery"
	bqstorage "cloud.google.com/go/bigquery/storage/apiv1"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/bqerr"
	"github.com/flightline/flightline/internal/incsrc"
)

// Config is what a Source reads: the keys of the bigquery: source kind.
// The zero value of an optional field means its default.
type Config struct {
	// Project and Dataset hold the table. Required.
	Project, Dataset string
	// Table is the table to read: "table", or "dataset.table" for another
	// dataset of the project. The stream's name is Table as given.
	// Required.
	Table string
	// Cursor is the INT64 or STRING column that grows with every new row;
	// Tiebreak the INT64 or STRING column making (cursor, tiebreak) unique
	// (the cursor again when it is unique). Required.
	Cursor, Tiebreak string
	// BatchRows is the rows per batch at most (default 10000).
	BatchRows int
	// PollInterval is the pause between polls once caught up, and so the
	// heartbeat period (default 1s).
	PollInterval time.Duration
	// CredentialsFile authenticates with a service-account key file instead
	// of application default credentials. Its content is never logged.
	CredentialsFile string
	// EmulatorEndpoint and EmulatorGRPC point the source at a BigQuery
	// emulator: the REST API at EmulatorEndpoint (http://HOST:PORT) and the
	// Storage Read API at EmulatorGRPC (HOST:PORT, insecure), both without
	// authentication. Both or neither.
	EmulatorEndpoint, EmulatorGRPC string
}

// Option configures a Source beyond its Config: retries, allocator,
// logger. Options apply only in New.
type Option func(*options) error

type options struct {
	table, cursor, tiebreak string
	batch                   int
	poll                    time.Duration
	endpoint, grpcAddr      string
	credentials             string
	retries                 int
	backoff, attempt        time.Duration
	mem                     memory.Allocator
	log                     *slog.Logger
}

// options turns cfg into the source's settings, defaults for zero fields.
func (cfg Config) options() (options, error) {
	o := options{batch: 10000, poll: time.Second, retries: 6, backoff: 200 * time.Millisecond, attempt: 2 * time.Minute,
		mem: memory.DefaultAllocator, log: slog.Default()}
	if cfg.Table == "" || cfg.Cursor == "" || cfg.Tiebreak == "" {
		return o, fmt.Errorf("%w: bigquery source: table, cursor and tiebreak are required", flightline.ErrInvalidInput)
	}
	for _, id := range []string{cfg.Table, cfg.Cursor, cfg.Tiebreak} {
		if strings.ContainsAny(id, "`\\\n") {
			return o, fmt.Errorf("%w: bigquery source: bad name %q", flightline.ErrInvalidInput, id)
		}
	}
	o.table, o.cursor, o.tiebreak = cfg.Table, cfg.Cursor, cfg.Tiebreak
	switch {
	case cfg.BatchRows < 0:
		return o, fmt.Errorf("%w: bigquery source: batch rows %d", flightline.ErrInvalidInput, cfg.BatchRows)
	case cfg.BatchRows > 0:
		o.batch = cfg.BatchRows
	}
	switch {
	case cfg.PollInterval < 0:
		return o, fmt.Errorf("%w: bigquery source: poll interval %v", flightline.ErrInvalidInput, cfg.PollInterval)
	case cfg.PollInterval > 0:
		o.poll = cfg.PollInterval
	}
	if (cfg.EmulatorEndpoint == "") != (cfg.EmulatorGRPC == "") {
		return o, fmt.Errorf("%w: bigquery source: an emulator needs both its HTTP endpoint and its gRPC address", flightline.ErrInvalidInput)
	}
	o.endpoint, o.grpcAddr, o.credentials = cfg.EmulatorEndpoint, cfg.EmulatorGRPC, cfg.CredentialsFile
	return o, nil
}

// Retry sets how a call is retried: attempts in all, backoff doubling from
// base (jittered, capped at 10s), each attempt bounded by timeout (the
// clients retry some errors by themselves until their context ends).
// Quota and server errors, and attempts that time out, are retried; after
// the last attempt the call fails with flightline.ErrUnavailable. Default
// 6 attempts from 200ms, 2 minutes each.
func Retry(attempts int, base, timeout time.Duration) Option {
	return func(o *options) error {
		if attempts < 1 || base <= 0 || timeout <= 0 {
			return fmt.Errorf("%w: bigquery source: Retry(%d, %s, %s)", flightline.ErrInvalidInput, attempts, base, timeout)
		}
		o.retries, o.backoff, o.attempt = attempts, base, timeout
		return nil
	}
}

// Allocator sets the allocator of the batches (nil: the default).
func Allocator(mem memory.Allocator) Option {
	return func(o *options) error {
		if mem == nil {
			mem = memory.DefaultAllocator
		}
		o.mem = mem
		return nil
	}
}

// Logger sets the logger (nil: slog.Default()). Nothing logged contains
// credentials.
func Logger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.Default()
		}
		o.log = l
		return nil
	}
}

// Source reads one BigQuery table incrementally. Safe for concurrent use.
type Source struct {
	o                         options
	project, dataset, tableID string
	sqlName                   string // `project.dataset.table`
	bq                        *bigquery.Client
	rd                        *bqstorage.BigQueryReadClient
	conn                      *grpc.ClientConn
	cancel                    context.CancelFunc

	// restrict, when set (by tests only), rewrites the row restriction of
	// each read: a read session that misses rows, as a snapshot older
	// than the bound query's view would.
	restrict func(string) string
}

var _ flightsrc.Source = (*Source)(nil)

// New returns a Source reading cfg.Table of cfg.Project and cfg.Dataset.
// It validates cfg and the options and creates the BigQuery and Storage
// Read API clients (with credentials resolved, but no call made): a missing
// table is reported by Streams and Read. The clients live until Close, not
// until ctx ends. Options apply only here. Close releases the clients.
func New(ctx context.Context, cfg Config, opts ...Option) (*Source, error) {
	o, err := cfg.options()
	if err != nil {
		return nil, err
	}
	for _, f := range opts {
		if err := f(&o); err != nil {
			return nil, err
		}
	}
	project, dataset := cfg.Project, cfg.Dataset
	if project == "" || dataset == "" || strings.ContainsAny(project+dataset, "`\\/") {
		return nil, fmt.Errorf("%w: bigquery source: bad project %q or dataset %q", flightline.ErrInvalidInput, project, dataset)
	}
	s := &Source{o: o, project: project, dataset: dataset, tableID: o.table}
	if ds, tb, ok := strings.Cut(o.table, "."); ok {
		if ds == "" || tb == "" || strings.Contains(tb, ".") {
			return nil, fmt.Errorf("%w: bigquery source: table %q: want TABLE or DATASET.TABLE", flightline.ErrInvalidInput, o.table)
		}
		s.dataset, s.tableID = ds, tb
	}
	s.sqlName = "`" + project + "." + s.dataset + "." + s.tableID + "`"
	var rest, read []option.ClientOption
	switch {
	case o.endpoint != "":
		conn, err := grpc.NewClient(o.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, fmt.Errorf("%w: bigquery source: %v", flightline.ErrInvalidInput, err)
		}
		s.conn = conn
		rest = []option.ClientOption{option.WithEndpoint(o.endpoint), option.WithoutAuthentication()}
		read = []option.ClientOption{option.WithGRPCConn(conn), option.WithoutAuthentication()}
	case o.credentials != "":
		//lint:ignore SA1019 a service-account key file is the documented way in
		rest = []option.ClientOption{option.WithCredentialsFile(o.credentials)} //nolint:staticcheck
		read = rest
	}
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	if s.bq, err = bigquery.NewClient(life, project, rest...); err != nil {
		s.Close()
		return nil, classify(err, "connecting")
	}
	if s.rd, err = bqstorage.NewBigQueryReadClient(life, read...); err != nil {
		s.Close()
		return nil, classify(err, "connecting to the Storage Read API")
	}
	return s, nil
}

// Close releases the clients and returns their errors joined. Call it
// once, after every Reader is closed.
func (s *Source) Close() error {
	var errs []error
	if s.rd != nil {
		errs = append(errs, s.rd.Close())
	}
	if s.bq != nil {
		errs = append(errs, s.bq.Close())
	}
	if s.conn != nil {
		errs = append(errs, s.conn.Close())
	}
	s.cancel()
	return errors.Join(errs...)
}

// Commit implements flightsrc.Source: BigQuery keeps no reader position.
func (s *Source) Commit(context.Context, flightsrc.CommitRequest) error { return nil }

// Streams implements flightsrc.Source: one stream, the table.
func (s *Source) Streams(ctx context.Context) ([]flightsrc.Stream, error) {
	l, err := s.describe(ctx)
	if err != nil {
		return nil, err
	}
	return []flightsrc.Stream{{Name: s.o.table, Schema: l.schema,
		Description: fmt.Sprintf("BigQuery table %s by (%s, %s)", s.sqlName, s.o.cursor, s.o.tiebreak)}}, nil
}

// layout is how the table is read.
type layout struct {
	schema               *arrow.Schema
	cursorAt, tiebreakAt int
	cursorInt, tieInt    bool // INT64 (else STRING)
}

// describe checks that the dataset and the table exist and reads the Arrow
// schema the Storage Read API gives the table (a session with no rows).
func (s *Source) describe(ctx context.Context) (*layout, error) {
	var sc *arrow.Schema
	err := s.retry(ctx, "reading table "+s.sqlName, func(ctx context.Context) error {
		if _, err := s.bq.Dataset(s.dataset).Table(s.tableID).Metadata(ctx); err != nil {
			if !bqerr.IsNotFound(err) {
				return err
			}
			if _, derr := s.bq.Dataset(s.dataset).Metadata(ctx); bqerr.IsNotFound(derr) {
				return fmt.Errorf("%w: bigquery source: dataset %s.%s does not exist", flightline.ErrNotFound, s.project, s.dataset)
			}
			return fmt.Errorf("%w: bigquery source: table %s does not exist", flightline.ErrNotFound, s.sqlName)
		}
		sess, err := s.session(ctx, "FALSE")
		if err != nil {
			return err
		}
		sc, err = sessionSchema(sess)
		return err
	})
	if err != nil {
		return nil, err
	}
	l := &layout{schema: sc}
	for _, c := range []struct {
		name  string
		at    *int
		isInt *bool
	}{{s.o.cursor, &l.cursorAt, &l.cursorInt}, {s.o.tiebreak, &l.tiebreakAt, &l.tieInt}} {
		idx := sc.FieldIndices(c.name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%w: bigquery source: table %s has no column %q", flightline.ErrInvalidInput, s.sqlName, c.name)
		}
		*c.at = idx[0]
		switch sc.Field(idx[0]).Type.ID() {
		case arrow.INT64:
			*c.isInt = true
		case arrow.STRING:
		default:
			return nil, fmt.Errorf("%w: bigquery source: column %q is %s; cursor and tiebreak must be INT64 or STRING",
				flightline.ErrInvalidInput, c.name, sc.Field(idx[0]).Type)
		}
	}
	return l, nil
}

// session creates a read session of the table in Arrow, one stream, with
// the row restriction where.
func (s *Source) session(ctx context.Context, where string) (*storagepb.ReadSession, error) {
	return s.rd.CreateReadSession(ctx, &storagepb.CreateReadSessionRequest{
		Parent: "projects/" + s.project,
		ReadSession: &storagepb.ReadSession{
			Table:       fmt.Sprintf("projects/%s/datasets/%s/tables/%s", s.project, s.dataset, s.tableID),
			DataFormat:  storagepb.DataFormat_ARROW,
			ReadOptions: &storagepb.ReadSession_TableReadOptions{RowRestriction: where},
		},
		MaxStreamCount: 1,
	})
}

// sessionSchema decodes a session's Arrow schema: a schema message
// (BigQuery), or a whole IPC stream starting with one (the emulator).
func sessionSchema(sess *storagepb.ReadSession) (*arrow.Schema, error) {
	raw := sess.GetArrowSchema().GetSerializedSchema()
	r, err := ipc.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: bigquery source: the read session's Arrow schema: %v", flightline.ErrInternal, err)
	}
	defer r.Release()
	return r.Schema(), nil
}

// Checkpoint is the source's checkpoint: the (cursor, tiebreak) of the last
// row read, as text; nil fields before the first row. Encode gives its
// JSON, {"cursor":…,"tiebreak":…}.
type Checkpoint = incsrc.Checkpoint

// ParseCheckpoint decodes a checkpoint made by Encode; nil or empty means
// from the start.
func ParseCheckpoint(b []byte) (Checkpoint, error) {
	return incsrc.ParseCheckpoint(b, "bigquery source")
}

// literal is v as a GoogleSQL literal of an INT64 (isInt) or STRING column.
func literal(v string, isInt bool) (string, error) {
	if isInt {
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return "", fmt.Errorf("%w: bigquery source: checkpoint value %q is not an INT64", flightline.ErrInvalidInput, v)
		}
		return v, nil
	}
	if !utf8.ValidString(v) {
		return "", fmt.Errorf("%w: bigquery source: checkpoint value %q is not UTF-8", flightline.ErrInvalidInput, v)
	}
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range v {
		switch {
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String(), nil
}

// after is the SQL condition of the rows after cp (every row with a
// non-NULL cursor and tiebreak when cp is the start).
func (s *Source) after(l *layout, cp Checkpoint) (string, error) {
	c, k := "`"+s.o.cursor+"`", "`"+s.o.tiebreak+"`"
	cond := c + " IS NOT NULL AND " + k + " IS NOT NULL"
	if cp.Cursor == nil {
		return cond, nil
	}
	cv, err := literal(*cp.Cursor, l.cursorInt)
	if err != nil {
		return "", err
	}
	kv, err := literal(*cp.Tiebreak, l.tieInt)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s AND (%s > %s OR (%s = %s AND %s > %s))", cond, c, cv, c, cv, k, kv), nil
}

// Read implements flightsrc.Source. ctx bounds only the table's
// description; the Reader lives until Close.
func (s *Source) Read(ctx context.Context, req flightsrc.ReadRequest) (flightsrc.Reader, error) {
	if req.Stream != s.o.table {
		return nil, fmt.Errorf("%w: bigquery source: no stream %q", flightline.ErrNotFound, req.Stream)
	}
	cp, err := ParseCheckpoint(req.After)
	if err != nil {
		return nil, err
	}
	l, err := s.describe(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.after(l, cp); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	return &reader{s: s, l: l, cp: cp, ctx: rctx, cancel: cancel}, nil
}

type reader struct {
	s      *Source
	l      *layout
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex // held by Next; Close waits for it
	cp     Checkpoint
	idle   bool
	closed bool
}

func (r *reader) Schema() *arrow.Schema { return r.l.schema }

// Next implements flightsrc.Reader: the next batch, or a 0-row heartbeat
// (after PollInterval) once caught up. The caller owns the batch.
func (r *reader) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, fmt.Errorf("%w: bigquery source: reader is closed", flightline.ErrInvalidInput)
	}
	ctx, stop := incsrc.MergeCancel(ctx, r.ctx)
	defer stop()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if r.idle {
		if err := incsrc.Sleep(ctx, r.s.o.poll); err != nil {
			return nil, nil, err
		}
	}
	rec, err := r.fetch(ctx)
	if err != nil {
		return nil, nil, err
	}
	r.idle = rec.NumRows() == 0
	return rec, r.cp.Encode(), nil
}

// fetch reads the batch after r.cp (see the package documentation) and
// advances r.cp to its last row.
func (r *reader) fetch(ctx context.Context) (arrow.RecordBatch, error) {
	s, l := r.s, r.l
	after, err := s.after(l, r.cp)
	if err != nil {
		return nil, err
	}
	c, k := "`"+s.o.cursor+"`", "`"+s.o.tiebreak+"`"
	boundSQL := fmt.Sprintf("WITH page AS (SELECT %s, %s FROM %s WHERE %s ORDER BY %s, %s LIMIT %d) "+
		"SELECT %s, %s, (SELECT COUNT(*) FROM page) FROM page ORDER BY %s DESC, %s DESC LIMIT 1",
		c, k, s.sqlName, after, c, k, s.o.batch, c, k, c, k)
	var bound []bigquery.Value
	if err := s.retry(ctx, "bound query on "+s.sqlName, func(ctx context.Context) error {
		bound = nil
		it, err := s.bq.Query(boundSQL).Read(ctx)
		if err != nil {
			return err
		}
		var row []bigquery.Value
		switch err := it.Next(&row); err {
		case nil:
			bound = row
		case iterator.Done:
		default:
			return err
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if bound == nil {
		return emptyBatch(s.o.mem, l.schema), nil
	}
	if len(bound) != 3 {
		return nil, fmt.Errorf("%w: bigquery source: the bound query returned %d columns", flightline.ErrInternal, len(bound))
	}
	count, ok := bound[2].(int64)
	if !ok {
		return nil, fmt.Errorf("%w: bigquery source: the bound query returned a count of %T", flightline.ErrInternal, bound[2])
	}
	bc, err := boundLiteral(bound[0], l.cursorInt)
	if err != nil {
		return nil, err
	}
	bk, err := boundLiteral(bound[1], l.tieInt)
	if err != nil {
		return nil, err
	}
	where := fmt.Sprintf("%s AND (%s < %s OR (%s = %s AND %s <= %s))", after, c, bc, c, bc, k, bk)
	var chunks []arrow.RecordBatch
	release := func() {
		for _, ch := range chunks {
			ch.Release()
		}
		chunks = nil
	}
	defer release()
	if err := s.retry(ctx, "reading "+s.sqlName, func(ctx context.Context) error {
		release()
		w := where
		if s.restrict != nil {
			w = s.restrict(w)
		}
		if err := s.readRows(ctx, w, l.schema, &chunks); err != nil {
			return err
		}
		var got int64
		for _, ch := range chunks {
			got += ch.NumRows()
		}
		if got < count {
			// The read session's snapshot misses rows the bound query
			// saw: emitting the batch would move the checkpoint past
			// them. Read again.
			return behind{fmt.Errorf("the read returned %d rows, the bound query counted %d", got, count)}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	rec, err := sortCut(ctx, s.o.mem, l, chunks, s.o.batch)
	if err != nil {
		return nil, err
	}
	if n := int(rec.NumRows()); n > 0 {
		cv, kv := valueText(rec.Column(l.cursorAt), n-1), valueText(rec.Column(l.tiebreakAt), n-1)
		r.cp = Checkpoint{Cursor: &cv, Tiebreak: &kv}
	}
	return rec, nil
}

// boundLiteral is a value of the bound query as a literal.
func boundLiteral(v bigquery.Value, isInt bool) (string, error) {
	switch v := v.(type) {
	case int64:
		if isInt {
			return strconv.FormatInt(v, 10), nil
		}
	case string:
		if !isInt {
			return literal(v, false)
		}
	}
	return "", fmt.Errorf("%w: bigquery source: the bound query returned %T %v (table altered?)", flightline.ErrConflict, v, v)
}

// readRows reads the rows matching where through the Storage Read API,
// appending their Arrow batches (in s.o.mem, with schema sc) to out.
func (s *Source) readRows(ctx context.Context, where string, sc *arrow.Schema, out *[]arrow.RecordBatch) error {
	sess, err := s.session(ctx, where)
	if err != nil {
		return err
	}
	schemaMsg := sess.GetArrowSchema().GetSerializedSchema()
	for _, st := range sess.GetStreams() {
		rs, err := s.rd.ReadRows(ctx, &storagepb.ReadRowsRequest{ReadStream: st.GetName()})
		if err != nil {
			return err
		}
		for {
			resp, err := rs.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			data := resp.GetArrowRecordBatch().GetSerializedRecordBatch()
			if len(data) == 0 {
				continue
			}
			if err := decode(s.o.mem, schemaMsg, data, sc, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// decode reads the record batches of one ReadRows response. BigQuery sends
// a bare record batch message, read after the session's schema message;
// the emulator sends a whole IPC stream (schema, batch, end).
func decode(mem memory.Allocator, schemaMsg, data []byte, sc *arrow.Schema, out *[]arrow.RecordBatch) error {
	var src io.Reader = bytes.NewReader(data)
	if !startsWithSchema(data) {
		src = io.MultiReader(bytes.NewReader(schemaMsg), bytes.NewReader(data))
	}
	r, err := ipc.NewReader(src, ipc.WithAllocator(mem))
	if err != nil {
		return fmt.Errorf("%w: bigquery source: Arrow rows: %v", flightline.ErrInternal, err)
	}
	defer r.Release()
	for r.Next() {
		rec := r.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		if !rec.Schema().Equal(sc) {
			if !sameTypes(rec.Schema(), sc) {
				return fmt.Errorf("%w: bigquery source: rows of schema %s, the table's is %s (table altered?)", flightline.ErrConflict, rec.Schema(), sc)
			}
			*out = append(*out, array.NewRecordBatch(sc, rec.Columns(), rec.NumRows()))
			continue
		}
		rec.Retain()
		*out = append(*out, rec)
	}
	if err := r.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: bigquery source: Arrow rows: %v", flightline.ErrUnavailable, err)
	}
	return nil
}

// startsWithSchema reports whether an IPC stream begins with a schema
// message.
func startsWithSchema(data []byte) bool {
	mr := ipc.NewMessageReader(bytes.NewReader(data))
	defer mr.Release()
	m, err := mr.Message()
	return err == nil && m.Type() == ipc.MessageSchema
}

func sameTypes(a, b *arrow.Schema) bool {
	if a.NumFields() != b.NumFields() {
		return false
	}
	for i := range a.NumFields() {
		if a.Field(i).Name != b.Field(i).Name || !arrow.TypeEqual(a.Field(i).Type, b.Field(i).Type) {
			return false
		}
	}
	return true
}

// sortCut concatenates chunks, sorts the rows by (cursor, tiebreak) and
// keeps the first n, as one batch in mem.
func sortCut(ctx context.Context, mem memory.Allocator, l *layout, chunks []arrow.RecordBatch, n int) (arrow.RecordBatch, error) {
	var rec arrow.RecordBatch
	switch len(chunks) {
	case 0:
		return emptyBatch(mem, l.schema), nil
	case 1:
		rec = chunks[0]
		rec.Retain()
	default:
		var err error
		if rec, err = concat(mem, l.schema, chunks); err != nil {
			return nil, err
		}
	}
	defer rec.Release()
	rows := int(rec.NumRows())
	idx := make([]int, rows)
	for i := range idx {
		idx[i] = i
	}
	cmpAt := comparer(rec.Column(l.cursorAt))
	cmpTie := comparer(rec.Column(l.tiebreakAt))
	slices.SortFunc(idx, func(a, b int) int {
		if c := cmpAt(a, b); c != 0 {
			return c
		}
		return cmpTie(a, b)
	})
	if len(idx) > n {
		idx = idx[:n]
	}
	sorted := len(idx) == rows
	for i := range idx {
		if idx[i] != i {
			sorted = false
			break
		}
	}
	if sorted {
		rec.Retain()
		return rec, nil
	}
	ib := array.NewInt64Builder(mem)
	defer ib.Release()
	for _, i := range idx {
		ib.Append(int64(i))
	}
	indices := ib.NewArray()
	defer indices.Release()
	cctx := compute.WithAllocator(ctx, mem)
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		c, err := compute.TakeArray(cctx, rec.Column(i), indices)
		if err != nil {
			return nil, fmt.Errorf("%w: bigquery source: sorting rows: %v", flightline.ErrInternal, err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(l.schema, cols, int64(len(idx))), nil
}

// comparer orders the rows of an INT64 or STRING column without NULLs (the
// row restriction excludes them).
func comparer(a arrow.Array) func(i, j int) int {
	switch a := a.(type) {
	case *array.Int64:
		return func(i, j int) int { return cmp.Compare(a.Value(i), a.Value(j)) }
	case *array.String:
		return func(i, j int) int { return strings.Compare(a.Value(i), a.Value(j)) }
	}
	panic(fmt.Sprintf("bigquery source: cursor column of type %s", a.DataType()))
}

// valueText is the checkpoint text of row i of a cursor or tiebreak column.
func valueText(a arrow.Array, i int) string {
	switch a := a.(type) {
	case *array.Int64:
		return strconv.FormatInt(a.Value(i), 10)
	case *array.String:
		return strings.Clone(a.Value(i))
	}
	panic(fmt.Sprintf("bigquery source: cursor column of type %s", a.DataType()))
}

func concat(mem memory.Allocator, sc *arrow.Schema, chunks []arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, sc.NumFields())
	var rows int64
	for _, c := range chunks {
		rows += c.NumRows()
	}
	for i := range cols {
		parts := make([]arrow.Array, len(chunks))
		for j, c := range chunks {
			parts[j] = c.Column(i)
		}
		a, err := array.Concatenate(parts, mem)
		if err != nil {
			for _, c := range cols[:i] {
				c.Release()
			}
			return nil, fmt.Errorf("%w: bigquery source: concatenating batches: %v", flightline.ErrInternal, err)
		}
		cols[i] = a
	}
	rec := array.NewRecordBatch(sc, cols, rows)
	for _, c := range cols {
		c.Release()
	}
	return rec, nil
}

func emptyBatch(mem memory.Allocator, sc *arrow.Schema) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	return b.NewRecordBatch()
}

// Close implements flightsrc.Reader. It interrupts a running Next.
func (r *reader) Close() error {
	r.cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}
