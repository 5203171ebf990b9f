package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/internal/changes"
	"github.com/flightline/flightline/internal/kafkaconn"
	"github.com/flightline/flightline/internal/rowenc"
)

// Column names the sink reads; other columns of a batch are ignored with
// ValueFormat raw, and make the value with ValueFormat json.
const (
	ColValue   = "value"   // binary, large_binary or binary_view; required
	ColKey     = "key"     // binary or string family; optional
	ColHeaders = "headers" // list<struct<key: utf8, value: binary>>; optional
)

// Per-record bytes on top of key, value and headers in a record batch:
// the batch header for a record alone in its batch, and the record's own
// length, attributes, timestamp and offset deltas and header count.
const (
	batchOverhead     = 61
	recordOverhead    = 21
	headerOverhead    = 10
	checkpointReserve = 1 << 10
)

// writer is the Writer of one pipeline: one transactional producer.
type writer struct {
	s        *Sink
	p        flightsink.Pipeline
	topic    string
	parts    int32
	maxBytes int32
	cl       *kgo.Client
	sticky   atomic.Uint32 // partition of keyless records, rotated per batch

	last   []byte // last committed checkpoint
	broken error  // set when the producer cannot start another transaction
	closed bool

	recs []kgo.Record       // reused across batches once all promises fired
	hdrs []kgo.RecordHeader // reused likewise

	beforeCommit func(context.Context) error // test hook: after flush, before commit
}

// bytesCol reads one binary-like column without copying. The slices alias
// the batch's buffers: they are valid while the batch is retained.
type bytesCol interface {
	IsNull(i int) bool
	Value(i int) []byte
}

type stringCol interface {
	IsNull(i int) bool
	Value(i int) string
}

type strBytes struct{ stringCol }

func (c strBytes) Value(i int) []byte {
	s := c.stringCol.Value(i)
	return unsafe.Slice(unsafe.StringData(s), len(s)) // read-only alias
}

func asBytes(a arrow.Array, allowString bool) (bytesCol, bool) {
	switch c := a.(type) {
	case *array.Binary:
		return c, true
	case *array.LargeBinary:
		return c, true
	case *array.BinaryView:
		return c, true
	}
	if allowString {
		switch c := a.(type) {
		case *array.String:
			return strBytes{c}, true
		case *array.LargeString:
			return strBytes{c}, true
		case *array.StringView:
			return strBytes{c}, true
		}
	}
	return nil, false
}

type columns struct {
	value, key bytesCol
	hdrs       *array.List
	hdrKey     stringCol
	hdrValue   bytesCol
	partition  *array.Int32

	// ValueJSON: the columns of the value and their encoder.
	valCols []arrow.Array
	valEnc  *rowenc.JSONL
	// Config.Key: the key columns (key above when they are one string or
	// binary column, else keyEnc encodes them) and the batch's _op (nil:
	// none, every row an upsert).
	keyCols  []arrow.Array
	keyNames []string
	keyEnc   *rowenc.JSONL
	op       *array.String
}

func mismatch(format string, args ...any) error {
	return fmt.Errorf("%w: %w: kafka sink: "+format, append([]any{flightline.ErrSchemaMismatch, flightline.ErrInvalidInput}, args...)...)
}

