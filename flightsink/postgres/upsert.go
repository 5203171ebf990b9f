package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/internal/changes"
	"github.com/flightline/flightline/internal/pgarrow"
)

// stageTable is the session's temporary table a batch of changes is copied
// into before it is applied; dropped at commit or rollback.
const stageTable = "pg_temp.__flightline_stage"

// Columns of the stage table beyond the target's.
const (
	stageOp  = "__flightline_op"
	stageSeq = "__flightline_seq"
)

// upsert applies rec as changes by key, inside tx (ModeUpsert): COPY into
// a temporary stage table, then, per key, the last change of the batch:
// DELETE where it is a delete, INSERT … ON CONFLICT DO UPDATE otherwise.
func (w *writer) upsert(ctx context.Context, tx pgx.Tx, rec arrow.RecordBatch) error {
	s := w.s
	data, op, err := changes.Split(rec)
	if err != nil {
		return fmt.Errorf("postgres sink: %w", err)
	}
	defer data.Release()
	if err := changes.Check(op); err != nil {
		return fmt.Errorf("postgres sink: %w", err)
	}
	sc := data.Schema()
	for _, k := range s.key {
		if len(sc.FieldIndices(k)) == 0 {
			return fmt.Errorf("%w: postgres sink: key column %q is not in the batch (columns %s)", flightline.ErrSchemaMismatch, k, fieldNames(sc))
		}
	}
	if err := w.prepare(ctx, tx, data); err != nil {
		return err
	}
	if rec.NumRows() == 0 {
		return nil
	}
	var cols, defs []string
	for i, f := range sc.Fields() {
		q := pgx.Identifier{f.Name}.Sanitize()
		cols = append(cols, q)
		defs = append(defs, q+" "+w.colTypes[i])
	}
	create := "DROP TABLE IF EXISTS " + stageTable + "; CREATE TEMP TABLE " + stageTable[len("pg_temp."):] + " (" +
		strings.Join(defs, ", ") + ", " + stageOp + " text, " + stageSeq + " bigserial) ON COMMIT DROP"
	if _, err := tx.Exec(ctx, create); err != nil {
		return s.wrap(err, "postgres sink %s: stage table for %s", s.server, w.target.Sanitize())
	}
	// The stage's rows: the data columns and _op (null when the batch has
	// none: every row an upsert).
	fields := append(slices.Clone(sc.Fields()), arrow.Field{Name: stageOp, Type: arrow.BinaryTypes.String, Nullable: true})
	var opArr arrow.Array = op
	if op == nil {
		b := array.NewStringBuilder(memory.DefaultAllocator)
		b.AppendNulls(int(rec.NumRows()))
		opArr = b.NewArray()
		b.Release()
		defer opArr.Release()
	}
	arrs := append(slices.Clone(data.Columns()), opArr)
	staged := array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, rec.NumRows())
	defer staged.Release()
	enc, err := pgarrow.NewRowEncoder(staged, append(slices.Clone(w.colOIDs), pgarrow.OIDText))
	if err != nil {
		return err
	}
	cr := pgarrow.NewCopyReader(enc)
	_, err = tx.Conn().PgConn().CopyFrom(ctx, cr, "COPY "+stageTable+" ("+strings.Join(cols, ", ")+", "+stageOp+") FROM STDIN (FORMAT binary)")
	cr.Close() // see writeOnce: CopyFrom may return while still reading
	if err != nil {
		if e := enc.Err(); e != nil {
			return e
		}
		return s.wrap(err, "postgres sink %s: COPY changes for %s", s.server, w.target.Sanitize())
	}
	var keys, match, set []string
	for _, k := range s.key {
		q := pgx.Identifier{k}.Sanitize()
		keys = append(keys, q)
		match = append(match, "t."+q+" = l."+q)
	}
	for _, c := range cols {
		if !slices.Contains(keys, c) {
			set = append(set, c+" = EXCLUDED."+c)
		}
	}
	last := "(SELECT DISTINCT ON (" + strings.Join(keys, ", ") + ") * FROM " + stageTable +
		" ORDER BY " + strings.Join(keys, ", ") + ", " + stageSeq + " DESC) AS l"
	del := "DELETE FROM " + w.target.Sanitize() + " AS t USING " + last + " WHERE " + strings.Join(match, " AND ") +
		" AND l." + stageOp + " = 'delete'"
	if _, err := tx.Exec(ctx, del); err != nil {
		return s.wrap(err, "postgres sink %s: apply deletes to %s", s.server, w.target.Sanitize())
	}
	conflict := " ON CONFLICT (" + strings.Join(keys, ", ") + ") DO NOTHING"
	if len(set) > 0 {
		conflict = " ON CONFLICT (" + strings.Join(keys, ", ") + ") DO UPDATE SET " + strings.Join(set, ", ")
	}
	ins := "INSERT INTO " + w.target.Sanitize() + " (" + strings.Join(cols, ", ") + ") SELECT " + prefixed("l.", cols) +
		" FROM " + last + " WHERE l." + stageOp + " IS DISTINCT FROM 'delete'" + conflict
	if _, err := tx.Exec(ctx, ins); err != nil {
		if sqlState(err) == "42P10" {
			return fmt.Errorf("%w: postgres sink: table %s has no primary key or unique index on exactly (%s), which mode %s needs",
				flightline.ErrSchemaMismatch, w.target.Sanitize(), strings.Join(keys, ", "), ModeUpsert)
		}
		return s.wrap(err, "postgres sink %s: apply upserts to %s", s.server, w.target.Sanitize())
	}
	if _, err := tx.Exec(ctx, "DROP TABLE "+stageTable); err != nil {
		return s.wrap(err, "postgres sink %s: drop stage table", s.server)
	}
	return nil
}

func prefixed(p string, cols []string) string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = p + c
	}
	return strings.Join(out, ", ")
}

func fieldNames(sc *arrow.Schema) string {
	var out []string
	for _, f := range sc.Fields() {
		out = append(out, f.Name)
	}
	return strings.Join(out, ", ")
}
