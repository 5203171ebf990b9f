package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
)

// Compaction (issue 32): a table of compactFiles small files of
// compactRows generator orders each, as a streaming sink leaves it.
const (
	compactFiles = 200
	compactRows  = 2_000
)

// smallFileTable writes the table with compaction off and returns its
// directory and the sum of its data files' sizes.
func smallFileTable(b *testing.B, dir string) (string, int64) {
	b.Helper()
	ctx := context.Background()
	mem := memory.NewGoAllocator()
	s, err := sinkdelta.New(ctx, sinkdelta.Config{URI: dir, Compaction: "off", Vacuum: "off"})
	if err != nil {
		b.Fatal(err)
	}
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range int64(compactFiles) {
		rec := flightsrc.GenerateOrders(mem, i*compactRows, (i+1)*compactRows)
		err := w.WriteBatch(ctx, rec, checkpoint.Positions{"o/0": (i + 1) * compactRows}.Encode())
		rec.Release()
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	st, _ := objstore.Open(ctx, dir, nil)
	snap, err := deltalog.NewTable(st, nil).Snapshot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, f := range snap.Files {
		size += f.Size
	}
	return dir, size
}

func copyDir(b *testing.B, from, to string) {
	b.Helper()
	if out, err := exec.Command("cp", "-r", from, to).CombinedOutput(); err != nil {
		b.Fatalf("cp: %v %s", err, out)
	}
}

// BenchmarkDeltaCompaction: MB/s of data files rewritten (input Parquet
// bytes) by the sink's compaction (Optimize: read, rewrite into one file
// per 32 MiB bin, commit) against pqarrow reading the same files into one
// table and writing it as one Snappy file (no commit). Each op compacts a
// fresh copy of the 200-file table (the copy is not timed).
//
//	go test -run '^$' -bench 'DeltaCompaction$' -benchtime 3x ./bench/
func BenchmarkDeltaCompaction(b *testing.B) {
	tmpl, size := smallFileTable(b, filepath.Join(b.TempDir(), "small"))
	opt := side{"flightline-optimize", func(b *testing.B) {
		ctx := context.Background()
		for i := range b.N {
			b.StopTimer()
			dir := filepath.Join(b.TempDir(), fmt.Sprint("t", i))
			copyDir(b, tmpl, dir)
			s, err := sinkdelta.New(ctx, sinkdelta.Config{URI: dir})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			res, err := s.Optimize(ctx, "")
			if err != nil || res.FilesRemoved != compactFiles {
				b.Fatalf("optimize: %+v %v", res, err)
			}
		}
	}}
	pq := side{"pqarrow-rewrite", func(b *testing.B) {
		ctx := context.Background()
		mem := memory.NewGoAllocator()
		st, _ := objstore.Open(ctx, tmpl, nil)
		snap, err := deltalog.NewTable(st, nil).Snapshot(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for range b.N {
			var recs []arrow.RecordBatch
			var sc *arrow.Schema
			for _, f := range snap.SortedFiles() {
				data, err := os.ReadFile(filepath.Join(tmpl, f.Path))
				if err != nil {
					b.Fatal(err)
				}
				pf, err := file.NewParquetReader(bytes.NewReader(data))
				if err != nil {
					b.Fatal(err)
				}
				fr, _ := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 64 << 10}, mem)
				tbl, err := fr.ReadTable(ctx)
				if err != nil {
					b.Fatal(err)
				}
				sc = tbl.Schema()
				tr := array.NewTableReader(tbl, 64<<10)
				for tr.Next() {
					r := tr.RecordBatch()
					r.Retain()
					recs = append(recs, r)
				}
				tr.Release()
				tbl.Release()
				pf.Close()
			}
			all := array.NewTableFromRecords(sc, recs)
			var buf bytes.Buffer
			props := parquet.NewWriterProperties(parquet.WithAllocator(mem), parquet.WithCompression(compress.Codecs.Snappy))
			if err := pqarrow.WriteTable(all, &buf, 1<<20, props, pqarrow.DefaultWriterProps()); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(b.TempDir(), "out.parquet"), buf.Bytes(), 0o644); err != nil {
				b.Fatal(err)
			}
			all.Release()
			for _, r := range recs {
				r.Release()
			}
		}
	}}
	interleave(b, comparison{unit: "MB/s", perOp: float64(size) / 1e6, ratios: []pair{{"flightline-optimize", "pqarrow-rewrite"}}}, opt, pq)
}

// BenchmarkDeltaReadCompacted: rows/s of a full-table read with delta-rs
// of the 200-file table against the same table after Optimize (a few
// files), each read in its own Python process timed from inside
// (bench/delta_read_peer.py; skipped without FLIGHTLINE_PYTHON).
//
//	go test -run '^$' -bench 'DeltaReadCompacted$' -benchtime 1x ./bench/
func BenchmarkDeltaReadCompacted(b *testing.B) {
	py := os.Getenv("FLIGHTLINE_PYTHON")
	if py == "" {
		b.Skip("delta-rs: FLIGHTLINE_PYTHON unset (integration/services/services.sh up python)")
	}
	small, _ := smallFileTable(b, filepath.Join(b.TempDir(), "small"))
	big := filepath.Join(b.TempDir(), "compacted")
	copyDir(b, small, big)
	s, err := sinkdelta.New(context.Background(), sinkdelta.Config{URI: big})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Optimize(context.Background(), ""); err != nil {
		b.Fatal(err)
	}
	const reps = 5
	read := func(dir string) func(b *testing.B) {
		return func(b *testing.B) {
			var rows int64
			var secs float64
			for range b.N {
				out, err := exec.Command(py, "delta_read_peer.py", dir, fmt.Sprint(reps)).Output()
				if err != nil {
					b.Fatalf("delta_read_peer.py: %v %s", err, out)
				}
				var r struct {
					Rows    int64   `json:"rows"`
					Files   int     `json:"files"`
					Seconds float64 `json:"seconds"`
				}
				if err := json.Unmarshal(out, &r); err != nil {
					b.Fatal(err)
				}
				rows += r.Rows
				secs += r.Seconds
				b.ReportMetric(float64(r.Files), "files")
			}
			measured(b, float64(rows)/secs, nil)
		}
	}
	interleave(b, comparison{unit: "rows/s", perOp: reps * compactFiles * compactRows, external: []string{"delta-rs-compacted", "delta-rs-small-files"},
		ratios: []pair{{"delta-rs-compacted", "delta-rs-small-files"}}},
		side{"delta-rs-compacted", read(big)}, side{"delta-rs-small-files", read(small)})
}
