package sqlcheckpoint

import (
	"context"
	"fmt"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
)

// DefaultInstance is the instance of a sink given no instance name: the
// rows a table from before instances held become its rows.
const DefaultInstance = ""

// RowsConn is a Conn that can also read several rows.
type RowsConn interface {
	Conn
	// Query runs a query and calls scan once per row, with a function that
	// scans the row into dest; an error of scan ends the query.
	Query(ctx context.Context, query string, scan func(row func(dest ...any) error) error, args ...any) error
}

// Instances is a checkpoint table with one row per (pipeline_id, target,
// instance): the layout that lets several instances of one pipeline (the
// processes of a consumer group, each given its own instance name) write
// one target side by side.
//
//   - Fencing is per instance: Claim raises the epoch of its instance's row
//     only, so the newest claim of an instance fences the older writers of
//     that instance (ErrFenced), and instances do not fence each other.
//   - The checkpoint of a pipeline is the merge over its instances' rows
//     (checkpoint.Merge: the per-key maximum); Read, Claim and Lock return
//     it. Opaque (not Positions) checkpoints merge only when one instance
//     holds one.
//   - A key moved by another instance since the claim is refused: Lock and
//     Advance fail with ErrConflict when the batch names a key whose merged
//     position another instance raised after this writer's claim. That is
//     the zombie of a hand-over: an instance cut off from its consumer group
//     keeps its writer (nobody claims its instance), while the partition it
//     still writes was given to another instance, which resumed from the
//     checkpoint at its own claim; of the two, the one that commits second
//     is refused and re-opens, so no record of the partition is written
//     twice. (A key is never moved by its own instance's other writers:
//     those are fenced.)
//
// Advance locks every row of the (pipeline, target) in instance order
// (FOR UPDATE where the dialect has it) for its check and update, so
// instances' commits serialise only there, not while they write their data.
//
// The unnamed instance (DefaultInstance) of a pipeline that has no other
// instance behaves as Table does. A Table from before instances is
// upgraded by the sink (add the column instance, default DefaultInstance,
// and the key (pipeline_id, target, instance)); its rows become the
// default instance's.
type Instances struct {
	d                                        Dialect
	name                                     string
	create, read, lock, ensure, claim, store string
}

// NewInstances returns the per-instance checkpoint table name (quoted,
// possibly schema-qualified) spelled in dialect d, which must spell an
// insert-if-absent as INSERT … ON CONFLICT (empty EnsureRow), as
// PostgreSQL and SQLite do.
func NewInstances(d Dialect, name string) (*Instances, error) {
	if d.EnsureRow != "" {
		return nil, fmt.Errorf("%w: %s: checkpoint instances need INSERT … ON CONFLICT", flightline.ErrInvalidInput, d.Name)
	}
	p := d.Placeholder
	t := &Instances{d: d, name: name}
	t.create = `CREATE TABLE IF NOT EXISTS ` + name + ` (
		pipeline_id ` + d.Text + ` NOT NULL,
		target      ` + d.Text + ` NOT NULL DEFAULT '',
		instance    ` + d.Text + ` NOT NULL DEFAULT '',
		checkpoint  ` + d.Blob + `,
		epoch       ` + d.Int + ` NOT NULL DEFAULT 0,
		updated_at  ` + d.Timestamp + ` DEFAULT ` + d.Now + `,
		PRIMARY KEY (pipeline_id, target, instance))`
	all := ` WHERE pipeline_id = ` + p(1) + ` AND target = ` + p(2)
	one := all + ` AND instance = ` + p(3)
	t.read = `SELECT instance, epoch, checkpoint FROM ` + name + all + ` ORDER BY instance`
	t.lock = t.read
	if d.ForUpdate != "" {
		t.lock += " " + d.ForUpdate
	}
	t.ensure = `INSERT INTO ` + name + ` (pipeline_id, target, instance, epoch) VALUES (` + p(1) + `, ` + p(2) + `, ` + p(3) + `, 0)
		ON CONFLICT (pipeline_id, target, instance) DO NOTHING`
	t.claim = `UPDATE ` + name + ` SET epoch = epoch + 1, updated_at = ` + d.Now + one
	t.store = `UPDATE ` + name + ` SET checkpoint = ` + p(1) + `, updated_at = ` + d.Now +
		` WHERE pipeline_id = ` + p(2) + ` AND target = ` + p(3) + ` AND instance = ` + p(4) + ` AND epoch = ` + p(5)
	return t, nil
}

// Name returns the table's (quoted) name.
func (t *Instances) Name() string { return t.name }

// CreateSQL returns the CREATE TABLE IF NOT EXISTS statement of the table.
func (t *Instances) CreateSQL() string { return t.create }

// row is one instance's row.
type row struct {
	instance string
	epoch    int64
	cp       []byte
}

