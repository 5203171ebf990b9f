package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestIntegrationPostgresCDCKill9 is issue 35's kill test: serve-source
// (postgres-cdc), serve-sink and run as three processes, while a workload
// of inserts, updates, deletes, primary-key updates, deletes then
// re-inserts of the same key and transactions larger than a batch runs on
// the source table; a random process is kill -9ed and restarted (5 times
// in make test for PostgreSQL and ADBC, 3 for Delta; 100 under
// FLIGHTLINE_CHAOS=1).
// The source reads in batches of 200 rows for PostgreSQL, so its first
// kills fall in the initial snapshot and transactions span batches; of
// 2,000 for Delta (see deltaTarget), where neither need hold.
// Then the workload stops and the target must become equal to the source
// row by row, compared independently of Flightline; and the slot's
// confirmed position must have moved (the advisory commit reaches the
// slot). It runs for every sink that applies changes by key:
//   - postgres, mode upsert by id: psql compares (EXCEPT both ways, and
//     the counts);
//   - adbc (the ADBC PostgreSQL driver), mode upsert by id, its changes
//     applied through a temporary stage by DELETE … WHERE EXISTS and
//     INSERT … SELECT into a table the sink creates without any key: psql
//     compares as for postgres;
//   - delta, mode merge by id (compaction eager, so it races the merges):
//     delta-rs reads the table, pgx the source, and the test compares
//     them row by row.
func TestIntegrationPostgresCDCKill9(t *testing.T) {
	for _, target := range []cdcTarget{pgTarget(), adbcTarget(), deltaTarget()} {
		t.Run(target.name, func(t *testing.T) { runCDCKill9(t, target) })
	}
}

// cdcTarget is a sink the kill test applies the change stream to.
type cdcTarget struct {
	name  string
	kills int // in make test (FLIGHTLINE_CHAOS=1: 100)
	// poll is the pause between two comparisons while the target catches
	// up; catchUp bounds the wait (chaosCatchUp under FLIGHTLINE_CHAOS=1,
	// after a workload 100 kills long).
	poll, catchUp, chaosCatchUp time.Duration
	// batchRows is the source's batch_rows: a change batch's rows at most.
	batchRows string
	// sink returns the --sink of serve-sink for the pipeline's target
	// dst, given the test PostgreSQL's URL; it registers its cleanup.
	sink func(t *testing.T, pg url.URL, dst string) string
	// same compares the target with the source table src, independently
	// of Flightline: ok when they are equal row by row; what says how
	// they differ (or the rows they hold when equal).
	same func(ctx context.Context, t *testing.T, dsn, src, dst string) (ok bool, what string)
}