// columns finds the columns the sink reads. A batch the sink cannot
// produce from fails here, before any I/O, with an error wrapping both
// flightline.ErrSchemaMismatch and flightline.ErrInvalidInput.
func (w *writer) columns(rec arrow.RecordBatch) (columns, error) {
	var c columns
	sc := rec.Schema()
	col := func(name string) (arrow.Array, bool) {
		idx := sc.FieldIndices(name)
		if len(idx) == 0 {
			return nil, false
		}
		return rec.Column(idx[0]), true
	}
	keyed := len(w.s.cfg.key) > 0
	if !w.s.cfg.json {
		v, ok := col(ColValue)
		if !ok {
			return c, mismatch("the batch has no %q column (binary, large_binary or binary_view); columns: %v", ColValue, fieldNames(sc))
		}
		if c.value, ok = asBytes(v, false); !ok {
			return c, mismatch("column %q is %s; want binary, large_binary or binary_view (value_format raw)", ColValue, v.DataType())
		}
	}
	if keyed {
		if err := w.keyColumns(rec, &c); err != nil {
			return c, err
		}
	} else if k, ok := col(ColKey); ok {
		if c.key, ok = asBytes(k, true); !ok {
			return c, mismatch("column %q is %s; want a binary or string type", ColKey, k.DataType())
		}
	}
	if h, ok := col(ColHeaders); ok {
		l, ok := h.(*array.List)
		var st *array.Struct
		if ok {
			st, ok = l.ListValues().(*array.Struct)
		}
		if ok && st.NumField() == 2 {
			hk, okk := st.Field(0).(stringCol)
			hv, okv := asBytes(st.Field(1), false)
			_, isStr := st.Field(0).(*array.String)
			_, isLStr := st.Field(0).(*array.LargeString)
			ok = okk && okv && (isStr || isLStr)
			c.hdrs, c.hdrKey, c.hdrValue = l, hk, hv
		} else {
			ok = false
		}
		if !ok {
			return c, mismatch("column %q is %s; want list<struct<key: utf8, value: binary>>", ColHeaders, h.DataType())
		}
	}
	if w.s.cfg.partitionCol != "" {
		p, ok := col(w.s.cfg.partitionCol)
		if !ok {
			return c, mismatch("the batch has no partition column %q", w.s.cfg.partitionCol)
		}
		if c.partition, ok = p.(*array.Int32); !ok {
			return c, mismatch("partition column %q is %s; want int32", w.s.cfg.partitionCol, p.DataType())
		}
	}
	if w.s.cfg.json {
		// The value: every column but those routing the record and, keyed,
		// the change columns.
		var fields []arrow.Field
		for i, f := range sc.Fields() {
			switch {
			case f.Name == ColHeaders && c.hdrs != nil, f.Name == w.s.cfg.partitionCol,
				f.Name == ColKey && !keyed, keyed && changes.IsChangeColumn(f.Name):
				continue
			}
			fields = append(fields, f)
			c.valCols = append(c.valCols, rec.Column(i))
		}
		c.valEnc = rowenc.NewJSONL(arrow.NewSchema(fields, nil))
	}
	return c, nil
}

// keyColumns finds Config.Key's columns and _op in rec (changes.KeyColumns,
// changes.Split, changes.Check): a missing key column wraps
// ErrSchemaMismatch, a key column of a type that cannot be a key, an _op
// that is not utf8 or holds another value than the three, ErrInvalidInput.
func (w *writer) keyColumns(rec arrow.RecordBatch, c *columns) error {
	sc := rec.Schema()
	idx, err := changes.KeyColumns(sc, w.s.cfg.key)
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	data, op, err := changes.Split(rec)
	if err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	data.Release() // op lives as long as rec
	if err := changes.Check(op); err != nil {
		return fmt.Errorf("kafka sink: %w", err)
	}
	c.op = op
	fields := make([]arrow.Field, len(idx))
	for j, i := range idx {
		fields[j] = sc.Field(i)
		c.keyCols = append(c.keyCols, rec.Column(i))
		c.keyNames = append(c.keyNames, sc.Field(i).Name)
	}
	if len(idx) == 1 {
		if k, ok := asBytes(c.keyCols[0], true); ok {
			c.key = k
			return nil
		}
	}
	c.keyEnc = rowenc.NewJSONL(arrow.NewSchema(fields, nil))
	return nil
}

func fieldNames(sc *arrow.Schema) []string {
	out := make([]string, sc.NumFields())
	for i, f := range sc.Fields() {
		out[i] = f.Name
	}
	return out
}