func (t *Instances) rows(ctx context.Context, c RowsConn, q, pipeline, target string) ([]row, error) {
	var rs []row
	err := c.Query(ctx, q, func(scan func(...any) error) error {
		var r row
		if err := scan(&r.instance, &r.epoch, &r.cp); err != nil {
			return err
		}
		rs = append(rs, r)
		return nil
	}, pipeline, target)
	return rs, err
}

// merge returns the checkpoint over rows: nil when none has one, the one
// checkpoint when one has, else the per-key maximum, which needs all of
// them to be Positions.
func merge(pipeline, target string, rs []row) ([]byte, error) {
	cps := make([][]byte, len(rs))
	for i, r := range rs {
		cps[i] = r.cp
	}
	cp, err := checkpoint.MergeAll(cps...)
	if err != nil {
		return nil, fmt.Errorf("%w: pipeline %q target %q has several instances with checkpoints and one is opaque (not Positions): cannot merge", flightline.ErrInvalidInput, pipeline, target)
	}
	return cp, nil
}

// Read returns the checkpoint of (pipeline, target) merged over its
// instances: nil when there is none, or no table yet. It neither locks nor
// fences.
func (t *Instances) Read(ctx context.Context, c RowsConn, pipeline, target string) ([]byte, error) {
	rs, err := t.rows(ctx, c, t.read, pipeline, target)
	switch {
	case err != nil && t.d.IsMissingTable != nil && t.d.IsMissingTable(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%s: read checkpoint of pipeline %q target %q: %w", t.d.Name, pipeline, target, err)
	}
	return merge(pipeline, target, rs)
}

// Ensure creates the row of (pipeline, target, instance) at epoch 0 unless
// it exists (autocommit, before Claim).
func (t *Instances) Ensure(ctx context.Context, c Conn, pipeline, target, instance string) error {
	var err error
	for range 3 { // racing inserts of one new key: the loser finds the row
		if _, err = c.Exec(ctx, t.ensure, pipeline, target, instance); err == nil || t.d.IsDuplicate == nil || !t.d.IsDuplicate(err) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("%s: create checkpoint row of pipeline %q target %q instance %q: %w", t.d.Name, pipeline, target, instance, err)
	}
	return nil
}

// Lease is what a writer holds after a claim: its instance's epoch and
// the merged positions it resumed from. It is a value; Lock and Advance
// only read it.
type Lease struct {
	Pipeline, Target, Instance string
	Epoch                      int64
	// base is the merged checkpoint at the claim as Positions (nil when
	// empty or opaque): the positions no other instance may have moved.
	base checkpoint.Positions
}

// Claim raises the epoch of the instance's row, which fences every earlier
// writer of that instance (and no other), inside the caller's transaction
// (which the caller commits), and returns the lease and the checkpoint
// merged over the pipeline's instances. The row must exist (Ensure).
func (t *Instances) Claim(ctx context.Context, c RowsConn, pipeline, target, instance string) (*Lease, []byte, error) {
	n, err := c.Exec(ctx, t.claim, pipeline, target, instance)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: claim pipeline %q target %q instance %q: %w", t.d.Name, pipeline, target, instance, err)
	}
	if n == 0 {
		return nil, nil, fmt.Errorf("%w: %s: claim pipeline %q target %q instance %q: no checkpoint row (Ensure first)", flightline.ErrConflict, t.d.Name, pipeline, target, instance)
	}
	rs, err := t.rows(ctx, c, t.read, pipeline, target)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: claim pipeline %q target %q instance %q: %w", t.d.Name, pipeline, target, instance, err)
	}
	l := &Lease{Pipeline: pipeline, Target: target, Instance: instance, Epoch: -1}
	for _, r := range rs {
		if r.instance == instance {
			l.Epoch = r.epoch
		}
	}
	if l.Epoch < 0 {
		return nil, nil, fmt.Errorf("%w: %s: checkpoint row of pipeline %q target %q instance %q vanished while claimed", flightline.ErrConflict, t.d.Name, pipeline, target, instance)
	}
	cp, err := merge(pipeline, target, rs)
	if err != nil {
		return nil, nil, err
	}
	l.base, _ = checkpoint.Parse(cp)
	return l, cp, nil
}

// check finds the lease's row in rs and refuses a writer whose instance
// was claimed since (ErrFenced; callers run it before anything else, so
// fencing wins over replay). It returns the lease's row and the checkpoint
// merged over rs.
func (t *Instances) check(l *Lease, rs []row) (own row, merged []byte, err error) {
	found := false
	for _, r := range rs {
		if r.instance == l.Instance {
			own, found = r, true
		}
	}
	switch {
	case !found:
		return row{}, nil, fmt.Errorf("%w: checkpoint row of pipeline %q target %q instance %q is gone", flightline.ErrFenced, l.Pipeline, l.Target, l.Instance)
	case own.epoch != l.Epoch:
		return row{}, nil, &FencedError{Pipeline: l.Pipeline, Target: l.Target, Instance: l.Instance, Epoch: l.Epoch, Current: own.epoch}
	}
	merged, err = merge(l.Pipeline, l.Target, rs)
	return own, merged, err
}

