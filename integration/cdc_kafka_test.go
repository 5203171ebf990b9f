package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestIntegrationPostgresCDCToKafka: `flightline run` from postgres-cdc
// (snapshot, then changes) to the Kafka sink keyed by id with
// value_format json, into a compacted topic, while inserts, updates,
// deletes, primary-key updates and deletes then re-inserts of a key run
// on the source table. The topic, read with kcat read_committed and folded
// last-record-per-key (a tombstone removes its key), must equal the
// source table read with psql, row by row.
func TestIntegrationPostgresCDCToKafka(t *testing.T) {
	t.Parallel() // own topic, tables, directories and ports; see services.go
	dsn := Need(t, "FLIGHTLINE_PG_DSN", "PostgreSQL")
	brokers := Need(t, "FLIGHTLINE_KAFKA_BROKERS", "Kafka broker")
	kcat := Need(t, "FLIGHTLINE_KCAT", "kcat (librdkafka)")
	psql, err := exec.LookPath("psql")
	require.NoError(t, err, "psql, the independent reader")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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

	suffix := fmt.Sprintf("%d", time.Now().UnixNano()%1e9)
	src, topic, pipeline := "cdck_src_"+suffix, "cdck-"+suffix, "cdck_pipe_"+suffix
	exec1 := func(sql string) {
		t.Helper()
		_, err := conn.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	cdcSourceTable(ctx, t, conn, dsn, src, 1000)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	require.NoError(t, err)
	defer cl.Close()
	compact := "compact"
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, map[string]*string{"cleanup.policy": &compact}, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)

	u, err := url.Parse(dsn)
	require.NoError(t, err)
	srcURL := *u
	srcURL.Scheme = "postgres-cdc"
	q := u.Query()
	q.Set("table", src)
	q.Set("slot", src)
	q.Set("publication", src)
	q.Set("batch_rows", "100")
	q.Set("poll", "100ms")
	srcURL.RawQuery = q.Encode()
	sinkURL := "kafka:?" + url.Values{"brokers": {brokers}, "topic": {topic}, "value_format": {"json"}, "key": {"id"}}.Encode()
	log := &syncBuffer{}
	run := startLogged(t, bin, log, "run", "--source", srcURL.String(), "--sink", sinkURL,
		"--stream", src, "--pipeline", pipeline, "--log-level", "warn")
	defer run.kill()

	// The changes, one transaction each, some while the snapshot is read.
	for i, sql := range []string{
		`UPDATE %[1]s SET v = 'upd', n = n + 1 WHERE id %% 7 = 0`,
		`DELETE FROM %[1]s WHERE id %% 11 = 0`,
		`UPDATE %[1]s SET id = id + 100000, v = 'moved' WHERE id %% 13 = 1`, // primary-key updates
		`INSERT INTO %[1]s SELECT i, NULL, 5 FROM generate_series(2000, 2099) i`,
		`DELETE FROM %[1]s WHERE id = 5; INSERT INTO %[1]s VALUES (5, 'again', 9)`, // a delete, then the key again
		`DELETE FROM %[1]s WHERE id = 22`,
		`INSERT INTO %[1]s VALUES (22, 'back', 1)`, // a key deleted in an earlier transaction
		`UPDATE %[1]s SET v = NULL WHERE id = 6; UPDATE %[1]s SET v = 'twice' WHERE id = 6`,
		`DELETE FROM %[1]s WHERE id BETWEEN 2050 AND 2060`,
	} {
		exec1("BEGIN; " + fmt.Sprintf(sql, src) + "; COMMIT")
		if i%3 == 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}

	// The source table, by psql: "id|v|n", v NULL as \N.
	out, err := exec.CommandContext(ctx, psql, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", dsn,
		"-c", `SELECT id || '|' || coalesce(v, '\N') || '|' || n FROM `+src).CombinedOutput()
	require.NoError(t, err, "%s", out)
	want := strings.Fields(strings.TrimSpace(string(out)))
	sort.Strings(want)

	// The topic, by kcat, folded.
	fold := func() ([]string, error) {
		out, err := exec.CommandContext(ctx, kcat, "-C", "-b", brokers, "-t", topic, "-X", "isolation.level=read_committed",
			"-o", "beginning", "-e", "-q", "-Z", "-f", "%p %o\t%k\t%s\n").Output()
		if err != nil {
			return nil, err
		}
		type rec struct {
			part, off int64
			key, val  string
		}
		var recs []rec
		for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			if l == "" {
				continue
			}
			f := strings.SplitN(l, "\t", 3)
			if len(f) != 3 {
				return nil, fmt.Errorf("kcat line %q", l)
			}
			var r rec
			fmt.Sscanf(f[0], "%d %d", &r.part, &r.off)
			r.key, r.val = f[1], f[2]
			recs = append(recs, r)
		}
		// A key's records are on one partition, in offset order.
		sort.Slice(recs, func(i, j int) bool {
			return recs[i].part < recs[j].part || recs[i].part == recs[j].part && recs[i].off < recs[j].off
		})
		last := map[string]string{}
		for _, r := range recs {
			if r.val == "NULL" {
				delete(last, r.key)
			} else {
				last[r.key] = r.val
			}
		}
		var rows []string
		for k, v := range last {
			var key struct{ ID json.Number }
			var row struct {
				ID json.Number
				V  *string
				N  json.Number
			}
			d := json.NewDecoder(bytes.NewReader([]byte(v)))
			d.UseNumber()
			d.DisallowUnknownFields() // the change columns are not in the value
			if err := d.Decode(&row); err != nil {
				return nil, fmt.Errorf("value %s: %w", v, err)
			}
			d = json.NewDecoder(bytes.NewReader([]byte(k)))
			d.UseNumber()
			d.DisallowUnknownFields()
			if err := d.Decode(&key); err != nil || key.ID != row.ID {
				return nil, fmt.Errorf("key %s of value %s (%v)", k, v, err)
			}
			s := `\N`
			if row.V != nil {
				s = *row.V
			}
			rows = append(rows, string(row.ID)+"|"+s+"|"+string(row.N))
		}
		sort.Strings(rows)
		return rows, nil
	}
	var got []string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err = fold()
		if err == nil && len(got) == len(want) && strings.Join(got, "\n") == strings.Join(want, "\n") {
			break
		}
		if done, rerr := run.exited(); done {
			t.Fatalf("run exited (%v):\n%s", rerr, log)
		}
		if time.Now().After(deadline) {
			require.NoError(t, err)
			require.Equal(t, want, got, "the folded topic equals the source table (run log:\n%s)", log)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("kcat, folded: the topic equals the source table row by row (%d rows)", len(got))
}
