package config

import (
	"context"
	"encoding/csv"
	"encoding/json"

	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/flightline/flightline"
	fadbc "github.com/flightline/flightline/adbc"
	"github.com/flightline/flightline/flightsink/duckdb"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
)

// QueryOptions are what Query reads and how it writes.
type QueryOptions struct {
	Pipeline  string // the pipeline whose local table the query reads; "": every pipeline's
	Format    string // table (aligned text), json (an array of objects) or csv (with a header)
	DuckDBLib string // libduckdb.so; "": $FLIGHTLINE_DUCKDB_LIB, beside the binary, or the set-up's cache
}

// Query answers sql over the embedded local tables of c's pipelines
// (local.go) and writes the result to out in o.Format
// (`flightline query`): DuckDB, in memory, with the data directory's
// flightline.duckdb attached read-only and made the default database, so
// `select count(*) from orders` names pipeline orders' table, and local
// Delta tables (the embedded fallback, or a delta: sink on a local path)
// as views over their active Parquet files. A file with nothing to query
// is an error wrapping flightline.ErrInvalidInput; a pipeline it lacks,
// one wrapping ErrNoPipeline.
func (cfg *File) Query(ctx context.Context, out io.Writer, sql string, o QueryOptions) error {
	// What the query can read: the embedded DuckDB file (pipelines without
	// sink:), and local Delta tables (the embedded fallback, or a delta:
	// sink on a local path) as views over their active Parquet files.
	var attach bool
	var views [][2]string // view name, Delta table directory
	for _, name := range sortedKeys(cfg.pipelines) {
		p := cfg.pipelines[name]
		if o.Pipeline != "" && name != o.Pipeline {
			continue
		}
		switch {
		case p.local && p.sink.kind == "duckdb":
			attach = true
		case p.local:
			views = append(views, [2]string{localTable(p), p.sink.loc})
		case p.sink.kind == "delta" && !strings.Contains(p.sink.loc, "://"):
			views = append(views, [2]string{p.name, p.sink.loc})
		case o.Pipeline != "":
			return fmt.Errorf("%w: query: pipeline %q writes %s (%s), which query does not read: it reads the local tables of pipelines without sink: and local Delta tables", flightline.ErrInvalidInput, o.Pipeline, p.sink.ref(), p.sink.kind)
		}
	}
	if o.Pipeline != "" {
		if _, ok := cfg.pipelines[o.Pipeline]; !ok {
			return fmt.Errorf("%w: query: %s has no pipeline %q", ErrNoPipeline, cfg.path, o.Pipeline)
		}
	}
	if !attach && len(views) == 0 {
		return fmt.Errorf("%w: query: %s has no pipeline without sink: and no local Delta table, so nothing to query", flightline.ErrInvalidInput, cfg.path)
	}
	dbFile := filepath.Join(dataDir(cfg.path), LocalDBName)
	if _, err := os.Stat(dbFile); attach && err != nil {
		if len(views) == 0 {
			return fmt.Errorf("%w: query: %s does not exist yet: run flightline sync first", flightline.ErrNotFound, dbFile)
		}
		attach = false
	}
	db, err := duckdb.OpenMemory(ctx, o.DuckDBLib)
	if err != nil {
		return err
	}
	defer db.Close()
	c, unlock, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	defer c.Close()
	if attach {
		if err := duckdb.Attach(ctx, c, dbFile, "local"); err != nil {
			return err
		}
	}
	for _, v := range views {
		q, err := deltaView(ctx, v[0], v[1])
		if err != nil {
			return err
		}
		if q == "" {
			continue // no data file yet
		}
		if _, err := c.Exec(ctx, q); err != nil {
			return fmt.Errorf("query: view %s over the Delta table %s: %w", v[0], v[1], err)
		}
	}
	r, err := c.Query(ctx, sql)
	if err != nil {
		return err
	}
	defer r.Release()
	switch o.Format {
	case "json":
		return writeJSON(out, r)
	case "csv":
		return writeCSV(out, r)
	}
	return writeTable(out, r)
}

// cell is the text of row i of a as the table and CSV formats print it;
// null is "NULL" in a table and empty in CSV.
func cell(a arrow.Array, i int, null string) string {
	if a.IsNull(i) {
		return null
	}
	return a.ValueStr(i)
}

