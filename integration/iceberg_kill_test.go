package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestIntegrationIcebergKill9Kafka: the split kill test's harness (a Kafka
// source without instance_id on a live topic with committed and aborted
// transactions; serve-source, serve-sink and run as three processes, a
// random one kill -9ed and restarted) with the Iceberg sink on a local
// warehouse and its SQLite catalog; pyiceberg's SqlCatalog reads the table
// back, and every committed record must be there exactly once. A few
// kills in make test, 100 under FLIGHTLINE_CHAOS=1.
func TestIntegrationIcebergKill9Kafka(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	kills := killCount(4, 100)
	s := killSink{name: "iceberg", format: "raw", dest: func(t *testing.T, _ context.Context, _ string) killDest {
		py := Need(t, "FLIGHTLINE_PYICEBERG_PYTHON", "python with pyiceberg 0.12")
		wh := t.TempDir()
		db := filepath.Join(wh, "catalog.db")
		// With snapshot expiry, as a long run is configured (see
		// docs/sinks/iceberg.md): without it every commit rewrites a
		// metadata file holding every snapshot, and in the 100-kill run a
		// commit went from 92 ms at 100 snapshots to 670 ms at 600, which
		// put the late kills' recoveries near the 12 s bound. Each new
		// writer expires at its first commit, so kills exercise it too.
		return killDest{spec: "iceberg:" + wh + "?table=lake.orders&expire_snapshots_older_than=30s", target: "out",
			read: func(ctx context.Context) ([]string, error) {
				cmd := exec.CommandContext(ctx, py, "python/read_iceberg_keys.py", db, "file://"+wh, "lake.out", "key")
				out, err := cmd.Output()
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					return nil, fmt.Errorf("read_iceberg_keys.py: %w\n%s", err, ee.Stderr)
				}
				if err != nil {
					return nil, err
				}
				return strings.Fields(string(out)), nil
			}}
	}}
	seed := killSeed(t)
	t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays it)", seed, seed)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	r := newKillRun(t, ctx, s, seed, killSession.String(), false)
	rep := r.chaos(ctx, rand.New(rand.NewPCG(seed, 34)), kills)
	t.Cleanup(func() { appendChaosReport(t, rep.rows(s.name, r.res)) })
	res := r.finish(ctx, 4*time.Minute)
	t.Logf("iceberg sink, Kafka source: %d records checked by pyiceberg after %d kills", res.checked, kills)
	if rep.worst > killRecoveryBound {
		t.Errorf("the pipeline took %v to commit again after a restart (%s), over the bound of %v",
			rep.worst.Round(100*time.Millisecond), rep.worstAt, killRecoveryBound)
	}
}
