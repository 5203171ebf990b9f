package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/kafkadecode"
)

// reader serves one topic's assigned partitions. A fetcher goroutine
// issues raw Fetch requests and queues each partition's record bytes as a
// chunk; Next decodes chunks into one kafkadecode.Decoder per partition and
// cuts batches (see cut for the boundary rules).
type reader struct {
	s       *Source
	m       *member // nil without group membership
	topic   string
	topicID [16]byte
	group   string
	schema  *arrow.Schema
	after   checkpoint.Positions

	mu             sync.Mutex
	parts          []int32 // the assignment served, sorted
	epoch          uint64
	waitAssignment bool
	failErr        error
	failCh         chan struct{}

	// Owned by the goroutine calling Next.
	started bool
	ps      map[int32]*partState
	emitted checkpoint.Positions
	ready   []out
	dead    []kafkadecode.DeadLetter

	chunks   chan chunk
	buffered atomic.Int64
	room     chan struct{}
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	closed   atomic.Bool
}

type out struct {
	rec arrow.RecordBatch
	cp  []byte
}

// partState is the decoding state of one partition.
type partState struct {
	p     int32
	key   string
	dec   *kafkadecode.Decoder
	next  int64             // offset after everything appended
	carry arrow.RecordBatch // flushed rows not emitted yet (fewer than a batch)
	// rawPending over-estimates the key and value bytes of unflushed rows
	// (the fetched bytes); it only decides when to flush the decoder.
	rawPending int64
	since      time.Time // when the oldest unemitted row or skip arrived
}

// chunk is one partition of one fetch response, or a reset.
type chunk struct {
	p       int32
	offset  int64 // the fetch offset
	data    []byte
	aborted []kafkadecode.AbortedTransaction
	resetTo int64 // >= 0: the position jumped here (out of range)
	err     error // the fetcher failed; terminal
}

// assign sets the partitions served. Called once, before Next.
func (r *reader) assign(parts []int32, epoch uint64) {
	r.mu.Lock()
	r.parts, r.epoch = slices.Clone(parts), epoch
	r.mu.Unlock()
}

// fail ends the Reader: the next Next returns err. The first error wins.
func (r *reader) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failErr == nil {
		r.failErr = err
		close(r.failCh)
	}
}

func (r *reader) servesAny(ps []int32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range ps {
		if slices.Contains(r.parts, p) {
			return true
		}
	}
	return false
}

func (r *reader) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failErr
}

// Schema implements flightsrc.Reader.
func (r *reader) Schema() *arrow.Schema { return r.schema }

// Next implements flightsrc.Reader. The batch holds rows of one partition;
// its checkpoint holds the positions of every partition the Reader serves.
func (r *reader) Next(ctx context.Context) (arrow.RecordBatch, []byte, error) {
	if r.closed.Load() {
		return nil, nil, fmt.Errorf("%w: kafka reader closed", flightline.ErrInvalidInput)
	}
	if !r.started {
		r.mu.Lock()
		wait := r.waitAssignment
		r.mu.Unlock()
		if wait { // the group's first assignment ends this Reader (see member)
			select {
			case <-r.failCh:
				return nil, nil, r.failure()
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		select {
		case <-r.failCh:
			return nil, nil, r.failure()
		default:
		}
		if err := r.start(ctx); err != nil {
			return nil, nil, err
		}
	}
	for {
		if err := r.failure(); err != nil {
			return nil, nil, err
		}
		if len(r.ready) > 0 {
			o := r.ready[0]
			r.ready[0] = out{}
			r.ready = r.ready[1:]
			return o.rec, o.cp, nil
		}
		var (
			timer <-chan time.Time
			t     *time.Timer
		)
		if d, ok := r.nextDeadline(); ok {
			t = time.NewTimer(max(0, time.Until(d)))
			timer = t.C
		}
		var err error
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-r.failCh:
			err = r.failure()
		case c := <-r.chunks:
			err = c.err
			if err == nil {
				err = r.handle(ctx, c)
			}
		case <-timer:
			err = r.flushDue(time.Now())
		}
		if t != nil {
			t.Stop()
		}
		if err != nil {
			return nil, nil, err
		}
	}
}

// start resolves the start positions and starts the fetcher.
func (r *reader) start(ctx context.Context) error {
	r.mu.Lock()
	parts := slices.Clone(r.parts)
	r.mu.Unlock()
	r.started = true
	r.ps = map[int32]*partState{}
	r.emitted = checkpoint.Positions{}
	var missing []int32
	start := map[int32]int64{}
	why := map[int32]string{}
	for _, p := range parts {
		if o, ok := r.after[key(r.topic, p)]; ok {
			start[p], why[p] = o, "checkpoint"
		} else {
			missing = append(missing, p)
		}
	}
	more, moreWhy, err := r.s.startOffsets(ctx, r.group, r.topic, missing)
	if err != nil {
		return err
	}
	for p, o := range more {
		start[p], why[p] = o, moreWhy[p]
	}
	for _, p := range parts {
		dec, err := r.newDecoder()
		if err != nil {
			return err
		}
		k := key(r.topic, p)
		r.ps[p] = &partState{p: p, key: k, dec: dec, next: start[p]}
		r.emitted[k] = start[p]
	}
	r.s.log.Info("kafka reader starting", "topic", r.topic, "group", r.group, "partitions", parts,
		"positions", string(r.emitted.Encode()), "from", why)
	if len(missing) > 0 {
		// Pin positions that did not come from the sink's checkpoint, so a
		// restart resumes exactly here even under auto_offset_reset=latest.
		r.queue(r.emptyBatch())
	}
	r.chunks = make(chan chunk, 256)
	r.room = make(chan struct{}, 1)
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			if p := recover(); p != nil {
				r.send(fctx, chunk{err: fmt.Errorf("kafka fetcher panicked: %v", p)})
			}
		}()
		r.fetch(fctx, start)
	}()
	return nil
}

