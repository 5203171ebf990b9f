package bigquery

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"cloud.google.com/go/bigquery/storage/managedwriter"
	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/bqerr"
)

// DefaultCheckpointTable is the table, in the sink's dataset, holding the
// checkpoint of each (pipeline, target).
const DefaultCheckpointTable = "_flightline_checkpoints"

// maxRequestBytes bounds the rows of one AppendRows request (the API's
// limit is 10 MB per request).
const maxRequestBytes = 8 << 20

// Config is what a bigquery sink is given in its URL or YAML.
type Config struct {
	// Project is the Google Cloud project. Required.
	Project string
	// Dataset is the dataset the tables live in; it must exist. Required.
	Dataset string
	// Table is the default target table ("table", or "dataset.table" for
	// another dataset of the project). Pipeline.Target overrides it.
	Table string
	// Key are the key columns (required): a batch lands through a MERGE
	// on them, so a replayed batch updates its rows to the same values
	// instead of adding copies. Rows with a NULL key column are refused.
	Key []string
	// CheckpointTable is the checkpoint table (default
	// DefaultCheckpointTable).
	CheckpointTable string
	// CredentialsFile, when set, authenticates with a service-account key
	// file instead of application default credentials (the default). The
	// file's content is never logged.
	CredentialsFile string
	// EmulatorEndpoint and EmulatorGRPC, when set (both or neither), point
	// the sink at a BigQuery emulator: the REST API at EmulatorEndpoint
	// (http://HOST:PORT) and the Storage Write API at EmulatorGRPC
	// (HOST:PORT, insecure), both without authentication.
	EmulatorEndpoint, EmulatorGRPC string
}

// Option configures a Sink beyond its Config.
type Option func(*options) error

type options struct {
	table       string
	key         []string
	cpTable     string
	endpoint    string
	grpcAddr    string
	credentials string
	logger      *slog.Logger
	retries     int
	backoff     time.Duration
	stagingTTL  time.Duration
}

// Retry sets how often a quota or server error (HTTP 429 and 5xx, gRPC
// UNAVAILABLE, RESOURCE_EXHAUSTED, ABORTED, INTERNAL) is retried, with
// exponential backoff from base, before the call fails with
// flightline.ErrUnavailable (default 6 attempts from 200ms).
func Retry(attempts int, base time.Duration) Option {
	return func(o *options) error {
		if attempts < 1 || base <= 0 {
			return fmt.Errorf("%w: bigquery: Retry(%d, %s)", flightline.ErrInvalidInput, attempts, base)
		}
		o.retries, o.backoff = attempts, base
		return nil
	}
}

// Logger sets the logger; nil means slog.Default(). Nothing logged contains
// credentials.
func Logger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			l = slog.Default()
		}
		o.logger = l
		return nil
	}
}

// Sink is an at-least-once BigQuery sink with idempotent writes: every batch
// is merged into its target on the key columns. Safe for concurrent use.
// See the package documentation for the write path.
type Sink struct {
	project, dataset string
	o                options
	bq               *bigquery.Client
	mw               *managedwriter.Client
	conn             *grpc.ClientConn

	cancel context.CancelFunc // ends the clients' life context

	mu      sync.Mutex
	cpReady bool
}

var (
	_ flightsink.Sink       = (*Sink)(nil)
	_ flightsink.Guaranteer = (*Sink)(nil)
)

