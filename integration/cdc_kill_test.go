package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestIntegrationPostgresCDCKill9 is issue 35's kill test: serve-source
// (postgres-cdc), serve-sink (postgres, mode upsert by id) and run as three
// processes, while a workload of inserts, updates, deletes, primary-key
// updates, deletes then re-inserts of the same key and transactions larger
// than a batch runs on the source table; a random process is kill -9ed and
// restarted (5 times in make test, 100 under FLIGHTLINE_CHAOS=1). The first
// kills fall in the initial snapshot (read in small batches). Then the
// workload stops and the target must become equal to the source row by
// row, compared by psql (EXCEPT both ways, and the counts), independently
// of Flightline; and the slot's confirmed position must have moved (the
// advisory commit reaches the slot).
func TestIntegrationPostgresCDCKill9(t *testing.T) {
	testPostgresCDCKill9(t, func(u url.URL, dst, pipeline, _ string) (string, []string) {
		q := u.Query()
		q.Set("table", dst)
		q.Set("mode", "upsert")
		q.Set("key", "id")
		u.RawQuery = q.Encode()
		return u.String(), []string{`DELETE FROM __flightline_checkpoints WHERE pipeline_id = '` + pipeline + `'`}
	})
}

// TestIntegrationPostgresCDCKill9ADBC is the same test with the adbc sink
// (the ADBC PostgreSQL driver, mode upsert by id, its changes applied
// through a temporary stage by DELETE … WHERE EXISTS and INSERT … SELECT)
// as serve-sink. The target table is created by the sink without any key.
func TestIntegrationPostgresCDCKill9ADBC(t *testing.T) {
	drv := Need(t, "FLIGHTLINE_ADBC_POSTGRESQL_DRIVER", "ADBC PostgreSQL driver")
	testPostgresCDCKill9(t, func(u url.URL, dst, _, suffix string) (string, []string) {
		cp := "cdc_adbc_cp_" + suffix // the adbc sink's checkpoint layout is its own
		q := url.Values{"uri": {u.String()}, "table": {dst}, "checkpoint_table": {cp}, "mode": {"upsert"}, "key": {"id"}}
		return "adbc:" + drv + "?" + q.Encode(), []string{`DROP TABLE IF EXISTS ` + cp}
	})
}

// testPostgresCDCKill9 runs the kill test with the sink sinkOf returns
// for the database at u, writing table dst: its URL, and the statements
// that remove what it leaves besides dst.
func testPostgresCDCKill9(t *testing.T, sinkOf func(u url.URL, dst, pipeline, suffix string) (sinkURL string, cleanup []string)) {
	if testing.Short() {
		t.Skip("crash test: skipped in -short mode")
	}
	dsn := Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	psql, err := exec.LookPath("psql")
	require.NoError(t, err, "psql, the independent reader")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
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
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	sinkURL, sinkCleanup := sinkOf(*u, dst, pipeline, suffix)
	exec1 := func(sql string, args ...any) {
		t.Helper()
		_, err := conn.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	exec1(`CREATE TABLE ` + src + ` (id bigint PRIMARY KEY, v text, n integer NOT NULL)`)
	exec1(`INSERT INTO ` + src + ` SELECT i, 'init-' || i, 0 FROM generate_series(0, 7999) i`)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		for range 50 { // the killed source's walsender ends a moment later
			if _, err := c.Exec(context.Background(), `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1`, src); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, q := range append([]string{`DROP PUBLICATION IF EXISTS ` + src, `DROP TABLE IF EXISTS ` + src, `DROP TABLE IF EXISTS ` + dst}, sinkCleanup...) {
			_, _ = c.Exec(context.Background(), q)
		}
	})

	srcURL := *u
	srcURL.Scheme = "postgres-cdc"
	q := u.Query()
	q.Set("table", src)
	q.Set("slot", src)
	q.Set("publication", src)
	q.Set("batch_rows", "200")
	q.Set("poll", "100ms")
	q.Set("status_interval", "500ms")
	srcURL.RawQuery = q.Encode()
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
	kills := killCount(5, 100)
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

	// The target catches up with the source; psql compares them.
	rowsOf := func(a, b string) string {
		return fmt.Sprintf(`SELECT id, v, n FROM %s EXCEPT SELECT id, v, n FROM %s`, a, b)
	}
	check := `SELECT (SELECT count(*) FROM (` + rowsOf(src, dst) + `) x) + (SELECT count(*) FROM (` + rowsOf(dst, src) + `) y)` +
		` || ' ' || (SELECT count(*) FROM ` + src + `) || ' ' || (SELECT count(*) FROM ` + dst + `)`
	var out string
	deadline := time.Now().Add(3 * time.Minute)
	for {
		b, err := exec.CommandContext(ctx, psql, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-c", check).CombinedOutput()
		out = strings.TrimSpace(string(b))
		if err == nil {
			f := strings.Fields(out)
			if len(f) == 3 && f[0] == "0" && f[1] == f[2] {
				break
			}
		}
		if done, err := procs["run"].exited(); done {
			t.Fatalf("coordinator exited (%v):\n%s", err, logs["run"])
		}
		if time.Now().After(deadline) {
			t.Fatalf("the target did not become equal to the source (psql: differing rows, source rows, target rows = %s)\nrun:\n%s\nsource:\n%s\nsink:\n%s",
				out, logs["run"], logs["source"], logs["sink"])
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("psql: target equals source row by row (0 differing rows; %s rows), %v after the workload stopped", strings.Fields(out)[1], time.Since(began).Round(time.Millisecond))

	// The slot confirmed what the sink committed: it moved past its start.
	var lag int64
	require.Eventually(t, func() bool {
		err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1`, src).Scan(&lag)
		return err == nil && lag < 1<<20
	}, time.Minute, 200*time.Millisecond, "the slot's confirmed position follows the sink's commits (lag %d bytes)", lag)
	t.Logf("slot lag after catching up: %d bytes", lag)
}
