package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/flightsink"
	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/flightsrc"
	srcdelta "github.com/flightline/flightline/flightsrc/delta"
	"github.com/flightline/flightline/internal/deltalog"
	"github.com/flightline/flightline/internal/objstore"
)

type deltaRows struct {
	Version int64  `json:"version"`
	Files   int    `json:"files"`
	Rows    int64  `json:"rows"`
	Digest  string `json:"digest"`
}

func rowsWithDeltaRs(t *testing.T, uri string, storage objstore.Options, version ...string) deltaRows {
	t.Helper()
	out := deltaRs(t, storage, "delta_rows.py", append([]string{uri}, version...)...)
	var r deltaRows
	require.NoErrorf(t, json.Unmarshal(out, &r), "%s", out)
	t.Logf("delta-rs: %s", strings.TrimSpace(string(out)))
	return r
}

// TestIntegrationDeltaCompactedReadsSame: delta-rs reads the same rows,
// record by record (a digest of every row of every type), from a table
// of small files and from the table Optimize compacted, and from the
// version before the compaction after a cleanup that keeps it. On local
// disk and S3.
func TestIntegrationDeltaCompactedReadsSame(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	for _, loc := range deltaLocations {
		t.Run(loc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			storage := loc.storage(t)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			uri := loc.uri(t, "compact")
			s, err := sinkdelta.New(ctx, sinkdelta.Config{URI: uri, Storage: storage, CheckpointInterval: 5, Compaction: "off", TargetFileSize: 64 << 10}, sinkdelta.Allocator(mem))
			require.NoError(t, err)
			w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "compact"})
			require.NoError(t, err)
			const batches, per = 24, 200
			for b := int64(0); b < batches; b++ {
				rec := richBatch(t, mem, b*per, b*per+per)
				require.NoError(t, w.WriteBatch(ctx, rec, checkpoint.Positions{"rich/0": b*per + per}.Encode()))
				rec.Release()
			}
			require.NoError(t, w.Close(ctx))
			before := rowsWithDeltaRs(t, uri, storage)
			require.Equal(t, batches, before.Files)
			res, err := s.Optimize(ctx, "")
			require.NoError(t, err)
			require.Equal(t, batches, res.FilesRemoved)
			after := rowsWithDeltaRs(t, uri, storage)
			require.Less(t, after.Files, before.Files)
			require.Equal(t, int64(batches*per), after.Rows)
			require.Equal(t, before.Digest, after.Digest, "the same rows, record by record")
			c := checkWithDeltaRs(t, uri, storage, "compact", "compact")
			require.Equal(t, int64(batches), *c.Txn, "the pipeline's txn survives the compaction")
			// A cleanup with the default retentions deletes nothing a
			// retained version needs: the version before the compaction
			// still reads the same.
			vr, err := s.Vacuum(ctx, "", false)
			require.NoError(t, err)
			require.Empty(t, vr.DataFiles)
			old := rowsWithDeltaRs(t, uri, storage, fmt.Sprint(before.Version))
			require.Equal(t, before.Digest, old.Digest, "the version before the compaction reads the same")
		})
	}
}