// New returns a Sink writing tables of cfg.Dataset in cfg.Project. It
// connects at construction: it makes the BigQuery and Storage Write API
// clients and checks, within ctx, that the dataset exists. It validates
// cfg: Key is required, a sink without key columns is refused here, before
// any pipeline opens. Close releases the clients.
func New(ctx context.Context, cfg Config, opts ...Option) (*Sink, error) {
	project, dataset := cfg.Project, cfg.Dataset
	for _, c := range cfg.Key {
		if strings.TrimSpace(c) == "" {
			return nil, fmt.Errorf("%w: bigquery: empty key column in %q", flightline.ErrInvalidInput, cfg.Key)
		}
	}
	o := options{table: cfg.Table, key: cfg.Key, cpTable: cfg.CheckpointTable, endpoint: cfg.EmulatorEndpoint, grpcAddr: cfg.EmulatorGRPC,
		credentials: cfg.CredentialsFile, logger: slog.Default(), retries: 6, backoff: 200 * time.Millisecond, stagingTTL: 24 * time.Hour}
	if o.cpTable == "" {
		o.cpTable = DefaultCheckpointTable
	}
	for _, f := range opts {
		if err := f(&o); err != nil {
			return nil, err
		}
	}
	if len(o.key) == 0 {
		return nil, fmt.Errorf("%w: bigquery: the sink needs key columns (key=COL[,COL…]): batches are merged on them", flightline.ErrInvalidInput)
	}
	if project == "" || dataset == "" {
		return nil, fmt.Errorf("%w: bigquery: project and dataset are required", flightline.ErrInvalidInput)
	}
	s := &Sink{project: project, dataset: dataset, o: o}
	var rest, wopts []option.ClientOption
	switch {
	case o.endpoint != "" || o.grpcAddr != "":
		if o.endpoint == "" || o.grpcAddr == "" {
			return nil, fmt.Errorf("%w: bigquery: an emulator needs both its HTTP endpoint and its gRPC address", flightline.ErrInvalidInput)
		}
		conn, err := grpc.NewClient(o.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, fmt.Errorf("%w: bigquery: %v", flightline.ErrInvalidInput, err)
		}
		s.conn = conn
		rest = []option.ClientOption{option.WithEndpoint(o.endpoint), option.WithoutAuthentication()}
		wopts = []option.ClientOption{option.WithGRPCConn(conn), option.WithoutAuthentication()}
	case o.credentials != "":
		//lint:ignore SA1019 a service-account key file is the documented way in
		rest = []option.ClientOption{option.WithCredentialsFile(o.credentials)} //nolint:staticcheck
		wopts = rest
	}
	// The clients keep the context they are made with for their life
	// (managedwriter's streams run on it); ctx bounds New only.
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	var err error
	if s.bq, err = bigquery.NewClient(life, project, rest...); err != nil {
		s.Close()
		return nil, classify(err, "connecting")
	}
	if s.mw, err = managedwriter.NewClient(life, project, wopts...); err != nil {
		s.Close()
		return nil, classify(err, "connecting to the Storage Write API")
	}
	if err := s.retry(ctx, "reading dataset "+dataset, func() error {
		_, err := s.bq.Dataset(dataset).Metadata(ctx)
		return err
	}); err != nil {
		s.Close()
		if errors.Is(err, flightline.ErrNotFound) {
			return nil, fmt.Errorf("%w: bigquery: dataset %s.%s does not exist (create it first)", flightline.ErrNotFound, project, dataset)
		}
		return nil, err
	}
	return s, nil
}

// Close releases the clients New made (and the emulator's gRPC
// connection) and returns their errors joined.
func (s *Sink) Close() error {
	var errs []error
	if s.mw != nil {
		errs = append(errs, s.mw.Close())
	}
	if s.bq != nil {
		errs = append(errs, s.bq.Close())
	}
	if s.conn != nil {
		errs = append(errs, s.conn.Close())
	}
	if s.cancel != nil {
		s.cancel()
	}
	return errors.Join(errs...)
}

// Guarantee implements flightsink.Guaranteer: at-least-once with
// idempotent writes (see the package doc).
func (s *Sink) Guarantee() flightsink.Guarantee { return flightsink.AtLeastOnce }

// Checkpoint implements flightsink.Sink. The sink is at-least-once, so it
// returns nil: the source's own position decides where a pipeline resumes
// (Committed reads what the sink has merged).
func (s *Sink) Checkpoint(context.Context, flightsink.Pipeline) ([]byte, error) { return nil, nil }