// pgTarget is the PostgreSQL sink, mode upsert by id, compared by psql.
func pgTarget() cdcTarget {
	return cdcTarget{name: "postgres", kills: 5, poll: 500 * time.Millisecond, catchUp: 3 * time.Minute, chaosCatchUp: 3 * time.Minute, batchRows: "200",
		sink: func(t *testing.T, pg url.URL, dst string) string {
			q := pg.Query()
			q.Set("table", dst)
			q.Set("mode", "upsert")
			q.Set("key", "id")
			pg.RawQuery = q.Encode()
			return pg.String()
		},
		same: func(ctx context.Context, t *testing.T, dsn, src, dst string) (bool, string) {
			psql, err := exec.LookPath("psql")
			require.NoError(t, err, "psql, the independent reader")
			rowsOf := func(a, b string) string {
				return fmt.Sprintf(`SELECT id, v, n FROM %s EXCEPT SELECT id, v, n FROM %s`, a, b)
			}
			check := `SELECT (SELECT count(*) FROM (` + rowsOf(src, dst) + `) x) + (SELECT count(*) FROM (` + rowsOf(dst, src) + `) y)` +
				` || ' ' || (SELECT count(*) FROM ` + src + `) || ' ' || (SELECT count(*) FROM ` + dst + `)`
			b, err := exec.CommandContext(ctx, psql, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-c", check).CombinedOutput()
			out := strings.TrimSpace(string(b))
			f := strings.Fields(out)
			if err == nil && len(f) == 3 && f[0] == "0" && f[1] == f[2] {
				return true, "psql: 0 differing rows, " + f[1] + " rows"
			}
			return false, "psql: differing rows, source rows, target rows = " + out
		},
	}
}

// adbcTarget is the adbc sink on the ADBC PostgreSQL driver, mode upsert
// by id, with a checkpoint table of its own (the adbc sink's layout is not
// the postgres sink's), compared by psql as pgTarget is.
func adbcTarget() cdcTarget {
	tg := pgTarget()
	tg.name = "adbc"
	tg.sink = func(t *testing.T, pg url.URL, dst string) string {
		drv := Need(t, "FLIGHTLINE_ADBC_POSTGRESQL_DRIVER", "ADBC PostgreSQL driver")
		cp := dst + "_cp"
		t.Cleanup(func() {
			if c, err := pgx.Connect(context.Background(), pg.String()); err == nil {
				_, _ = c.Exec(context.Background(), `DROP TABLE IF EXISTS `+cp)
				_ = c.Close(context.Background())
			}
		})
		q := url.Values{"uri": {pg.String()}, "table": {dst}, "checkpoint_table": {cp}, "mode": {"upsert"}, "key": {"id"}}
		return "adbc:" + drv + "?" + q.Encode()
	}
	return tg
}

// deltaTarget is the Delta sink, mode merge by id, read by delta-rs. A
// merge commit rewrites the files holding its keys, and the workload's
// keys are spread over the whole table (its bulk updates alone change
// about a million rows in the chaos run): the source's batches are 2,000
// rows (10 times the PostgreSQL target's), so that the sink (a -race
// binary) catches up in minutes, not hours; and each comparison (a
// delta-rs process) costs a core for a second, so it polls seldom.
func deltaTarget() cdcTarget {
	var dir string
	return cdcTarget{name: "delta", kills: 3, poll: 3 * time.Second, catchUp: 3 * time.Minute, chaosCatchUp: 10 * time.Minute, batchRows: "2000",
		sink: func(t *testing.T, _ url.URL, dst string) string {
			Need(t, "FLIGHTLINE_PYTHON", "python with deltalake")
			dir = t.TempDir()
			return "delta:" + dir + "?mode=merge&key=id&compact_min_files=4"
		},
		same: func(ctx context.Context, t *testing.T, dsn, src, dst string) (bool, string) {
			type row struct {
				ID int64   `json:"id"`
				V  *string `json:"v"`
				N  int64   `json:"n"`
			}
			var want []row
			rows, err := pgxQuery(ctx, dsn, `SELECT id, v, n FROM `+src+` ORDER BY id`)
			require.NoError(t, err)
			for _, r := range rows {
				var v *string
				if r[1] != nil {
					s := r[1].(string)
					v = &s
				}
				want = append(want, row{ID: r[0].(int64), V: v, N: int64(r[2].(int32))})
			}
			if _, err := os.Stat(filepath.Join(dir, dst, "_delta_log")); err != nil {
				return false, "delta: no table yet"
			}
			var got struct {
				Version int64 `json:"version"`
				Rows    []row `json:"rows"`
			}
			out := deltaRs(t, nil, "delta_table_rows.py", filepath.Join(dir, dst), "id")
			require.NoError(t, json.Unmarshal(out, &got), "%s", out)
			if len(got.Rows) != len(want) {
				return false, fmt.Sprintf("delta-rs: %d rows at version %d, the source %d", len(got.Rows), got.Version, len(want))
			}
			for i := range want {
				if w, g := want[i], got.Rows[i]; w.ID != g.ID || w.N != g.N || (w.V == nil) != (g.V == nil) || (w.V != nil && *w.V != *g.V) {
					return false, fmt.Sprintf("delta-rs: row %d differs at version %d: %+v, the source %+v", i, got.Version, g, w)
				}
			}
			return true, fmt.Sprintf("delta-rs: version %d, %d rows equal the source's", got.Version, len(want))
		},
	}
}

// pgxQuery returns the rows of sql, each as pgx decodes it.
func pgxQuery(ctx context.Context, dsn, sql string) ([][]any, error) {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	rs, err := c.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out [][]any
	for rs.Next() {
		vals, err := rs.Values()
		if err != nil {
			return nil, err
		}
		out = append(out, vals)
	}
	return out, rs.Err()
}

func runCDCKill9(t *testing.T, target cdcTarget) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	dsn := Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var wal string
	require.NoError(t, conn.QueryRow(ctx, `SHOW wal_level`).Scan(&wal))
	if wal != "logical" {
		t.Fatalf("the test PostgreSQL runs with wal_level=%s: `integration/services/services.sh restart postgres` applies wal_level=logical", wal)
	}
	bin := flightlineBin(t)
	seed := killSeed(t)
	t.Logf("seed %d (FLIGHTLINE_KILL_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 35))

	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	src, dst, pipeline := "cdc_src_"+suffix, "cdc_dst_"+suffix, "cdc_pipe_"+suffix
	cdcSourceTable(ctx, t, conn, dsn, src, 8000, `DROP TABLE IF EXISTS `+dst,
		`DELETE FROM __flightline_checkpoints WHERE pipeline_id = '`+pipeline+`'`)

	u, err := url.Parse(dsn)
	require.NoError(t, err)
	srcURL := *u
	srcURL.Scheme = "postgres-cdc"
	q := u.Query()
	q.Set("table", src)
	q.Set("slot", src)
	q.Set("publication", src)
	q.Set("batch_rows", target.batchRows)
	q.Set("poll", "100ms")
	q.Set("status_interval", "500ms")
	srcURL.RawQuery = q.Encode()
	sinkURL := target.sink(t, *u, dst)
	srcAddr, sinkAddr := freePort(t), freePort(t)
	argv := map[string][]string{
		"source": {"serve-source", "--listen", srcAddr, "--source", srcURL.String(), "--log-level", "warn"},
		"sink":   {"serve-sink", "--listen", sinkAddr, "--sink", sinkURL, "--log-level", "warn"},
		"run": {"run", "--source", "grpc://" + srcAddr, "--sink", "grpc://" + sinkAddr,
			"--stream", src, "--pipeline", pipeline, "--target", dst, "--log-level", "warn"},
	}
	procs := map[string]*proc{}
	logs := map[string]*syncBuffer{}
	for _, name := range killRoles {
		logs[name] = &syncBuffer{}
		procs[name] = startLogged(t, bin, logs[name], argv[name]...)
	}

	// The workload, until stopped: each transaction one of the kinds below.
	var stop atomic.Bool
	var txs atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	workErr := make(chan error, 1)
	go func() {
		defer wg.Done()
		wc, err := pgx.Connect(ctx, dsn)
		if err != nil {
			workErr <- err
			return
		}
		defer wc.Close(context.Background())
		wrng := rand.New(rand.NewPCG(seed, 36))
		next := int64(8000)
		for i := 0; !stop.Load(); i++ {
			id := wrng.Int64N(next)
			var sql string
			switch k := wrng.IntN(20); {
			case k < 5:
				sql = fmt.Sprintf(`INSERT INTO %s VALUES (%d, 'ins-%d', 1)`, src, next, i)
				next++
			case k < 11:
				sql = fmt.Sprintf(`UPDATE %s SET v = 'upd-%d', n = n + 1 WHERE id = %d`, src, i, id)
			case k < 14:
				sql = fmt.Sprintf(`DELETE FROM %s WHERE id = %d`, src, id)
			case k < 16: // a primary-key update
				sql = fmt.Sprintf(`UPDATE %s SET id = %d, v = 'moved-%d' WHERE id = %d`, src, next, i, id)
				next++
			case k < 18: // a delete, then the same key again
				sql = fmt.Sprintf(`DELETE FROM %[1]s WHERE id = %[2]d; INSERT INTO %[1]s VALUES (%[2]d, 'again-%[3]d', 7) ON CONFLICT (id) DO NOTHING`, src, id, i)
			case k < 19: // a transaction larger than a batch (200 rows)
				sql = fmt.Sprintf(`UPDATE %s SET n = n + 1, v = 'bulk-%d' WHERE id %% 37 = %d`, src, i, wrng.IntN(37))
			default: // several kinds in one transaction
				sql = fmt.Sprintf(`INSERT INTO %[1]s VALUES (%[2]d, 'multi-%[3]d', 2); UPDATE %[1]s SET v = NULL WHERE id = %[4]d; DELETE FROM %[1]s WHERE id = %[5]d`,
					src, next, i, id, wrng.Int64N(next))
				next++
			}
			if _, err := wc.Exec(ctx, "BEGIN; "+sql+"; COMMIT"); err != nil {
				if ctx.Err() != nil {
					return
				}
				workErr <- fmt.Errorf("%s: %w", sql, err)
				return
			}
			txs.Add(1)
			time.Sleep(time.Duration(wrng.IntN(4)) * time.Millisecond)
		}
	}()

	began := time.Now()
	kills := killCount(target.kills, 100)
	killed := 0
	for killed < kills {
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		if done, err := procs["run"].exited(); done {
			t.Fatalf("coordinator exited (%v):\n%s\nsource:\n%s\nsink:\n%s", err, logs["run"], logs["source"], logs["sink"])
		}
		victim := killRoles[rng.IntN(len(killRoles))]
		if killed < len(killRoles) { // each role at least once, also in the short run
			victim = killRoles[(killed+int(seed%3))%len(killRoles)]
		}
		procs[victim].kill()
		killed++
		if rng.IntN(4) == 0 {
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond) // a slow restart
		}
		procs[victim] = startLogged(t, bin, logs[victim], argv[victim]...)
	}
	stop.Store(true)
	wg.Wait()
	select {
	case err := <-workErr:
		t.Fatalf("workload: %v", err)
	default:
	}
	t.Logf("killed a process %d times during %d source transactions (%v)", killed, txs.Load(), time.Since(began).Round(time.Millisecond))
	began = time.Now()

	// The target catches up with the source; an independent reader
	// compares them.
	var out string
	wait := target.catchUp
	if chaosMode() {
		wait = target.chaosCatchUp
	}
	deadline := time.Now().Add(wait)
	for {
		ok, what := target.same(ctx, t, dsn, src, dst)
		out = what
		if ok {
			break
		}
		if done, err := procs["run"].exited(); done {
			t.Fatalf("coordinator exited (%v):\n%s", err, logs["run"])
		}
		if time.Now().After(deadline) {
			t.Fatalf("the target did not become equal to the source (%s)\nrun:\n%s\nsource:\n%s\nsink:\n%s",
				out, logs["run"], logs["source"], logs["sink"])
		}
		time.Sleep(target.poll)
	}
	t.Logf("target equals source row by row (%s), %v after the workload stopped", out, time.Since(began).Round(time.Millisecond))

	// The slot confirmed what the sink committed: it moved past its start.
	var lag int64
	require.Eventually(t, func() bool {
		err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1`, src).Scan(&lag)
		return err == nil && lag < 1<<20
	}, time.Minute, 200*time.Millisecond, "the slot's confirmed position follows the sink's commits (lag %d bytes)", lag)
	t.Logf("slot lag after catching up: %d bytes", lag)
}

// cdcSourceTable creates the workload's source table src (id bigint
// PRIMARY KEY, v text, n integer NOT NULL) holding ids 0 to rows-1, and
// registers the removal of its slot and publication (both named after it),
// of the table, and then the statements more.
func cdcSourceTable(ctx context.Context, t *testing.T, conn *pgx.Conn, dsn, src string, rows int, more ...string) {
	t.Helper()
	for _, q := range []string{`CREATE TABLE ` + src + ` (id bigint PRIMARY KEY, v text, n integer NOT NULL)`,
		fmt.Sprintf(`INSERT INTO %s SELECT i, 'init-' || i, 0 FROM generate_series(0, %d) i`, src, rows-1)} {
		_, err := conn.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		for range 50 { // a killed or stopped source's walsender ends a moment later
			if _, err := c.Exec(context.Background(), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, src); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, q := range append([]string{`DROP PUBLICATION IF EXISTS ` + src, `DROP TABLE IF EXISTS ` + src}, more...) {
			_, _ = c.Exec(context.Background(), q)
		}
	})
}