func (r *reader) newDecoder() (*kafkadecode.Decoder, error) {
	opts := []kafkadecode.Option{kafkadecode.WithTopic(r.topic), kafkadecode.WithCapacityHint(min(r.s.cfg.maxRows, 1<<16)),
		kafkadecode.WithMaxParkedBytes(r.s.cfg.maxParked)}
	if r.s.cfg.readCommitted {
		opts = append(opts, kafkadecode.WithIsolation(kafkadecode.ReadCommitted))
	}
	if r.s.cfg.valueDecoder != nil {
		vd, err := r.s.cfg.valueDecoder()
		if err != nil {
			return nil, fmt.Errorf("%w: value decoder: %v", flightline.ErrInvalidInput, err)
		}
		opts = append(opts, kafkadecode.WithValueDecoder(vd))
		if r.s.cfg.deadLetters == nil {
			opts = append(opts, kafkadecode.WithFailFast())
		}
	}
	dec, err := kafkadecode.NewDecoder(r.s.cfg.mem, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", flightline.ErrInvalidInput, err)
	}
	return dec, nil
}

func (r *reader) send(ctx context.Context, c chunk) bool {
	select {
	case r.chunks <- c:
		return true
	case <-ctx.Done():
		return false
	}
}

func (r *reader) queue(rec arrow.RecordBatch) {
	r.ready = append(r.ready, out{rec: rec, cp: r.emitted.Encode()})
}

