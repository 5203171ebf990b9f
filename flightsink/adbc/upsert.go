package adbc

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"

	fadbc "github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/internal/changes"
)

// ModeUpsert goes through a stage: the last change of each key of the
// batch, reduced in Go (changes.Keys, changes.Last), is ingested into a
// temporary table, then, in the batch's transaction,
//
//	DELETE FROM target WHERE EXISTS (SELECT 1 FROM stage WHERE stage.k = target.k …)
//	INSERT INTO target (cols) SELECT cols FROM stage WHERE op = 'upsert'
//	DROP TABLE stage
//
// Plain SQL that PostgreSQL, SQLite, DuckDB and SQLite-backed Flight SQL
// servers read alike, with no MERGE and no ON CONFLICT, so the table needs
// no unique constraint on the key: a key's rows are deleted, then its last
// version inserted. The stage is created and dropped inside the
// transaction, whose DDL is transactional on those databases, so it never
// outlives it (a rollback drops it too). Not so on Snowflake, where DDL
// commits the open transaction: its own sink is the way there.

// stageTable is the temporary table of a batch's changes.
const stageTable = "__flightline_stage"

// stageOp is the stage's column beyond the data's: opDelete or opUpsert.
const (
	stageOp  = "__flightline_op"
	opDelete = "delete"
	opUpsert = "upsert"
)

// reduce splits rec (a batch of changes) into its data columns (the
// table's: change columns dropped) and the stage: the rows of each key's
// last change, with stageOp, every column nullable (a delete's non-key
// columns may be null whatever the table says). It refuses, before any
// I/O, a missing key column (ErrSchemaMismatch), a null key or an _op
// that is not insert, update or delete (ErrInvalidInput). The caller
// releases data and stage.
func (s *Sink) reduce(rec arrow.RecordBatch) (data, stage arrow.RecordBatch, err error) {
	d, op, err := changes.Split(rec)
	if err != nil {
		return nil, nil, fmt.Errorf("adbc sink: %w", err)
	}
	rows, err := s.lastChanges(d, op)
	if err != nil {
		d.Release()
		return nil, nil, fmt.Errorf("adbc sink: %w", err)
	}
	st, err := s.stage(d, op, rows)
	if err != nil {
		d.Release()
		return nil, nil, fmt.Errorf("adbc sink: last change per key: %w", err)
	}
	return d, st, nil
}

// lastChanges checks op and data's keys and returns the rows of each key's
// last change (changes.Last).
func (s *Sink) lastChanges(data arrow.RecordBatch, op *array.String) ([]int, error) {
	if err := changes.Check(op); err != nil {
		return nil, err
	}
	idx, err := changes.KeyColumns(data.Schema(), s.keyCols)
	if err != nil {
		return nil, err
	}
	keys, err := changes.Keys(data, idx)
	if err != nil {
		return nil, err
	}
	return changes.Last(keys), nil
}

// stage returns data's rows (rows of it) with stageOp, every column
// nullable.
func (s *Sink) stage(data arrow.RecordBatch, op *array.String, rows []int) (arrow.RecordBatch, error) {

	fields := make([]arrow.Field, 0, data.NumCols()+1)
	for _, f := range data.Schema().Fields() {
		fields = append(fields, arrow.Field{Name: f.Name, Type: f.Type, Nullable: true})
	}
	fields = append(fields, arrow.Field{Name: stageOp, Type: arrow.BinaryTypes.String, Nullable: true})
	cols := make([]arrow.Array, 0, len(fields))
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	if len(rows) == int(data.NumRows()) { // no key changed twice: every row
		for _, c := range data.Columns() {
			c.Retain()
			cols = append(cols, c)
		}
	} else {
		ib := array.NewInt64Builder(s.mem)
		for _, r := range rows {
			ib.Append(int64(r))
		}
		take := ib.NewArray()
		ib.Release()
		defer take.Release()
		ctx := compute.WithAllocator(context.Background(), s.mem)
		for _, c := range data.Columns() {
			t, err := compute.TakeArray(ctx, c, take)
			if err != nil {
				return nil, err
			}
			cols = append(cols, t)
		}
	}
	ob := array.NewStringBuilder(s.mem)
	for _, r := range rows {
		if changes.IsDelete(op, r) {
			ob.Append(opDelete)
		} else {
			ob.Append(opUpsert)
		}
	}
	cols = append(cols, ob.NewArray())
	ob.Release()
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(len(rows))), nil
}

// apply writes stage (from reduce) to the target in the open transaction:
// sc is the data's schema, whose columns are the ones inserted.
func (w *writer) apply(ctx context.Context, sc *arrow.Schema, stage arrow.RecordBatch) error {
	if stage.NumRows() == 0 {
		return nil
	}
	if _, err := w.c.IngestTemp(ctx, stageTable, stage); err != nil {
		return fmt.Errorf("adbc sink: stage the changes for %s: %w", w.target, err)
	}
	st, tn := fadbc.Quote(stageTable), fadbc.Quote(w.target.Name)
	match := make([]string, len(w.s.keyCols))
	for i, k := range w.s.keyCols {
		q := fadbc.Quote(k)
		match[i] = st + "." + q + " = " + tn + "." + q
	}
	cols := make([]string, sc.NumFields())
	for i, f := range sc.Fields() {
		cols[i] = fadbc.Quote(f.Name)
	}
	list := strings.Join(cols, ", ")
	for _, q := range []string{
		// The target is named by its table name alone inside the subquery:
		// the name a qualified table is exposed under.
		"DELETE FROM " + w.target.Quoted() + " WHERE EXISTS (SELECT 1 FROM " + st + " WHERE " + strings.Join(match, " AND ") + ")",
		"INSERT INTO " + w.target.Quoted() + " (" + list + ") SELECT " + list + " FROM " + st + " WHERE " + fadbc.Quote(stageOp) + " = '" + opUpsert + "'",
		"DROP TABLE " + st,
	} {
		if _, err := w.c.Exec(ctx, q); err != nil {
			return fmt.Errorf("adbc sink: apply changes to %s: %w", w.target, err)
		}
	}
	return nil
}