// Committed returns the checkpoint of the last batch merged into p's
// target, nil when none: the checkpoint row updated in the same
// transaction as the MERGE, so it never runs ahead of the data.
func (s *Sink) Committed(ctx context.Context, p flightsink.Pipeline) ([]byte, error) {
	if err := s.ensureCheckpointTable(ctx); err != nil {
		return nil, err
	}
	target, err := s.target(p)
	if err != nil {
		return nil, err
	}
	return s.readCheckpoint(ctx, p.ID, target)
}

// target resolves p's table: "table" or "dataset.table".
func (s *Sink) target(p flightsink.Pipeline) (tableRef, error) {
	name := p.Target
	if name == "" {
		name = s.o.table
	}
	if name == "" {
		return tableRef{}, fmt.Errorf("%w: bigquery: no target table (set table= or the pipeline's target)", flightline.ErrInvalidInput)
	}
	ds, tb := s.dataset, name
	if i := strings.IndexByte(name, '.'); i >= 0 {
		ds, tb = name[:i], name[i+1:]
	}
	if !validIdent(ds) || !validIdent(tb) {
		return tableRef{}, fmt.Errorf("%w: bigquery: bad table name %q", flightline.ErrInvalidInput, name)
	}
	return tableRef{project: s.project, dataset: ds, table: tb}, nil
}

type tableRef struct{ project, dataset, table string }

func (t tableRef) String() string { return t.dataset + "." + t.table }
func (t tableRef) sql() string    { return "`" + t.project + "." + t.dataset + "." + t.table + "`" }

