package config

import (
	"errors"
	"net/url"
	"os"
	"path/filepath"

	"github.com/flightline/flightline/flightsink/duckdb"
)

// A pipeline without sink: lands in the embedded local table: a table
// named after the pipeline (its target, when it names one) in the DuckDB
// database flightline.duckdb of the data directory, or, where DuckDB's
// library is not found, a local Delta table DATA_DIR/<table>. Either is an
// ordinary exactly-once sink (duckdb:, delta:). `flightline query` reads it.
//
// The choice is made once per table and kept: a Delta table already there
// stays the destination when DuckDB appears later, so a pipeline's data
// and checkpoint never move.

// DataDirEnv overrides the data directory.
const DataDirEnv = "FLIGHTLINE_DATA_DIR"

// LocalDBName is the embedded DuckDB database's file in the data directory.
const LocalDBName = "flightline.duckdb"

// dataDir is the data directory of the config file at cfgPath:
// $FLIGHTLINE_DATA_DIR, else flightline-data beside the file.
func dataDir(cfgPath string) string {
	if d := os.Getenv(DataDirEnv); d != "" {
		return d
	}
	return filepath.Join(filepath.Dir(cfgPath), "flightline-data")
}

// localTable is the table name of p's embedded local table.
func localTable(p *pipelineConf) string {
	if p.target != "" {
		return p.target
	}
	return p.name
}

// localSink is the endpoint of p's embedded local table.
func localSink(cfgPath string, p *pipelineConf) (*endpointConf, error) {
	dir := dataDir(cfgPath)
	table := localTable(p)
	delta := filepath.Join(dir, table)
	_, derr := os.Stat(filepath.Join(delta, "_delta_log"))
	_, lerr := duckdb.FindLibrary("")
	if derr == nil || errors.Is(lerr, duckdb.ErrNoLibrary) {
		return &endpointConf{section: secSinks, name: "(local " + table + ")", kind: "delta", decl: sinkKinds["delta"].decl,
			loc: delta, q: url.Values{}}, nil
	}
	return &endpointConf{section: secSinks, name: "(local " + table + ")", kind: "duckdb", decl: sinkKinds["duckdb"].decl,
		loc: filepath.Join(dir, LocalDBName), q: url.Values{"table": {table}}}, nil
}