// moved returns a key of cp that an instance other than the lease's moved
// past the lease's base since the claim, or "" (checkpoint.Moved, the
// check the Delta sink makes too).
func (l *Lease) moved(rs []row, cp []byte) (key string, at, base int64) {
	pos, err := checkpoint.Parse(cp)
	if err != nil {
		return "", 0, 0 // opaque: one instance only (merge refuses more)
	}
	var others checkpoint.Positions
	for _, r := range rs {
		if r.instance == l.Instance || r.cp == nil {
			continue
		}
		if o, err := checkpoint.Parse(r.cp); err == nil {
			others = checkpoint.Merge(others, o)
		}
	}
	key, at, base, _ = checkpoint.Moved(l.base, others, pos)
	return key, at, base
}

// MovedError is the flightline.ErrConflict of a writer whose batch names a
// key another instance moved since the writer's claim: re-open (claim
// again) and resume from the merged checkpoint.
type MovedError struct {
	Pipeline, Target, Instance string
	Key                        string
	At, Base                   int64 // the key's position now, and at the claim
}

func (e *MovedError) Error() string {
	return fmt.Sprintf("%v: pipeline %q target %q: key %q was moved to %d by another instance since instance %q claimed it at %d; re-open and resume from the merged checkpoint",
		flightline.ErrConflict, e.Pipeline, e.Target, e.Key, e.At, e.Instance, e.Base)
}

// Unwrap makes errors.Is(err, flightline.ErrConflict) hold.
func (e *MovedError) Unwrap() error { return flightline.ErrConflict }

// Lock reads the rows of (pipeline, target) first in a write transaction,
// without locking them. It fails with ErrFenced when the lease's instance
// was claimed since, before it looks at the checkpoint (fencing wins over
// replay); replay is true when cp is covered by the merged checkpoint (the
// caller writes nothing, rolls back and acks); it fails with a MovedError
// (ErrConflict) when cp names a key another instance moved since the claim.
// last is the merged checkpoint (for checkpoint.Replayed).
func (t *Instances) Lock(ctx context.Context, c RowsConn, l *Lease, cp []byte) (last []byte, replay bool, err error) {
	rs, err := t.rows(ctx, c, t.read, l.Pipeline, l.Target)
	if err != nil {
		return nil, false, fmt.Errorf("%s: read checkpoint of pipeline %q target %q: %w", t.d.Name, l.Pipeline, l.Target, err)
	}
	_, last, err = t.check(l, rs)
	if err != nil {
		return nil, false, err
	}
	if checkpoint.Replayed(last, cp) {
		return last, true, nil
	}
	if k, at, base := l.moved(rs, cp); k != "" {
		return nil, false, &MovedError{Pipeline: l.Pipeline, Target: l.Target, Instance: l.Instance, Key: k, At: at, Base: base}
	}
	return last, false, nil
}

// Advance locks the rows of (pipeline, target) in instance order, checks
// again what Lock checked (ErrFenced; a MovedError for a key another
// instance moved since the claim, which now includes a replay that another
// instance's commit made of this batch since Lock), and stores
// checkpoint.Next(own, cp) in the instance's row with a compare-and-set on
// its epoch. cp is what this commit adds (the fold of its new batches'
// checkpoints only, never the merged one: an instance's row holds the
// positions it wrote). Run it last in the write transaction, after the
// data; on an error the caller rolls back.
func (t *Instances) Advance(ctx context.Context, c RowsConn, l *Lease, cp []byte) error {
	rs, err := t.rows(ctx, c, t.lock, l.Pipeline, l.Target)
	if err != nil {
		return fmt.Errorf("%s: lock checkpoints of pipeline %q target %q: %w", t.d.Name, l.Pipeline, l.Target, err)
	}
	own, _, err := t.check(l, rs)
	if err != nil {
		return err
	}
	if k, at, base := l.moved(rs, cp); k != "" {
		return &MovedError{Pipeline: l.Pipeline, Target: l.Target, Instance: l.Instance, Key: k, At: at, Base: base}
	}
	n, err := c.Exec(ctx, t.store, checkpoint.Next(own.cp, cp), l.Pipeline, l.Target, l.Instance, l.Epoch)
	if err != nil {
		return fmt.Errorf("%s: update checkpoint of pipeline %q target %q instance %q: %w", t.d.Name, l.Pipeline, l.Target, l.Instance, err)
	}
	if n == 0 {
		return &FencedError{Pipeline: l.Pipeline, Target: l.Target, Instance: l.Instance, Epoch: l.Epoch, Current: -1}
	}
	return nil
}