func validIdent(s string) bool {
	if s == "" || len(s) > 1024 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// quote is a GoogleSQL string literal of v.
func quote(v string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range v {
		switch r {
		case '\\', '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

func (s *Sink) cpRef() tableRef {
	return tableRef{project: s.project, dataset: s.dataset, table: s.o.cpTable}
}

func (s *Sink) ensureCheckpointTable(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cpReady {
		return nil
	}
	ref := s.cpRef()
	schema := bigquery.Schema{
		{Name: "pipeline", Type: bigquery.StringFieldType, Required: true},
		{Name: "target", Type: bigquery.StringFieldType, Required: true},
		{Name: "checkpoint", Type: bigquery.StringFieldType, Required: true},
		{Name: "updated", Type: bigquery.TimestampFieldType},
	}
	if err := s.createIfAbsent(ctx, ref, &bigquery.TableMetadata{Schema: schema}); err != nil {
		return err
	}
	s.cpReady = true
	return nil
}

// createIfAbsent creates ref unless it exists.
func (s *Sink) createIfAbsent(ctx context.Context, ref tableRef, md *bigquery.TableMetadata) error {
	t := s.bq.DatasetInProject(ref.project, ref.dataset).Table(ref.table)
	return s.retry(ctx, "creating table "+ref.String(), func() error {
		if _, err := t.Metadata(ctx); err == nil {
			return nil
		} else if !bqerr.IsNotFound(err) {
			return err
		}
		err := t.Create(ctx, md)
		if bqerr.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

func (s *Sink) readCheckpoint(ctx context.Context, pipeline string, target tableRef) ([]byte, error) {
	q := s.bq.Query(fmt.Sprintf("SELECT checkpoint FROM %s WHERE pipeline = %s AND target = %s",
		s.cpRef().sql(), quote(pipeline), quote(target.String())))
	var out []byte
	err := s.retry(ctx, "reading the checkpoint", func() error {
		out = nil
		it, err := q.Read(ctx)
		if err != nil {
			return err
		}
		for {
			var row []bigquery.Value
			err := it.Next(&row)
			if err == iterator.Done {
				return nil
			}
			if err != nil {
				return err
			}
			str, _ := row[0].(string)
			b, err := base64.StdEncoding.DecodeString(str)
			if err != nil {
				return fmt.Errorf("%w: bigquery: checkpoint of %s in %s is not base64: %v", flightline.ErrInternal, pipeline, s.cpRef(), err)
			}
			out = b
		}
	})
	return out, err
}

// Open implements flightsink.Sink. It creates the checkpoint table if
// need be, checks the key columns against the target when it exists, and
// reads the checkpoint merged last (for skipping replays). It returns a nil
// checkpoint: the sink is at-least-once.
func (s *Sink) Open(ctx context.Context, p flightsink.Pipeline) (flightsink.Writer, []byte, error) {
	target, err := s.target(p)
	if err != nil {
		return nil, nil, err
	}
	if err := s.ensureCheckpointTable(ctx); err != nil {
		return nil, nil, err
	}
	w := &writer{s: s, p: p, target: target}
	md, err := s.tableMetadata(ctx, target)
	if err != nil {
		return nil, nil, err
	}
	if md != nil {
		if err := s.checkKey(target, md.Schema); err != nil {
			return nil, nil, err
		}
		w.exists = true
		w.tableSchema = md.Schema
	}
	if w.last, err = s.readCheckpoint(ctx, p.ID, target); err != nil {
		return nil, nil, err
	}
	return w, nil, nil
}

// tableMetadata returns ref's metadata, nil when the table does not exist.
func (s *Sink) tableMetadata(ctx context.Context, ref tableRef) (*bigquery.TableMetadata, error) {
	var md *bigquery.TableMetadata
	err := s.retry(ctx, "reading table "+ref.String(), func() error {
		m, err := s.bq.DatasetInProject(ref.project, ref.dataset).Table(ref.table).Metadata(ctx)
		if bqerr.IsNotFound(err) {
			md = nil
			return nil
		}
		md = m
		return err
	})
	return md, err
}

func (s *Sink) checkKey(target tableRef, schema bigquery.Schema) error {
	for _, k := range s.o.key {
		found := false
		for _, f := range schema {
			if f.Name == k {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%w: bigquery: key column %q is not a column of %s", flightline.ErrSchemaMismatch, k, target)
		}
	}
	return nil
}

// writer is one pipeline's Writer.
type writer struct {
	s      *Sink
	p      flightsink.Pipeline
	target tableRef

	exists      bool
	tableSchema bigquery.Schema
	lay         *layout
	keyIdx      []int
	enc         encoder
	dedup       dedup
	last        []byte // the checkpoint merged last, nil when none

	// Timings of the last batch, for the throughput figures.
	lastStage, lastMerge time.Duration
}

// WriteBatch stages rec through the Storage Write API and merges it into
// the target on the key, updating the checkpoint row in the same
// transaction. A batch whose checkpoint is covered by the one merged last
// is a replay and writes nothing. A zero-row batch updates the checkpoint
// alone.
func (w *writer) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := flightsink.CheckBatch(rec, cp); err != nil {
		return err
	}
	if checkpoint.Replayed(w.last, cp) {
		return nil
	}
	if err := w.prepare(ctx, rec.Schema()); err != nil {
		return err
	}
	if err := w.checkKeys(rec); err != nil {
		return err
	}
	next := checkpoint.Next(w.last, cp)
	var stage tableRef
	t0 := time.Now()
	if rec.NumRows() > 0 {
		stage = w.stagingRef(cp)
		if err := w.stageBatch(ctx, stage, rec); err != nil {
			return err
		}
	}
	t1 := time.Now()
	if err := w.s.retry(ctx, "merging into "+w.target.String(), func() error {
		return w.s.runScript(ctx, w.mergeScript(stage, rec.NumRows() > 0, next))
	}); err != nil {
		return err
	}
	w.lastStage, w.lastMerge = t1.Sub(t0), time.Since(t1)
	w.last = next
	if rec.NumRows() > 0 {
		// The merge committed; a staging table left by a failed drop
		// expires on its own.
		if err := w.s.dropTable(ctx, stage); err != nil {
			w.s.o.logger.Warn("bigquery: dropping a staging table", "table", stage.String(), "err", err)
		}
	}
	return nil
}

// Close implements flightsink.Writer; it commits nothing.
func (w *writer) Close(context.Context) error { return nil }

// prepare maps the batch's schema (once per schema), creates the target
// from it when absent, and checks it against an existing target.
func (w *writer) prepare(ctx context.Context, sc *arrow.Schema) error {
	if w.lay != nil && w.lay.schema.Equal(sc) {
		return nil
	}
	lay, err := newLayout(sc)
	if err != nil {
		return fmt.Errorf("bigquery: %s: %w", w.target, err)
	}
	var keyIdx []int
	for _, k := range w.s.o.key {
		idx := sc.FieldIndices(k)
		if len(idx) != 1 {
			return fmt.Errorf("%w: bigquery: the batch has no key column %q", flightline.ErrSchemaMismatch, k)
		}
		keyIdx = append(keyIdx, idx[0])
	}
	if !w.exists {
		md := &bigquery.TableMetadata{Schema: lay.tableSchema(false)}
		if err := w.s.createIfAbsent(ctx, w.target, md); err != nil {
			return err
		}
		m, err := w.s.tableMetadata(ctx, w.target)
		if err != nil {
			return err
		}
		if m == nil {
			return fmt.Errorf("%w: bigquery: table %s vanished after its creation", flightline.ErrUnavailable, w.target)
		}
		w.exists, w.tableSchema = true, m.Schema
	}
	if err := lay.checkTable(w.target.String(), w.tableSchema); err != nil {
		return err
	}
	w.lay, w.keyIdx = lay, keyIdx
	return nil
}

// checkKeys refuses a batch with a NULL key: it would never match in the
// MERGE, so every replay would insert it again.
func (w *writer) checkKeys(rec arrow.RecordBatch) error {
	for _, i := range w.keyIdx {
		if rec.Column(i).NullN() > 0 {
			return fmt.Errorf("%w: bigquery: key column %q holds NULLs", flightline.ErrInvalidInput, rec.Schema().Field(i).Name)
		}
	}
	return nil
}

// stagingRef is the batch's staging table: a name fixed by (pipeline,
// target, checkpoint), so a replay of the batch writes the same table.
func (w *writer) stagingRef(cp []byte) tableRef {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(w.p.ID), []byte(w.target.String()), cp} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	return tableRef{project: w.s.project, dataset: w.target.dataset,
		table: "_fl_stage_" + hex.EncodeToString(h.Sum(nil)[:16])}
}

// stageBatch writes rec into a fresh staging table: create it (after
// dropping what an earlier try left), a pending write stream, the rows in
// requests of at most maxRequestBytes, finalize, batch commit.
func (w *writer) stageBatch(ctx context.Context, stage tableRef, rec arrow.RecordBatch) error {
	s := w.s
	if err := s.dropTable(ctx, stage); err != nil {
		return err
	}
	md := &bigquery.TableMetadata{Schema: w.lay.tableSchema(true), ExpirationTime: time.Now().Add(s.o.stagingTTL)}
	if err := s.retry(ctx, "creating staging table "+stage.String(), func() error {
		err := s.bq.DatasetInProject(stage.project, stage.dataset).Table(stage.table).Create(ctx, md)
		if bqerr.IsAlreadyExists(err) {
			return nil
		}
		return err
	}); err != nil {
		return err
	}
	rows, err := w.enc.encode(w.lay, rec, w.dedup.lastPerKey(w.lay, rec, w.keyIdx))
	if err != nil {
		return err
	}
	return s.retry(ctx, "writing staging table "+stage.String(), func() error {
		return s.appendPending(ctx, stage, w.lay, rows)
	})
}

// appendPending runs one pending stream: append every row, finalize, commit.
// A failure before the commit leaves nothing visible; the retry uses a new
// stream.
func (s *Sink) appendPending(ctx context.Context, stage tableRef, lay *layout, rows [][]byte) error {
	parent := managedwriter.TableParentFromParts(stage.project, stage.dataset, stage.table)
	ms, err := s.mw.NewManagedStream(ctx, managedwriter.WithDestinationTable(parent),
		managedwriter.WithType(managedwriter.PendingStream), managedwriter.WithSchemaDescriptor(lay.desc))
	if err != nil {
		return err
	}
	defer ms.Close()
	var results []*managedwriter.AppendResult
	var offset int64
	for start := 0; start < len(rows); {
		end, size := start, 0
		for end < len(rows) && (end == start || size+len(rows[end]) <= maxRequestBytes) {
			size += len(rows[end])
			end++
		}
		r, err := ms.AppendRows(ctx, rows[start:end], managedwriter.WithOffset(offset))
		if err != nil {
			return err
		}
		results = append(results, r)
		offset += int64(end - start)
		start = end
	}
	for _, r := range results {
		if _, err := r.GetResult(ctx); err != nil {
			return err
		}
	}
	if _, err := ms.Finalize(ctx); err != nil {
		return err
	}
	resp, err := s.mw.BatchCommitWriteStreams(ctx, &storagepb.BatchCommitWriteStreamsRequest{
		Parent: parent, WriteStreams: []string{ms.StreamName()},
	})
	if err != nil {
		return err
	}
	if se := resp.GetStreamErrors(); len(se) > 0 {
		// Nothing of the stream is committed: the retry writes it again
		// on a new stream.
		return transient{fmt.Errorf("bigquery: committing the staging stream: %s: %s", se[0].GetCode(), se[0].GetErrorMessage())}
	}
	return nil
}

// mergeScript is the batch's transaction: the MERGE of the staging table
// (which holds one row per key: the last one by position, see
// dedup.lastPerKey) into the target, and the checkpoint row's replacement.
func (w *writer) mergeScript(stage tableRef, hasRows bool, next []byte) string {
	var b strings.Builder
	b.WriteString("BEGIN TRANSACTION;\n")
	if hasRows {
		cols := make([]string, len(w.lay.cols))
		for i, c := range w.lay.cols {
			cols[i] = "`" + c.name + "`"
		}
		on := make([]string, len(w.s.o.key))
		for i, k := range w.s.o.key {
			on[i] = "T.`" + k + "` = S.`" + k + "`"
		}
		var set []string
		for _, c := range cols {
			set = append(set, c+" = S."+c)
		}
		fmt.Fprintf(&b, "MERGE %s T\nUSING %s S\nON %s\n", w.target.sql(), stage.sql(), strings.Join(on, " AND "))
		fmt.Fprintf(&b, "WHEN MATCHED THEN UPDATE SET %s\nWHEN NOT MATCHED THEN INSERT (%s) VALUES (S.%s);\n",
			strings.Join(set, ", "), strings.Join(cols, ", "), strings.Join(cols, ", S."))
	}
	// The checkpoint row: DELETE and INSERT rather than a MERGE, whose
	// source the emulator wants to be a table.
	fmt.Fprintf(&b, "DELETE FROM %s WHERE pipeline = %s AND target = %s;\n", w.s.cpRef().sql(), quote(w.p.ID), quote(w.target.String()))
	fmt.Fprintf(&b, "INSERT INTO %s (pipeline, target, checkpoint, updated) VALUES (%s, %s, %s, CURRENT_TIMESTAMP());\n",
		w.s.cpRef().sql(), quote(w.p.ID), quote(w.target.String()), quote(base64.StdEncoding.EncodeToString(next)))
	b.WriteString("COMMIT TRANSACTION;\n")
	return b.String()
}

// runScript runs a multi-statement query to completion.
func (s *Sink) runScript(ctx context.Context, sql string) error {
	job, err := s.bq.Query(sql).Run(ctx)
	if err != nil {
		return err
	}
	st, err := job.Wait(ctx)
	if err != nil {
		return err
	}
	return st.Err()
}

func (s *Sink) dropTable(ctx context.Context, ref tableRef) error {
	return s.retry(ctx, "dropping "+ref.String(), func() error {
		err := s.bq.DatasetInProject(ref.project, ref.dataset).Table(ref.table).Delete(ctx)
		if bqerr.IsNotFound(err) {
			return nil
		}
		return err
	})
}