// fill fills recs (one per row of rec) and the headers they use from hdrs
// (as many as rec's headers column holds), checking every row against the
// topic's limits before anything is produced.
func (w *writer) fill(rec arrow.RecordBatch, c columns, recs []kgo.Record, hdrs []kgo.RecordHeader) error {
	n := int(rec.NumRows())
	limit := int(w.maxBytes)
	// JSON keys and values are encoded into buf; records get their slices
	// once it stops growing. enc[4i:4i+4]: row i's key and value offsets
	// in buf (a value's both 0 where none was encoded: a JSON object is
	// never empty).
	var buf bytes.Buffer
	var enc []int
	if c.keyEnc != nil || c.valEnc != nil {
		enc = make([]int, 4*n)
	}
	for i := range n {
		r := &recs[i]
		*r = kgo.Record{Topic: w.topic, Partition: -1}
		size := batchOverhead + recordOverhead
		for j, k := range c.keyCols {
			if k.IsNull(i) {
				return fmt.Errorf("%w: kafka sink: row %d: key column %q is null", flightline.ErrInvalidInput, i, c.keyNames[j])
			}
		}
		tombstone := c.keyCols != nil && changes.IsDelete(c.op, i)
		switch {
		case tombstone:
		case c.valEnc != nil:
			enc[4*i+2] = buf.Len()
			if err := c.valEnc.AppendRow(&buf, c.valCols, i); err != nil {
				return fmt.Errorf("kafka sink: row %d: %w", i, err)
			}
			enc[4*i+3] = buf.Len()
			size += enc[4*i+3] - enc[4*i+2]
		case !c.value.IsNull(i):
			r.Value = c.value.Value(i)
			if r.Value == nil {
				r.Value = []byte{} // an empty value, not a tombstone
			}
			size += len(r.Value)
		}
		switch {
		case c.keyEnc != nil:
			enc[4*i] = buf.Len()
			if err := c.keyEnc.AppendRow(&buf, c.keyCols, i); err != nil {
				return fmt.Errorf("kafka sink: row %d: key: %w", i, err)
			}
			enc[4*i+1] = buf.Len()
			size += enc[4*i+1] - enc[4*i]
		case c.key != nil && !c.key.IsNull(i):
			r.Key = c.key.Value(i)
			if r.Key == nil {
				r.Key = []byte{}
			}
			size += len(r.Key)
		}
		if c.hdrs != nil && !c.hdrs.IsNull(i) {
			from, to := c.hdrs.ValueOffsets(i)
			hs := hdrs[from:to:to]
			for j := range hs {
				k := int(from) + j
				hs[j] = kgo.RecordHeader{Key: c.hdrKey.Value(k)}
				if !c.hdrValue.IsNull(k) {
					hs[j].Value = c.hdrValue.Value(k)
				}
				size += headerOverhead + len(hs[j].Key) + len(hs[j].Value)
			}
			r.Headers = hs
		}
		if c.partition != nil {
			if c.partition.IsNull(i) {
				return fmt.Errorf("%w: kafka sink: row %d: null in partition column %q", flightline.ErrInvalidInput, i, w.s.cfg.partitionCol)
			}
			p := c.partition.Value(i)
			if p < 0 || p >= w.parts {
				return fmt.Errorf("%w: kafka sink: row %d: partition %d does not exist (topic %q has %d partitions)",
					flightline.ErrInvalidInput, i, p, w.topic, w.parts)
			}
			r.Partition = p
		}
		if size > limit {
			return fmt.Errorf("%w: kafka sink: row %d: record of %d bytes exceeds max.message.bytes=%d of topic %q; nothing of the batch was produced",
				flightline.ErrInvalidInput, i, size, limit, w.topic)
		}
	}
	if enc != nil {
		b := buf.Bytes()
		for i := range n {
			r := &recs[i]
			if c.keyEnc != nil {
				r.Key = b[enc[4*i]:enc[4*i+1]:enc[4*i+1]]
			}
			if from, to := enc[4*i+2], enc[4*i+3]; to > from { // a tombstone encoded none
				r.Value = b[from:to:to]
			}
		}
	}
	return nil
}

// headerCount is how many headers the headers column of rec holds.
func headerCount(c columns) int {
	if c.hdrs == nil {
		return 0
	}
	return c.hdrKey.(arrow.Array).Len()
}

// inflight tracks the promises of one transaction. Its batches are
// retained until the last promise fired, so no record outlives the buffers
// it aliases even when an abort gives up waiting.
type inflight struct {
	pending atomic.Int64
	batches []arrow.RecordBatch
	recs    []kgo.Record
	starts  []int // index in recs of each batch's first record
	group   []int // index in the group of each batch
	mu      sync.Mutex
	err     error
}

func (b *inflight) done() {
	if b.pending.Add(-1) == 0 {
		for _, r := range b.batches {
			r.Release()
		}
	}
}

