package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/config"
)

// queryCommand answers SQL over the embedded local tables of the config
// file's pipelines (config.File.Query): DuckDB, in memory, with the data
// directory's flightline.duckdb attached read-only and made the default
// database, so `select count(*) from orders` names pipeline orders' table.
func queryCommand(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("query", `query [--config FILE] [--pipeline NAME] [--format table|json|csv] "SQL"`)
	path := configFlag(fs)
	pipeline := fs.String("pipeline", "", "the pipeline whose local table the query reads (default: every pipeline's)")
	format := fs.String("format", "table", "output: table (aligned text), json (an array of objects) or csv (with a header)")
	lib := fs.String("duckdb-lib", "", "path of DuckDB's libduckdb.so (default: $FLIGHTLINE_DUCKDB_LIB, beside the binary, or the set-up's cache)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: query: want one SQL statement as the argument, e.g. flightline query \"select count(*) from orders\"", flightline.ErrInvalidInput)
	}
	sql := fs.Arg(0)
	switch *format {
	case "table", "json", "csv":
	default:
		return fmt.Errorf("%w: query: --format %q: want table, json or csv", flightline.ErrInvalidInput, *format)
	}
	cfg, err := config.Load(*path, os.LookupEnv)
	if err != nil {
		return err
	}
	return cfg.Query(ctx, out, sql, config.QueryOptions{Pipeline: *pipeline, Format: *format, DuckDBLib: *lib})
}