// TestIntegrationDeltaCompactionKill9 kill -9s a sink compacting in the
// background (tiny target file size, a compaction every few commits) and,
// beside it, `flightline delta optimize` and `flightline delta vacuum`
// processes, at random points; then a bounded run finishes and delta-rs
// must find every id exactly once. A few kills in make test;
// FLIGHTLINE_CHAOS=1 makes it 100.
func TestIntegrationDeltaCompactionKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	kills := 6
	if os.Getenv("FLIGHTLINE_CHAOS") == "1" {
		kills = 100
	}
	bin := flightlineBin(t)
	began := time.Now()
	uri := t.TempDir() + "/compact_kill"
	const pipeline = "ckill"
	sinkSpec := "delta:" + uri + "?checkpoint_interval=4&target_file_size=256KiB&compact_min_files=3"
	args := func(rows int64) []string {
		return []string{"run", "--source", fmt.Sprintf("generator:?rows=%d&batch_rows=500&interval=2ms", rows), "--sink", sinkSpec,
			"--stream", "orders", "--pipeline", pipeline, "--log-level", "warn"}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 32))
	// How long an optimize and a vacuum run take here, so that their kills
	// land inside the work: measured on the table of a first run.
	timed := func(args ...string) time.Duration {
		t0 := time.Now()
		q := start(t, bin, args...)
		if err := <-q.doneOnce(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, q.log.String())
		}
		return time.Since(t0)
	}
	optimize := []string{"delta", "optimize", "--target-file-size", "256KiB", uri}
	// The cleanup keeps files written in the last 30 s: a compaction's
	// file is committed within milliseconds of being written.
	vacuum := []string{"delta", "vacuum", "--log-retention", "1ms", "--file-retention", "30s", uri}
	first := start(t, bin, args(0)...)
	time.Sleep(time.Second)
	first.kill()
	optTook, vacTook := timed(optimize...), timed(vacuum...)
	var optimizes, vacuums int // runs that finished before their kill
	for i := range kills {
		p := start(t, bin, args(0)...)
		time.Sleep(time.Duration(300+rng.IntN(500)) * time.Millisecond)
		// A one-off compaction and a cleanup race the sink's own
		// compaction; each is killed at a random point of its run too.
		opt := start(t, bin, optimize...)
		vac := start(t, bin, vacuum...)
		killAt := time.Now().Add(time.Duration(rng.Int64N(int64(optTook))))
		vacAt := time.Now().Add(time.Duration(rng.Int64N(int64(vacTook))))
		for _, k := range []struct {
			q  *proc
			at time.Time
			n  *int
		}{{opt, killAt, &optimizes}, {vac, vacAt, &vacuums}} {
			time.Sleep(time.Until(k.at))
			if done, _ := k.q.exited(); done {
				*k.n++
			} else {
				k.q.kill()
			}
		}
		if done, err := p.exited(); done {
			t.Fatalf("run %d exited before its kill (%v):\n%s", i, err, p.log.String())
		}
		p.kill()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := sinkdelta.New(ctx, sinkdelta.Config{URI: uri})
	require.NoError(t, err)
	cp, err := s.Checkpoint(ctx, flightsink.Pipeline{ID: pipeline})
	require.NoError(t, err)
	pos, err := checkpoint.Parse(cp)
	require.NoError(t, err)
	committed := pos["orders/0"]
	require.Positive(t, committed, "the killed runs committed nothing")
	n := committed + 5_000
	final := start(t, bin, args(n)...)
	select {
	case err := <-final.doneOnce():
		require.NoError(t, err, final.log.String())
	case <-ctx.Done():
		t.Fatalf("final run did not finish:\n%s", final.log.String())
	}
	st, err := objstore.Open(ctx, uri, nil)
	require.NoError(t, err)
	tb := deltalog.NewTable(st, nil)
	snap, err := tb.Snapshot(ctx)
	require.NoError(t, err)
	var compactions int
	for v := int64(0); v <= snap.Version; v++ {
		if acts, err := tb.ReadVersion(ctx, v); err == nil && acts[0].CommitInfo["operation"] == "OPTIMIZE" {
			compactions++
		}
	}
	t.Logf("killed %d times (optimize takes %v, vacuum %v here; %d optimize and %d vacuum runs finished before their kill); %d rows committed by then; finishing at %d; %d compaction commits in the log kept, %d active files; %s after the build",
		kills, optTook.Round(time.Millisecond), vacTook.Round(time.Millisecond), optimizes, vacuums, committed, n, compactions, len(snap.Files), time.Since(began).Round(time.Millisecond))
	out := deltaRs(t, nil, "delta_check.py", uri, pipeline, pipeline+"/orders/0")
	t.Logf("delta-rs: %s", strings.TrimSpace(string(out)))
	var c struct {
		deltaCheck
		Operations []string `json:"operations"`
	}
	require.NoError(t, json.Unmarshal(out, &c))
	require.Equal(t, n, c.Rows, "every record exactly once: rows")
	require.Equal(t, n, c.Distinct, "every record exactly once: distinct ids")
	require.Equal(t, int64(0), *c.Min)
	require.Equal(t, n-1, *c.Max)
	require.Equal(t, n, *c.Txn, "txn(pipeline/partition) holds the partition's position")
	// Compactions happened: without them the table would hold a file per
	// batch written (batch_rows=500). The log cannot tell: the vacuums'
	// 1 ms log retention keeps only the versions since the last checkpoint,
	// and the final run may end before its own compaction commits (ci28:
	// 0 OPTIMIZE among the 14 versions kept, 34 active files for 179
	// batches).
	require.Less(t, int64(len(snap.Files)), n/500, "compactions happened: %d active files for %d batches written", len(snap.Files), n/500)
}