func (b *inflight) promise(r *kgo.Record, err error) {
	if err != nil {
		b.mu.Lock()
		if b.err == nil {
			b.err = b.describe(r, err)
		}
		b.mu.Unlock()
	}
	b.done()
}

// describe names the row (and, in a group of several, the batch) of a
// failed record.
func (b *inflight) describe(r *kgo.Record, err error) error {
	for i := range b.recs {
		if &b.recs[i] != r {
			continue
		}
		if i == len(b.recs)-1 {
			return fmt.Errorf("checkpoint record to %s/%d: %w", r.Topic, r.Partition, err)
		}
		k := 0
		for k+1 < len(b.starts) && b.starts[k+1] <= i {
			k++
		}
		row, where := i-b.starts[k], ""
		if len(b.starts) > 1 {
			where = fmt.Sprintf(" of batch %d of the group", b.group[k])
		}
		if errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) {
			return fmt.Errorf("%w: row %d%s: record rejected as too large for topic %q: %w", flightline.ErrInvalidInput, row, where, r.Topic, err)
		}
		return fmt.Errorf("row %d%s to %s/%d: %w", row, where, r.Topic, r.Partition, err)
	}
	return err
}

// WriteBatch implements flightsink.Writer: one Kafka transaction holding a
// record per row of rec and the checkpoint record. On any failure the
// transaction is aborted and nothing of it becomes visible to read_committed
// consumers.
func (w *writer) WriteBatch(ctx context.Context, rec arrow.RecordBatch, cp []byte) error {
	if err := flightsink.CheckBatch(rec, cp); err != nil {
		return err
	}
	return w.write(ctx, []flightsink.Batch{{Rec: rec, CP: cp}})
}

// MaxGroupRows implements flightsink.GroupRowBounder: a group stops
// growing once it fills the producer's record buffer (MaxBufferedRecords),
// past which producing blocks record by record and a group commits more
// slowly than its batches would one by one.
func (w *writer) MaxGroupRows() int64 { return int64(w.s.cfg.maxBufRecords) }

// WriteBatches implements flightsink.GroupWriter: one Kafka transaction
// holding a record per row of every new batch of the group, in order, and
// one checkpoint record with the group's checkpoint (flightsink.Fold). One
// EndTransaction commits the group.
func (w *writer) WriteBatches(ctx context.Context, batches []flightsink.Batch) error {
	if err := flightsink.CheckGroup(batches); err != nil {
		return err
	}
	return w.write(ctx, batches)
}

func (w *writer) write(ctx context.Context, batches []flightsink.Batch) error {
	switch {
	case w.closed:
		return fmt.Errorf("%w: writer of %q is closed", flightline.ErrInvalidInput, w.p.ID)
	case w.broken != nil:
		return w.broken
	}
	fresh, next, _ := flightsink.Fold(w.last, batches)
	// Check every new batch and size the transaction before any I/O.
	cols := make([]columns, len(batches))
	rows, nh := 0, 0
	for i, b := range batches {
		if !fresh[i] {
			continue
		}
		c, err := w.columns(b.Rec)
		if err != nil {
			if len(batches) > 1 {
				return fmt.Errorf("batch %d of the group: %w", i, err)
			}
			return err
		}
		cols[i] = c
		rows += int(b.Rec.NumRows())
		nh += headerCount(c)
	}
	// A group of replays only is a transaction holding only the unchanged
	// checkpoint record: it writes nothing new, and fails if a newer writer
	// has fenced this one (fencing wins over replay).
	if cap(w.recs) < rows+1 {
		w.recs = make([]kgo.Record, rows+1)
	}
	if cap(w.hdrs) < nh {
		w.hdrs = make([]kgo.RecordHeader, nh)
	}
	recs, hdrs := w.recs[:rows+1], w.hdrs[:nh]
	b := &inflight{recs: recs}
	at, ah := 0, 0
	for i, bt := range batches {
		if !fresh[i] {
			continue
		}
		n, h := int(bt.Rec.NumRows()), headerCount(cols[i])
		if err := w.fill(bt.Rec, cols[i], recs[at:at+n], hdrs[ah:ah+h]); err != nil {
			if len(batches) > 1 {
				return fmt.Errorf("batch %d of the group: %w", i, err)
			}
			return err
		}
		b.batches = append(b.batches, bt.Rec)
		b.starts = append(b.starts, at)
		b.group = append(b.group, i)
		at, ah = at+n, ah+h
	}
	cpr := &recs[len(recs)-1]
	*cpr = kgo.Record{Topic: w.s.cfg.cpTopic, Partition: -1, Key: CheckpointKey(w.p), Value: next,
		Headers: []kgo.RecordHeader{{Key: HeaderTarget, Value: []byte(w.topic)}}}
	w.sticky.Add(1)

	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, w.s.cfg.batchTimeout)
	defer cancel()
	if err := w.cl.BeginTransaction(); err != nil {
		return w.fail(parent, fmt.Errorf("begin transaction: %w", err))
	}
	for _, r := range b.batches {
		r.Retain()
	}
	b.pending.Store(int64(len(recs)) + 1) // +1: this call's own reference
	for i := range recs {
		w.cl.Produce(ctx, &recs[i], b.promise)
	}
	ferr := w.cl.Flush(ctx)
	b.done()
	b.mu.Lock()
	err := b.err
	b.mu.Unlock()
	if err == nil {
		err = ferr
	}
	if err == nil && w.beforeCommit != nil {
		err = w.beforeCommit(ctx)
	}
	if err != nil {
		return w.abort(parent, err)
	}
	if err := w.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		// The outcome is unknown (the commit may have been decided before
		// the error): this producer is done; the next Open's checkpoint
		// tells the truth and a replay of this batch is then a no-op.
		e := w.fail(parent, fmt.Errorf("commit: %w", err))
		if w.broken == nil {
			w.broken = e
		}
		return e
	}
	w.last = next
	return nil
}