func (r *reader) emptyBatch() arrow.RecordBatch {
	cols := make([]arrow.Array, r.schema.NumFields())
	for i, f := range r.schema.Fields() {
		cols[i] = array.MakeArrayOfNull(r.s.cfg.mem, f.Type, 0)
	}
	rec := array.NewRecordBatch(r.schema, cols, 0)
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// handle decodes one chunk.
func (r *reader) handle(ctx context.Context, c chunk) error {
	defer r.unbuffer(int64(len(c.data)))
	st := r.ps[c.p]
	if st == nil {
		return nil
	}
	if c.resetTo >= 0 {
		if err := r.cut(st, true); err != nil {
			return err
		}
		st.next = c.resetTo
		r.emitted[st.key] = c.resetTo
		r.queue(r.emptyBatch())
		return nil
	}
	if c.offset != st.next {
		return fmt.Errorf("kafka: internal: chunk of %s/%d at offset %d, expected %d", r.topic, c.p, c.offset, st.next)
	}
	// Decode the chunk a piece (whole record batches, at most
	// DecodeBytes) at a time, cutting batches in between: each piece is
	// decompressed into its own buffer, which is freed with the batches
	// that point into it, so the decompressed working set is bounded by
	// the piece, not by the fetch.
	// The pieces after the first continue the fetch response: the
	// decoder carries its aborted transactions over (kafkadecode.Fetch's
	// Continues).
	for data, cont := c.data, false; len(data) > 0; cont = true {
		n := pieceLen(data, r.s.cfg.decodeBytes)
		if err := r.decode(ctx, st, c, data[:n], cont); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// pieceLen is the length of the record batches at the start of data that
// fit in limit bytes, at least one batch (or all of data, if it does not
// start with a batch header, for the decoder to report).
func pieceLen(data []byte, limit int) int {
	n := 0
	for n < len(data) {
		_, _, total := batchBounds(data[n:])
		if total <= 12 || total > len(data)-n {
			return len(data)
		}
		if n > 0 && n+total > limit {
			break
		}
		n += total
	}
	return n
}

// decode appends one piece of a chunk to st's decoder and cuts batches if
// the partition holds enough rows. cont says the piece continues the
// previous one of the same chunk.
func (r *reader) decode(ctx context.Context, st *partState, c chunk, data []byte, cont bool) error {
	raw := len(data)
	off := max(c.offset, st.next)
	for len(data) > 0 {
		prog, err := st.dec.UnsafeAppend(kafkadecode.Fetch{Partition: c.p, FetchOffset: off, RecordBatches: data,
			AbortedTransactions: c.aborted, Continues: cont})
		cont = true // what follows a dead-lettered batch continues too
		if prog.NextOffset > st.next {
			st.next = prog.NextOffset
		}
		if err == nil {
			break
		}
		rest, skipTo, derr := r.deadBatch(ctx, c.p, data, err)
		if derr != nil {
			return derr
		}
		data, off = rest, skipTo
		if skipTo > st.next {
			st.next = skipTo
		}
	}
	if err := r.routeDead(ctx, st); err != nil {
		return err
	}
	if st.since.IsZero() && st.next > r.emitted[st.key] {
		st.since = time.Now()
	}
	st.rawPending += int64(raw)
	if st.dec.Len()+carryRows(st) >= r.s.cfg.maxRows || (r.s.cfg.valueDecoder == nil && st.rawPending >= int64(r.s.cfg.maxBytes)) {
		return r.cut(st, false)
	}
	return nil
}

func carryRows(st *partState) int {
	if st.carry == nil {
		return 0
	}
	return int(st.carry.NumRows())
}

// deadBatch handles a decoding error: a corrupt batch goes to the
// dead-letter handler (and decoding resumes after it), anything else fails.
func (r *reader) deadBatch(ctx context.Context, p int32, data []byte, err error) (rest []byte, skipTo int64, _ error) {
	var (
		ce  *kafkadecode.CorruptBatchError
		cre *kafkadecode.CRCError
		re  *kafkadecode.RecordError
	)
	base := int64(-1)
	switch {
	case errors.As(err, &cre):
		base = cre.BaseOffset
	case errors.As(err, &ce):
		base = ce.BaseOffset
	case errors.As(err, &re) && kafkadecode.IsRetryable(err):
		return nil, 0, fmt.Errorf("kafka: %s/%d offset %d: %w", r.topic, p, re.Offset, err) // retried by the coordinator
	}
	if base < 0 || r.s.cfg.deadLetters == nil {
		return nil, 0, fmt.Errorf("%w: kafka %s/%d: %w (no dead-letter handler configured: failing rather than dropping it)",
			flightline.ErrInvalidInput, r.topic, p, err)
	}
	for b := data; len(b) >= 61; {
		bo, last, total := batchBounds(b)
		if total <= 0 || total > len(b) {
			break
		}
		if bo == base {
			dl := kafkadecode.DeadLetter{Partition: p, Offset: base, Value: slices.Clone(b[:total]), Err: err}
			if herr := r.s.cfg.deadLetters(ctx, r.topic, []kafkadecode.DeadLetter{dl}); herr != nil {
				return nil, 0, fmt.Errorf("kafka dead-letter handler: %w", herr)
			}
			r.s.log.Error("kafka: corrupt record batch dead-lettered", "topic", r.topic, "partition", p, "base_offset", base, "err", err)
			return b[total:], last + 1, nil
		}
		b = b[total:]
	}
	return nil, 0, fmt.Errorf("%w: kafka %s/%d: %w (batch not locatable)", flightline.ErrInvalidInput, r.topic, p, err)
}

func (r *reader) routeDead(ctx context.Context, st *partState) error {
	r.dead = st.dec.TakeDeadLetters(r.dead[:0])
	if len(r.dead) == 0 {
		return nil
	}
	defer clear(r.dead)
	if r.s.cfg.deadLetters == nil {
		return fmt.Errorf("%w: kafka %s/%d: %d undecodable records (first: offset %d: %v) and no dead-letter handler",
			flightline.ErrInvalidInput, r.topic, st.p, len(r.dead), r.dead[0].Offset, r.dead[0].Err)
	}
	if err := r.s.cfg.deadLetters(ctx, r.topic, r.dead); err != nil {
		return fmt.Errorf("kafka dead-letter handler: %w", err)
	}
	return nil
}

// cut flushes a partition's decoder and emits its rows as batches.
//
// Boundaries: a batch ends after BatchRows rows, or after the row that
// brings its keys and values to BatchBytes (raw format), counted from the
// partition's start position. The rest is carried into the next flush.
// Such a batch's checkpoint position is its last row's offset + 1, so both
// the rows and the checkpoint depend only on the records and the start
// position. When final (the BatchWait timer, a reset), every row is
// emitted and the position becomes the decoder's next offset, stepping over
// control records and aborted transactions: those boundaries depend on
// timing.
func (r *reader) cut(st *partState, final bool) error {
	rec, err := st.dec.Flush()
	if err != nil {
		return fmt.Errorf("kafka %s/%d: %w", r.topic, st.p, err)
	}
	st.rawPending = 0
	if st.carry != nil {
		joined, err := concat(r, st.carry, rec)
		st.carry.Release()
		st.carry = nil
		rec.Release()
		if err != nil {
			return err
		}
		rec = joined
	}
	defer rec.Release()
	n := int(rec.NumRows())
	offs := rec.Column(1).(*array.Int64).Int64Values()
	var keys, vals *array.BinaryView
	if r.s.cfg.valueDecoder == nil {
		keys, _ = rec.Column(3).(*array.BinaryView)
		vals, _ = rec.Column(4).(*array.BinaryView)
	}
	maxRows, maxBytes := r.s.cfg.maxRows, int64(r.s.cfg.maxBytes)
	i := 0
	for i < n {
		j, size, full := i, int64(0), false
		for j < n {
			if keys != nil {
				size += int64(keys.ValueLen(j) + vals.ValueLen(j))
			}
			j++
			if j-i >= maxRows || (keys != nil && size >= maxBytes) {
				full = true
				break
			}
		}
		if !full {
			break
		}
		r.emitted[st.key] = offs[j-1] + 1
		r.queue(rec.NewSlice(int64(i), int64(j)))
		i = j
	}
	switch {
	case i < n && !final:
		st.carry = trimmedSlice(rec, int64(i), int64(n), r.s.cfg.mem)
	case i < n:
		r.emitted[st.key] = st.next
		r.queue(rec.NewSlice(int64(i), int64(n)))
	case final && st.next > r.emitted[st.key]:
		r.emitted[st.key] = st.next
		r.queue(r.emptyBatch())
	}
	if st.carry == nil && st.dec.Len() == 0 && r.emitted[st.key] >= st.next {
		st.since = time.Time{}
	} else if len(r.ready) > 0 && st.carry != nil {
		st.since = time.Now() // the carried rows start a new batch now
	}
	return nil
}

func concat(r *reader, a, b arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, a.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i := range cols {
		c, err := array.Concatenate([]arrow.Array{a.Column(i), b.Column(i)}, r.s.cfg.mem)
		if err != nil {
			return nil, fmt.Errorf("kafka: joining carried rows: %w", err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(r.schema, cols, a.NumRows()+b.NumRows()), nil
}

func (r *reader) nextDeadline() (time.Time, bool) {
	var d time.Time
	for _, st := range r.ps {
		if !st.since.IsZero() && (d.IsZero() || st.since.Before(d)) {
			d = st.since
		}
	}
	if d.IsZero() {
		return d, false
	}
	return d.Add(r.s.cfg.maxWait), true
}

// flushDue emits the partitions whose oldest row has waited BatchWait.
func (r *reader) flushDue(now time.Time) error {
	for _, p := range r.sortedParts() {
		st := r.ps[p]
		if !st.since.IsZero() && !now.Before(st.since.Add(r.s.cfg.maxWait)) {
			if err := r.cut(st, true); err != nil {
				return err
			}
			st.since = time.Time{}
		}
	}
	return nil
}

func (r *reader) sortedParts() []int32 {
	ps := make([]int32, 0, len(r.ps))
	for p := range r.ps {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

func (r *reader) unbuffer(n int64) {
	if n == 0 {
		return
	}
	r.buffered.Add(-n)
	select {
	case r.room <- struct{}{}:
	default:
	}
}

// Close implements flightsrc.Reader: it stops the fetcher and releases
// everything not yet returned by Next.
func (r *reader) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	if r.cancel != nil {
		r.cancel()
		r.wg.Wait()
		for len(r.chunks) > 0 { // drop the queued fetch responses
			<-r.chunks
		}
	}
	for _, o := range r.ready {
		o.rec.Release()
	}
	r.ready = nil
	for _, st := range r.ps {
		if st.carry != nil {
			st.carry.Release()
		}
		st.dec.Release()
	}
	r.ps = nil
	if r.m != nil {
		r.m.unregister(r)
	}
	return nil
}
