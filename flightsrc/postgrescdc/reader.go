package postgrescdc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/pgarrow"
)

// queueLen bounds the decoded messages waiting between the replication
// connection and Next (with the batch being built, the reader's memory).
const queueLen = 1024

// Read implements flightsrc.Source. With no checkpoint it (re-)creates the
// slot and reads the snapshot it exports; after one it checks that the slot
// still holds what follows it. The Reader owns two connections (a query
// one for the snapshot, a replication one) until Close.
func (s *Source) Read(ctx context.Context, req flightsrc.ReadRequest) (flightsrc.Reader, error) {
	if req.Stream != s.o.table {
		return nil, fmt.Errorf("%w: stream %q (this source reads %q)", flightline.ErrNotFound, req.Stream, s.o.table)
	}
	var st state
	if len(req.After) > 0 {
		var err error
		if st, err = parseState(req.After); err != nil {
			return nil, err
		}
	}
	r := &reader{s: s, st: st}
	if err := r.open(ctx, len(req.After) == 0); err != nil {
		r.closeConns()
		return nil, err
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	s.mu.Lock()
	s.active = r
	s.mu.Unlock()
	return r, nil
}

type reader struct {
	s      *Source
	l      *layout
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex // held by Next; Close waits for it
	closed bool
	query  *pgx.Conn            // the snapshot's transaction; nil once streaming
	repl   *pgconn.PgConn       // replication connection
	st     state                // the checkpoint of what was returned
	keyCmp map[*Filter][]keyVal // the filters' From, parsed
	// pageRows is the rows of the last snapshot page when it was full
	// (the next page's builders reserve as much), else 0; pageData the
	// bytes of its variable-width columns, by column.
	pageRows int
	pageData []int

	// Streaming.
	started   bool
	items     chan item
	pumpDone  chan struct{}
	pumpErr   error
	durable   atomic.Uint64 // the highest LSN Commit reported
	confirmed pglogrepl.LSN // the slot's confirmed flush at Read
	rel       map[uint32]*relation
	inTx      bool
	skipTx    bool
	cur       txInfo
}

type txInfo struct {
	xid    uint32
	commit pglogrepl.LSN
	time   time.Time
	n      int64 // changes of the table seen in the transaction
	skip   int64 // the first skip of them were read before
}

type item struct {
	msg    pglogrepl.Message
	walEnd pglogrepl.LSN // keepalive: the server sent everything before it
}

// relation maps a relation message's columns to the layout's.
type relation struct {
	ours bool
	idx  []int // column of the message → column of the layout
}

func (r *reader) open(ctx context.Context, fresh bool) error {
	s := r.s
	var err error
	if r.query, err = s.connect(ctx); err != nil {
		return err
	}
	if err := s.check(ctx, r.query); err != nil {
		return err
	}
	if r.l, err = s.describe(ctx, r.query); err != nil {
		return err
	}
	var active bool
	var confirmed *string
	err = r.query.QueryRow(ctx, `SELECT active, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, s.o.slot).Scan(&active, &confirmed)
	exists := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return s.wrap(err, "postgres-cdc source %s: slot %s", s.server, s.o.slot)
	}
	if r.repl, err = s.connectReplication(ctx); err != nil {
		return err
	}
	if exists && confirmed != nil {
		if r.confirmed, err = pglogrepl.ParseLSN(*confirmed); err != nil {
			return fmt.Errorf("%w: slot %s confirmed_flush_lsn %q: %v", flightline.ErrInternal, s.o.slot, *confirmed, err)
		}
	}
	switch {
	case fresh && exists:
		// A new snapshot over the existing slot: read in a snapshot of
		// now, streamed from the slot's confirmed position, with a filter
		// (see Checkpoint). The slot keeps serving older checkpoints.
		r.st = state{lsn: r.confirmed - 1, snap: &SnapPos{}}
		if err := r.resumeSnapshot(ctx); err != nil {
			return err
		}
		s.o.log.Info("postgres-cdc source: reading a new snapshot over the existing slot", "slot", s.o.slot, "lsn", r.confirmed, "table", s.id.Sanitize())
	case fresh:
		res, err := pglogrepl.CreateReplicationSlot(ctx, r.repl, s.o.slot, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{SnapshotAction: "EXPORT_SNAPSHOT"})
		if err != nil {
			return s.wrap(err, "postgres-cdc source %s: create slot %s", s.server, s.o.slot)
		}
		cp, err := pglogrepl.ParseLSN(res.ConsistentPoint)
		if err != nil {
			return fmt.Errorf("%w: slot %s consistent point %q: %v", flightline.ErrInternal, s.o.slot, res.ConsistentPoint, err)
		}
		if _, err := r.query.Exec(ctx, `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`); err != nil {
			return s.wrap(err, "postgres-cdc source %s: begin snapshot", s.server)
		}
		if _, err := r.query.Exec(ctx, `SET TRANSACTION SNAPSHOT '`+res.SnapshotName+`'`); err != nil {
			return s.wrap(err, "postgres-cdc source %s: import snapshot %s", s.server, res.SnapshotName)
		}
		// Every transaction committed before the consistent point is in
		// the snapshot; one committing at it is not.
		r.st = state{lsn: cp - 1, snap: &SnapPos{}}
		r.confirmed = cp
		s.o.log.Info("postgres-cdc source: slot created, reading the snapshot", "slot", s.o.slot, "lsn", cp, "table", s.id.Sanitize())
	default:
		if !exists {
			return fmt.Errorf("%w: postgres-cdc source %s: replication slot %s does not exist (dropped?): the changes after the checkpoint are no longer kept; reset the pipeline's checkpoint to take a new snapshot",
				flightline.ErrFailedPrecondition, s.server, s.o.slot)
		}
		if r.confirmed > r.st.lsn+1 {
			return fmt.Errorf("%w: postgres-cdc source %s: slot %s is confirmed up to %s, past the checkpoint's %s: the changes in between are gone; reset the pipeline's checkpoint to take a new snapshot",
				flightline.ErrFailedPrecondition, s.server, s.o.slot, r.confirmed, r.st.lsn)
		}
		if r.st.snap != nil {
			if err := r.resumeSnapshot(ctx); err != nil {
				return err
			}
		} else {
			r.query.Close(ctx)
			r.query = nil
		}
	}
	r.keyCmp = map[*Filter][]keyVal{}
	for _, f := range r.st.filters {
		k, err := r.parseKey(f.From)
		if err != nil {
			return err
		}
		r.keyCmp[f] = k
	}
	return nil
}

// resumeSnapshot reads the rest of the table in a new snapshot and records
// it as a filter (see Checkpoint).
func (r *reader) resumeSnapshot(ctx context.Context) error {
	s := r.s
	if _, err := r.query.Exec(ctx, `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`); err != nil {
		return s.wrap(err, "postgres-cdc source %s: begin snapshot", s.server)
	}
	var snap, until string
	if err := r.query.QueryRow(ctx, `SELECT pg_current_snapshot()::text, pg_current_wal_insert_lsn()::text`).Scan(&snap, &until); err != nil {
		return s.wrap(err, "postgres-cdc source %s: snapshot", s.server)
	}
	f, err := parseSnapshot(snap)
	if err != nil {
		return fmt.Errorf("%w: %v", flightline.ErrInternal, err)
	}
	u, err := pglogrepl.ParseLSN(until)
	if err != nil {
		return fmt.Errorf("%w: %v", flightline.ErrInternal, err)
	}
	f.From, f.Until = r.st.snap.After, until
	r.st.filters = append(r.st.filters, f)
	r.st.until = append(r.st.until, u)
	return nil
}

// retryActive runs f until the slot is not busy with another (closing)
// reader's connection, for up to 10 seconds.
func (r *reader) retryActive(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if sqlState(err) != "55006" || time.Now().After(deadline) {
			if sqlState(err) == "55006" {
				return fmt.Errorf("%w: slot %s is in use by another reader: %v", flightline.ErrUnavailable, r.s.o.slot, err)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *reader) Schema() *arrow.Schema { return r.l.schema }

func (r *reader) confirm(lsn pglogrepl.LSN) {
	for {
		old := r.durable.Load()
		if uint64(lsn) <= old || r.durable.CompareAndSwap(old, uint64(lsn)) {
			return
		}
	}
}

// Next implements flightsrc.Reader.
func (r *reader) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, nil, fmt.Errorf("%w: reader is closed", flightline.ErrInvalidInput)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	ctx, stop := mergeCancel(ctx, r.ctx)
	defer stop()
	if r.st.snap != nil {
		return r.snapshotPage(ctx)
	}
	if !r.started {
		if err := r.start(ctx); err != nil {
			return nil, nil, err
		}
	}
	return r.stream(ctx)
}

func mergeCancel(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}

// snapshotPage reads the next page of the snapshot: up to BatchRows rows
// after the checkpoint's key, in key order, with COPY (SELECT …) TO STDOUT
// (FORMAT binary) decoded straight into the batch's builders (the same
// rows, in the same transaction, as a SELECT would return, without the
// extended protocol's per-row messages and copies). The checkpoint names
// the page's last key, read back from the batch.
func (r *reader) snapshotPage(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	l := r.l
	sql, err := l.pageSQL(r.st.snap.After)
	if err != nil {
		return nil, nil, err
	}
	b := array.NewRecordBuilder(r.s.o.mem, l.schema)
	defer b.Release()
	if r.pageRows > 0 { // the last page was full: so is this one, most likely
		b.Reserve(r.pageRows)
		for i, n := range r.pageData {
			if n > 0 { // a string or binary column
				b.Field(i).(interface{ ReserveData(int) }).ReserveData(n)
			}
		}
	}
	dec := pgarrow.NewCopyDecoder(b, l.decoders)
	_, err = r.query.PgConn().CopyTo(ctx, dec, sql)
	if err == nil {
		err = dec.Finish()
	}
	if err != nil {
		var ce *pgarrow.ColumnError
		if errors.As(err, &ce) {
			return nil, nil, fmt.Errorf("%w: %s column %q: %v", flightline.ErrInvalidInput, r.s.id.Sanitize(), l.cols[ce.Column].name, ce.Err)
		}
		if errors.Is(err, pgarrow.ErrCopyStream) {
			return nil, nil, fmt.Errorf("%w: postgres-cdc source %s: snapshot of %s: %v", flightline.ErrInternal, r.s.server, r.s.id.Sanitize(), err)
		}
		return nil, nil, r.s.wrap(err, "postgres-cdc source %s: snapshot of %s", r.s.server, r.s.id.Sanitize())
	}
	n := dec.Rows()
	r.appendSnapshotMeta(b, n, int64(r.st.lsn+1))
	rec := b.NewRecordBatch()
	if n > 0 {
		r.st.snap = &SnapPos{After: l.lastKey(rec)}
	}
	r.pageRows, r.pageData = 0, r.pageData[:0]
	if n == r.s.o.batch {
		r.pageRows = n
		for i := range l.decoders {
			var off []int32
			switch c := rec.Column(i).(type) {
			case *array.String:
				off = c.ValueOffsets()
			case *array.Binary:
				off = c.ValueOffsets()
			}
			size := 0
			if len(off) > 0 {
				size = int(off[len(off)-1] - off[0])
			}
			r.pageData = append(r.pageData, size)
		}
	}
	if n < r.s.o.batch { // the snapshot is done: stream from the slot's consistent point
		if _, err := r.query.Exec(ctx, `COMMIT`); err != nil {
			rec.Release()
			return nil, nil, r.s.wrap(err, "postgres-cdc source %s: end snapshot", r.s.server)
		}
		r.query.Close(ctx)
		r.query = nil
		r.st.snap = nil
		r.s.o.log.Info("postgres-cdc source: snapshot read, streaming", "slot", r.s.o.slot, "table", r.s.id.Sanitize())
	}
	return rec, r.st.encode(), nil
}

// appendSnapshotMeta appends the change columns of n snapshot rows: inserts
// at lsn, with no commit time.
func (r *reader) appendSnapshotMeta(b *array.RecordBuilder, n int, lsn int64) {
	c := len(r.l.cols)
	ops := b.Field(c).(*array.StringBuilder)
	ops.Reserve(n)
	ops.ReserveData(n * len(OpInsert))
	for range n {
		ops.Append(OpInsert)
	}
	lsns := b.Field(c + 1).(*array.Int64Builder)
	lsns.Reserve(n)
	for range n {
		lsns.UnsafeAppend(lsn)
	}
	b.Field(c + 2).AppendNulls(n)
}

func (r *reader) appendMeta(b *array.RecordBuilder, op string, lsn int64, t time.Time) {
	n := len(r.l.cols)
	b.Field(n).(*array.StringBuilder).Append(op)
	b.Field(n + 1).(*array.Int64Builder).Append(lsn)
	if t.IsZero() {
		b.Field(n + 2).AppendNull()
	} else {
		b.Field(n + 2).(*array.TimestampBuilder).Append(arrow.Timestamp(t.UnixMicro()))
	}
}

// start starts replication after the checkpoint and the goroutine that
// receives it.
func (r *reader) start(ctx context.Context) error {
	s := r.s
	args := []string{"proto_version '1'", "publication_names '" + s.o.publication + "'", "binary 'true'"}
	err := r.retryActive(ctx, func() error {
		return pglogrepl.StartReplication(ctx, r.repl, s.o.slot, r.st.lsn, pglogrepl.StartReplicationOptions{PluginArgs: args})
	})
	if err != nil {
		return s.wrap(err, "postgres-cdc source %s: start replication from slot %s at %s", s.server, s.o.slot, r.st.lsn)
	}
	r.started = true
	r.rel = map[uint32]*relation{}
	r.items = make(chan item, queueLen)
	r.pumpDone = make(chan struct{})
	go r.pump(r.ctx)
	return nil
}

// pump receives the replication stream into r.items and sends standby
// status updates, also while r.items is full. It ends with r.pumpErr set
// and r.items closed.
func (r *reader) pump(ctx context.Context) {
	defer close(r.pumpDone)
	defer close(r.items)
	next := time.Now().Add(r.s.o.status)
	var walEnd pglogrepl.LSN // the server's, as last reported
	status := func() error {
		flush := lsnMax(r.confirmed, pglogrepl.LSN(r.durable.Load()))
		next = time.Now().Add(r.s.o.status)
		if r.s.lag != nil && walEnd > 0 {
			lag := 0.0
			if walEnd > flush {
				lag = float64(walEnd - flush)
			}
			r.s.lag.WithLabelValues(r.s.o.table, r.s.o.slot).Set(lag)
		}
		return pglogrepl.SendStandbyStatusUpdate(ctx, r.repl, pglogrepl.StandbyStatusUpdate{
			WALWritePosition: flush, WALFlushPosition: flush, WALApplyPosition: flush})
	}
	put := func(it item) error {
		for {
			t := time.NewTimer(time.Until(next))
			select {
			case r.items <- it:
				t.Stop()
				return nil
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
				if err := status(); err != nil {
					return err
				}
			}
		}
	}
	fail := func(err error) {
		r.pumpErr = r.s.wrap(err, "postgres-cdc source %s: replication from slot %s", r.s.server, r.s.o.slot)
	}
	for {
		if !time.Now().Before(next) {
			if err := status(); err != nil {
				fail(err)
				return
			}
		}
		rctx, cancel := context.WithDeadline(ctx, next)
		raw, err := r.repl.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				r.pumpErr = ctx.Err()
				return
			}
			if pgconn.Timeout(err) {
				continue
			}
			fail(err)
			return
		}
		switch m := raw.(type) {
		case *pgproto3.ErrorResponse:
			fail(pgconn.ErrorResponseToPgError(m))
			return
		case *pgproto3.CopyData:
			if len(m.Data) == 0 {
				continue
			}
			switch m.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
				if err != nil {
					fail(err)
					return
				}
				walEnd = lsnMax(walEnd, ka.ServerWALEnd)
				if ka.ReplyRequested {
					next = time.Now()
				}
				select { // a keepalive may be dropped when the queue is full
				case r.items <- item{walEnd: ka.ServerWALEnd}:
				default:
				}
			case pglogrepl.XLogDataByteID:
				x, err := pglogrepl.ParseXLogData(m.Data[1:])
				if err != nil {
					fail(err)
					return
				}
				walEnd = lsnMax(walEnd, x.ServerWALEnd)
				msg, err := pglogrepl.Parse(bytes.Clone(x.WALData)) // the receive buffer is reused
				if err != nil {
					fail(err)
					return
				}
				if err := put(item{msg: msg}); err != nil {
					if ctx.Err() != nil {
						r.pumpErr = ctx.Err()
					} else {
						fail(err)
					}
					return
				}
			}
		}
	}
}

// cp is the checkpoint of everything handed out so far.
func (r *reader) cp() []byte {
	if r.inTx && !r.skipTx && r.cur.n > 0 {
		st := r.st
		st.tx, st.skip = r.cur.commit, r.cur.n
		return st.encode()
	}
	return r.st.encode()
}

// stream builds the next batch from the replication stream. A batch ends
// when it is full, or at the first transaction boundary once
// min(PollInterval, 50ms) passed since its first row (so a steady trickle
// of changes still goes out promptly); with no row for PollInterval, a
// heartbeat.
func (r *reader) stream(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	b := array.NewRecordBuilder(r.s.o.mem, r.l.schema)
	defer b.Release()
	rows := 0
	linger := min(r.s.o.poll, 50*time.Millisecond)
	t := time.NewTimer(r.s.o.poll)
	defer t.Stop()
	for {
		if rows >= r.s.o.batch {
			return b.NewRecordBatch(), r.cp(), nil
		}
		select {
		case it, ok := <-r.items:
			if !ok {
				err := r.pumpErr
				if err == nil {
					err = fmt.Errorf("%w: replication stream ended", flightline.ErrUnavailable)
				}
				if ctx.Err() != nil {
					return nil, nil, ctx.Err()
				}
				return nil, nil, err
			}
			added, err := r.handle(b, it)
			if err != nil {
				return nil, nil, err
			}
			if rows == 0 && added > 0 {
				t.Reset(linger) // from the batch's first row
			}
			rows += added
		case <-t.C:
			if rows > 0 && r.inTx {
				t.Reset(time.Millisecond) // never end a batch inside a transaction unless it is full
				continue
			}
			return b.NewRecordBatch(), r.cp(), nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// handle applies one message; it returns the rows it appended.
func (r *reader) handle(b *array.RecordBuilder, it item) (int, error) {
	if it.msg == nil { // keepalive
		if !r.inTx && it.walEnd > r.st.lsn+1 {
			r.st.lsn = it.walEnd - 1
			r.st.prune()
		}
		return 0, nil
	}
	switch m := it.msg.(type) {
	case *pglogrepl.RelationMessage:
		return 0, r.relation(m)
	case *pglogrepl.BeginMessage:
		r.inTx = true
		r.skipTx = m.FinalLSN <= r.st.lsn
		r.cur = txInfo{xid: m.Xid, commit: m.FinalLSN, time: m.CommitTime}
		if r.st.tx == m.FinalLSN {
			r.cur.skip = r.st.skip
		}
		return 0, nil
	case *pglogrepl.CommitMessage:
		if r.inTx && !r.skipTx {
			r.st.lsn, r.st.tx, r.st.skip = m.CommitLSN, 0, 0
			r.st.prune()
		}
		r.inTx, r.skipTx = false, false
		return 0, nil
	case *pglogrepl.InsertMessage:
		return r.change(b, m.RelationID, OpInsert, nil, m.Tuple)
	case *pglogrepl.UpdateMessage:
		return r.change(b, m.RelationID, OpUpdate, m.OldTuple, m.NewTuple)
	case *pglogrepl.DeleteMessage:
		return r.change(b, m.RelationID, OpDelete, m.OldTuple, nil)
	case *pglogrepl.TruncateMessage:
		for _, id := range m.RelationIDs {
			if rel := r.rel[id]; rel != nil && rel.ours && !r.skipTx {
				return 0, fmt.Errorf("%w: postgres-cdc source: table %s was truncated at %s; a truncate is not a change the sinks can apply: reset the pipeline's checkpoint (and the target) to take a new snapshot",
					flightline.ErrFailedPrecondition, r.s.id.Sanitize(), r.cur.commit)
			}
		}
	}
	return 0, nil
}

func (r *reader) relation(m *pglogrepl.RelationMessage) error {
	if m.RelationID != r.l.oid {
		r.rel[m.RelationID] = &relation{}
		return nil
	}
	rel := &relation{ours: true, idx: make([]int, len(m.Columns))}
	for i, c := range m.Columns {
		rel.idx[i] = -1
		for j, lc := range r.l.cols {
			if lc.name == c.Name {
				if lc.oid != c.DataType {
					return fmt.Errorf("%w: postgres-cdc source: table %s column %q changed type (oid %d to %d) after the reader started: restart the source to read the new schema",
						flightline.ErrSchemaMismatch, r.s.id.Sanitize(), c.Name, lc.oid, c.DataType)
				}
				rel.idx[i] = j
			}
		}
		if rel.idx[i] < 0 {
			return fmt.Errorf("%w: postgres-cdc source: table %s has a column %q the reader's schema lacks (the table was altered): restart the source to read the new schema",
				flightline.ErrSchemaMismatch, r.s.id.Sanitize(), c.Name)
		}
	}
	r.rel[m.RelationID] = rel
	return nil
}

// change appends the rows of one change: an update of the key is a delete
// of the old key, then the update.
func (r *reader) change(b *array.RecordBuilder, relID uint32, op string, old, new *pglogrepl.TupleData) (int, error) {
	rel := r.rel[relID]
	if rel == nil {
		return 0, fmt.Errorf("%w: postgres-cdc source: a change of relation %d before its relation message", flightline.ErrInternal, relID)
	}
	if !rel.ours || r.skipTx {
		return 0, nil
	}
	type row struct {
		op  string
		tup *pglogrepl.TupleData
	}
	var out []row
	switch op {
	case OpInsert:
		out = []row{{OpInsert, new}}
	case OpDelete:
		if old == nil {
			return 0, fmt.Errorf("%w: postgres-cdc source: a delete from %s without its key (REPLICA IDENTITY changed?)", flightline.ErrFailedPrecondition, r.s.id.Sanitize())
		}
		out = []row{{OpDelete, old}}
	case OpUpdate:
		if old != nil && !r.sameKey(rel, old, new) {
			out = append(out, row{OpDelete, old})
		}
		out = append(out, row{OpUpdate, new})
	}
	added := 0
	for _, rw := range out {
		r.cur.n++
		if r.cur.n <= r.cur.skip {
			continue
		}
		if r.filtered(rel, rw.tup) {
			continue
		}
		if err := r.appendTuple(b, rel, rw.tup, old); err != nil {
			return added, err
		}
		r.appendMeta(b, rw.op, int64(r.cur.commit), r.cur.time)
		added++
	}
	return added, nil
}

func (r *reader) sameKey(rel *relation, a, b *pglogrepl.TupleData) bool {
	for i, j := range rel.idx {
		if r.l.cols[j].key < 0 || i >= len(a.Columns) || i >= len(b.Columns) {
			continue
		}
		ca, cb := a.Columns[i], b.Columns[i]
		if cb.DataType == 'u' {
			continue
		}
		if ca.DataType != cb.DataType || !bytes.Equal(ca.Data, cb.Data) {
			return false
		}
	}
	return true
}

func (r *reader) appendTuple(b *array.RecordBuilder, rel *relation, tup, old *pglogrepl.TupleData) error {
	have := make([]bool, len(r.l.cols))
	for i, c := range tup.Columns {
		j := rel.idx[i]
		have[j] = true
		if c.DataType == 'u' { // unchanged TOAST value: only the old row has it
			if old == nil || i >= len(old.Columns) || old.Columns[i].DataType != 'b' {
				return fmt.Errorf("%w: postgres-cdc source: table %s column %q: an update left a TOASTed value unchanged and the WAL does not carry it: ALTER TABLE %s REPLICA IDENTITY FULL",
					flightline.ErrFailedPrecondition, r.s.id.Sanitize(), r.l.cols[j].name, r.s.id.Sanitize())
			}
			c = old.Columns[i]
		}
		switch c.DataType {
		case 'n':
			b.Field(j).AppendNull()
		case 'b':
			if err := r.l.decoders[j](b.Field(j), c.Data); err != nil {
				return fmt.Errorf("%w: %s column %q: %v", flightline.ErrInvalidInput, r.s.id.Sanitize(), r.l.cols[j].name, err)
			}
		default:
			return fmt.Errorf("%w: postgres-cdc source: %s column %q came in format %q, not binary", flightline.ErrInternal, r.s.id.Sanitize(), r.l.cols[j].name, c.DataType)
		}
	}
	for j, ok := range have {
		if !ok { // a column added since this change was made
			b.Field(j).AppendNull()
		}
	}
	return nil
}

// keyVal is one primary key value, comparable in the snapshot's order.
type keyVal struct {
	isInt bool
	i     int64
	s     string
}

func (a keyVal) cmp(b keyVal) int {
	if a.isInt {
		switch {
		case a.i < b.i:
			return -1
		case a.i > b.i:
			return 1
		}
		return 0
	}
	return bytes.Compare([]byte(a.s), []byte(b.s))
}

func (r *reader) parseKey(text []string) ([]keyVal, error) {
	if len(text) == 0 {
		return nil, nil
	}
	if len(text) != len(r.l.keys) {
		return nil, fmt.Errorf("%w: checkpoint key %q has %d values, the table's primary key %d columns", flightline.ErrInvalidInput, text, len(text), len(r.l.keys))
	}
	out := make([]keyVal, len(text))
	for i, t := range text {
		if r.l.keyInt[i] {
			v, err := strconv.ParseInt(t, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w: checkpoint key %q: %v", flightline.ErrInvalidInput, text, err)
			}
			out[i] = keyVal{isInt: true, i: v}
		} else {
			out[i] = keyVal{s: t}
		}
	}
	return out, nil
}

// tupleKey reads the primary key out of a binary tuple.
func (r *reader) tupleKey(rel *relation, tup *pglogrepl.TupleData) []keyVal {
	out := make([]keyVal, len(r.l.keys))
	for i, c := range tup.Columns {
		j := rel.idx[i]
		k := r.l.cols[j].key
		if k < 0 {
			continue
		}
		if r.l.keyInt[k] {
			var v int64
			switch len(c.Data) {
			case 2:
				v = int64(int16(binary.BigEndian.Uint16(c.Data)))
			case 4:
				v = int64(int32(binary.BigEndian.Uint32(c.Data)))
			case 8:
				v = int64(binary.BigEndian.Uint64(c.Data))
			}
			out[k] = keyVal{isInt: true, i: v}
		} else {
			out[k] = keyVal{s: string(c.Data)}
		}
	}
	return out
}

func cmpKeys(a, b []keyVal) int {
	for i := range a {
		if c := a[i].cmp(b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// filtered reports whether a snapshot taken when the snapshot read resumed
// already holds this change (see Checkpoint).
func (r *reader) filtered(rel *relation, tup *pglogrepl.TupleData) bool {
	if len(r.st.filters) == 0 {
		return false
	}
	// The filters' ranges follow each other: a key belongs to the last
	// filter whose From it is after.
	k := r.tupleKey(rel, tup)
	found := -1
	for i, f := range r.st.filters {
		if from := r.keyCmp[f]; from == nil || cmpKeys(k, from) > 0 {
			found = i
		}
	}
	if found < 0 {
		return false
	}
	f := r.st.filters[found]
	return r.cur.commit < r.st.until[found] && f.sees(r.cur.xid)
}

// Close implements flightsrc.Reader. It interrupts a running Next.
func (r *reader) Close() error {
	r.cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if r.pumpDone != nil {
		<-r.pumpDone
	}
	r.closeConns()
	r.s.mu.Lock()
	if r.s.active == r {
		r.s.active = nil
	}
	r.s.mu.Unlock()
	return nil
}

func (r *reader) closeConns() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r.query != nil {
		r.query.Close(ctx)
		r.query = nil
	}
	if r.repl != nil {
		r.repl.Close(ctx)
		r.repl = nil
	}
}