// abort ends the open transaction without committing it.
func (w *writer) abort(parent context.Context, cause error) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(parent), w.s.cfg.batchTimeout)
	defer cancel()
	if err := w.cl.AbortBufferedRecords(actx); err != nil {
		w.broken = w.fail(parent, fmt.Errorf("%v; aborting buffered records: %w", cause, err))
	} else if err := w.cl.EndTransaction(actx, kgo.TryAbort); err != nil {
		w.broken = w.fail(parent, fmt.Errorf("%v; abort: %w", cause, err))
	}
	e := w.fail(parent, fmt.Errorf("transaction aborted: %w", cause))
	if w.broken != nil && errors.Is(w.broken, flightline.ErrFenced) {
		return w.broken
	}
	return e
}

// fail classifies err for the pipeline. A timeout of the batch (not of the
// caller's ctx) is an outage: ErrUnavailable. Fencing is permanent.
func (w *writer) fail(parent context.Context, err error) error {
	switch {
	case errors.Is(err, flightline.ErrInvalidInput), errors.Is(err, flightline.ErrFenced):
	case parent.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrRecordTimeout) ||
		errors.Is(err, kgo.ErrRecordRetries) || errors.Is(err, kgo.ErrAborting)):
		err = fmt.Errorf("%w: %w", flightline.ErrUnavailable, err)
	}
	err = kafkaconn.Classify(fmt.Errorf("kafka sink: pipeline %q, topic %q: %w", w.p.ID, w.topic, err), w.s.cfg.auth.SASLName)
	if errors.Is(err, flightline.ErrFenced) {
		w.broken = err
	}
	return err
}

// Close implements flightsink.Writer. It commits nothing; an open
// transaction (there is none between WriteBatch calls) would be aborted by
// the broker.
func (w *writer) Close(context.Context) error {
	if !w.closed {
		w.closed = true
		w.cl.Close()
	}
	return nil
}

// partitioner places the sink's records: an explicit partition (>= 0) as
// is; keyed records by murmur2 of the key, like the Java client; keyless
// records of one batch on one partition, rotating per batch.
type partitioner struct{ sticky *atomic.Uint32 }

func (p *partitioner) ForTopic(string) kgo.TopicPartitioner { return p }
func (p *partitioner) RequiresConsistency(*kgo.Record) bool { return true }
func (p *partitioner) Partition(r *kgo.Record, n int) int {
	switch {
	case r.Partition >= 0:
		return int(r.Partition)
	case r.Key != nil:
		return keyHasher.Partition(r, n)
	}
	return int(p.sticky.Load() % uint32(n))
}