func writeTable(out io.Writer, r array.RecordReader) error {
	sc := r.Schema()
	rows := [][]string{make([]string, sc.NumFields())}
	for j, f := range sc.Fields() {
		rows[0][j] = f.Name
	}
	for r.Next() {
		rec := r.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			row := make([]string, rec.NumCols())
			for j := range row {
				row[j] = cell(rec.Column(j), i, "NULL")
			}
			rows = append(rows, row)
		}
	}
	if err := r.Err(); err != nil {
		return err
	}
	width := make([]int, sc.NumFields())
	for _, row := range rows {
		for j, v := range row {
			width[j] = max(width[j], utf8.RuneCountInString(v))
		}
	}
	var b strings.Builder
	line := func(row []string) {
		for j, v := range row {
			if j > 0 {
				b.WriteString("  ")
			}
			b.WriteString(v)
			if j < len(row)-1 {
				b.WriteString(strings.Repeat(" ", width[j]-utf8.RuneCountInString(v)))
			}
		}
		b.WriteString("\n")
	}
	line(rows[0])
	sep := make([]string, len(width))
	for j, w := range width {
		sep[j] = strings.Repeat("-", w)
	}
	line(sep)
	for _, row := range rows[1:] {
		line(row)
	}
	fmt.Fprintf(&b, "(%d rows)\n", len(rows)-1)
	_, err := io.WriteString(out, b.String())
	return err
}

func writeCSV(out io.Writer, r array.RecordReader) error {
	w := csv.NewWriter(out)
	sc := r.Schema()
	head := make([]string, sc.NumFields())
	for j, f := range sc.Fields() {
		head[j] = f.Name
	}
	if err := w.Write(head); err != nil {
		return err
	}
	for r.Next() {
		rec := r.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			row := make([]string, rec.NumCols())
			for j := range row {
				row[j] = cell(rec.Column(j), i, "")
			}
			if err := w.Write(row); err != nil {
				return err
			}
		}
	}
	if err := r.Err(); err != nil {
		return err
	}
	w.Flush()
	return w.Error()
}

// writeJSON prints the rows as one JSON array of objects, columns in the
// result's order; values as Arrow marshals them to JSON (numbers, strings,
// null, nested lists and objects).
func writeJSON(out io.Writer, r array.RecordReader) error {
	sc := r.Schema()
	names := make([][]byte, sc.NumFields())
	for j, f := range sc.Fields() {
		b, err := json.Marshal(f.Name)
		if err != nil {
			return err
		}
		names[j] = b
	}
	var b []byte
	b = append(b, '[')
	n := 0
	for r.Next() {
		rec := r.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = append(b, "\n  {"...)
			for j := range names {
				if j > 0 {
					b = append(b, ", "...)
				}
				v, err := json.Marshal(rec.Column(j).GetOneForMarshal(i))
				if err != nil {
					return fmt.Errorf("query: column %s: %w", sc.Field(j).Name, err)
				}
				b = append(append(append(b, names[j]...), ": "...), v...)
			}
			b = append(b, '}')
		}
	}
	if err := r.Err(); err != nil {
		return err
	}
	if n > 0 {
		b = append(b, '\n')
	}
	b = append(b, "]\n"...)
	_, err := out.Write(b)
	return err
}

// deltaView is the CREATE TEMP VIEW statement of a view name over the
// local Delta table in dir: its active Parquet files (the snapshot's add
// actions, read with Flightline's Delta log reader) read by DuckDB's
// read_parquet, Hive partition directories as columns. "" when the table
// has no data file yet. A table with features the log reader does not
// read (deletion vectors, column mapping) is refused.
func deltaView(ctx context.Context, name, dir string) (string, error) {
	if _, err := os.Stat(filepath.Join(dir, "_delta_log")); err != nil {
		return "", nil // not written yet
	}
	store, err := objstore.NewLocal(dir)
	if err != nil {
		return "", err
	}
	snap, err := deltalog.NewTable(store, nil).Snapshot(ctx)
	if err != nil {
		return "", fmt.Errorf("query: Delta table %s: %w", dir, err)
	}
	if err := snap.CheckRead(); err != nil {
		return "", fmt.Errorf("query: Delta table %s: %w", dir, err)
	}
	files := snap.SortedFiles()
	if len(files) == 0 {
		return "", nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("CREATE OR REPLACE TEMP VIEW " + fadbc.Quote(name) + " AS SELECT * FROM read_parquet([")
	for i, f := range files {
		rel, err := url.PathUnescape(f.Path)
		if err != nil {
			return "", fmt.Errorf("query: Delta table %s: file %q: %w", dir, f.Path, err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + strings.ReplaceAll(filepath.Join(abs, filepath.FromSlash(rel)), "'", "''") + "'")
	}
	b.WriteString("], hive_partitioning = true, union_by_name = true)")
	return b.String(), nil
}
