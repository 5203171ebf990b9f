package objsink_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/flightsink"
	"github.com/flightline/flightline/flightsink/objsink"
	"github.com/flightline/flightline/flightsink/sinktest"
)

// partIDs reads the id column of every part file of p's target, as a
// reader listing the directory would: names starting with _ or . skipped.
func partIDs(t *testing.T, root string, f objsink.Format, p flightsink.Pipeline) []int64 {
	target, err := objsink.Target(p)
	require.NoError(t, err)
	var ids []int64
	for _, name := range listParts(t, filepath.Join(root, target)) {
		base := filepath.Base(name)
		require.True(t, strings.HasSuffix(base, "."+f.Ext()), "unexpected file %s", name)
		data, err := os.ReadFile(name)
		require.NoError(t, err)
		switch f {
		case objsink.Parquet:
			ids = append(ids, parquetIDs(t, data)...)
		case objsink.JSONL:
			sc := bufio.NewScanner(bytes.NewReader(data))
			for sc.Scan() {
				var row struct{ ID *int64 }
				require.NoError(t, json.Unmarshal(sc.Bytes(), &row))
				require.NotNil(t, row.ID)
				ids = append(ids, *row.ID)
			}
		case objsink.CSV:
			recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
			require.NoError(t, err)
			require.Equal(t, "id", recs[0][0], "every CSV file starts with its header")
			for _, r := range recs[1:] {
				id, err := strconv.ParseInt(r[0], 10, 64)
				require.NoError(t, err)
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// listParts lists the files under dir that a reader picks up: recursively,
// skipping names (files and directories) that start with _ or . .
func listParts(t *testing.T, dir string) []string {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if b := d.Name(); p != dir && (strings.HasPrefix(b, "_") || strings.HasPrefix(b, ".")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

func parquetIDs(t *testing.T, data []byte) []int64 {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	require.NoError(t, err)
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, mem)
	require.NoError(t, err)
	tbl, err := fr.ReadTable(context.Background())
	require.NoError(t, err)
	defer tbl.Release()
	var ids []int64
	for _, ch := range tbl.Column(0).Data().Chunks() {
		ids = append(ids, ch.(*array.Int64).Int64Values()...)
	}
	return ids
}

func conformance(t *testing.T, cfg objsink.Config) {
	root := t.TempDir()
	sinktest.Run(t, sinktest.Harness{
		Guarantee: flightsink.ExactlyOnce,
		Group:     true,
		NewSink: func(t *testing.T) flightsink.Sink {
			b, err := objsink.NewLocal(root)
			require.NoError(t, err)
			cfg.Backend, cfg.Name = b, "file sink"
			s, err := objsink.New(context.Background(), cfg)
			require.NoError(t, err)
			return s
		},
		IDs: func(t *testing.T, p flightsink.Pipeline) []int64 { return partIDs(t, root, cfg.Format, p) },
	})
}

func TestConformanceParquet(t *testing.T) { conformance(t, objsink.Config{Format: objsink.Parquet}) }
func TestConformanceJSONL(t *testing.T)   { conformance(t, objsink.Config{Format: objsink.JSONL}) }
func TestConformanceCSV(t *testing.T)     { conformance(t, objsink.Config{Format: objsink.CSV}) }

// Partitioned by the suite's name column: a part file per row (and one
// directory of nulls), so every commit publishes many files.
func TestConformancePartitioned(t *testing.T) {
	conformance(t, objsink.Config{Format: objsink.Parquet, PartitionBy: "name"})
}