// TestIntegrationDeltaSourceAcrossCompaction: Flightline's Delta source,
// a streaming reader of the sink's table, reads across compaction commits
// (the sink's own and Optimize's) and sees each row once: it starts on
// the snapshot of small files, the table is compacted under it, more
// batches come, and it follows the log to the end.
func TestIntegrationDeltaSourceAcrossCompaction(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	uri := t.TempDir() + "/follow"
	s, err := sinkdelta.New(ctx, sinkdelta.Config{URI: uri, TargetFileSize: 1 << 20, CompactMinFiles: 4}, sinkdelta.Allocator(mem))
	require.NoError(t, err)
	const per = 100
	w, _, err := s.Open(ctx, flightsink.Pipeline{ID: "follow"})
	require.NoError(t, err)
	next := int64(0)
	write := func(n int) {
		for range n {
			rec := richBatch(t, mem, next, next+per)
			next += per
			require.NoError(t, w.WriteBatch(ctx, rec, checkpoint.Positions{"f/0": next}.Encode()))
			rec.Release()
		}
	}
	write(3) // fewer than compact_min_files: the snapshot is 3 small files
	src, err := srcdelta.New(ctx, srcdelta.Config{URI: uri, BatchRows: 50, PollInterval: 10 * time.Millisecond}, srcdelta.Allocator(mem))
	require.NoError(t, err)
	streams, err := src.Streams(ctx)
	require.NoError(t, err)
	r, err := src.Read(ctx, flightsrc.ReadRequest{Stream: streams[0].Name})
	require.NoError(t, err)
	seen := map[int64]int{}
	read := func(until int) {
		for len(seen) < until {
			rec, _, err := r.Next(ctx)
			require.NoError(t, err)
			for _, id := range rec.Column(0).(*array.Int64).Int64Values() {
				seen[id]++
			}
			rec.Release()
		}
	}
	read(50)
	write(10) // the sink compacts in the background
	_, err = s.Optimize(ctx, "")
	require.NoError(t, err)
	write(5)
	require.NoError(t, w.Close(ctx))
	read(int(next))
	require.NoError(t, r.Close())
	require.Len(t, seen, int(next))
	for id, n := range seen {
		require.Equalf(t, 1, n, "id %d read %d times", id, n)
	}
	st, _ := objstore.Open(ctx, uri, nil)
	tb := deltalog.NewTable(st, nil)
	snap, err := tb.Snapshot(ctx)
	require.NoError(t, err)
	var compactions int
	for v := int64(0); v <= snap.Version; v++ {
		if acts, err := tb.ReadVersion(ctx, v); err == nil && acts[0].CommitInfo["operation"] == "OPTIMIZE" {
			compactions++
		}
	}
	require.Positive(t, compactions)
	t.Logf("%d rows read once each across %d compaction commits; %d active files", next, compactions, len(snap.Files))
}
