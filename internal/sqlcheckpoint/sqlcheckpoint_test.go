package sqlcheckpoint_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
	"github.com/flightline/flightline/internal/sqlcheckpoint"
	"github.com/flightline/flightline/internal/testkit/pgtest"
)

// pgTable opens the test PostgreSQL through database/sql and creates a
// fresh checkpoint table.
func pgTable(t *testing.T) (*sql.DB, *sqlcheckpoint.Table) {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.DSN(t))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	name := pgtest.Name("ck")
	tbl := sqlcheckpoint.New(sqlcheckpoint.Postgres, sqlcheckpoint.Postgres.Quote(name))
	_, err = db.Exec(tbl.CreateSQL())
	require.NoError(t, err)
	t.Cleanup(func() { db.Exec(`DROP TABLE ` + tbl.Name()) }) //nolint:errcheck
	return db, tbl
}

// claim is what a sink's Open does.
func claim(t *testing.T, db *sql.DB, tbl *sqlcheckpoint.Table, pipeline, target string) (int64, []byte) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, tbl.Ensure(ctx, sqlcheckpoint.SQL(db), pipeline, target))
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	epoch, cp, err := tbl.Claim(ctx, sqlcheckpoint.SQL(tx), pipeline, target)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	return epoch, cp
}

// write is what a sink's WriteBatch does, with rows inserted into data.
func write(ctx context.Context, db *sql.DB, tbl *sqlcheckpoint.Table, data, pipeline, target string, epoch int64, cp []byte, rows int) (replay bool, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() //nolint:errcheck
	c := sqlcheckpoint.SQL(tx)
	last, replay, err := tbl.Lock(ctx, c, pipeline, target, epoch, cp)
	if err != nil || replay {
		return replay, err
	}
	for range rows {
		if _, err := c.Exec(ctx, `INSERT INTO `+data+` VALUES ($1)`, string(cp)); err != nil {
			return false, err
		}
	}
	if err := tbl.Advance(ctx, c, pipeline, target, epoch, last, cp); err != nil {
		return false, err
	}
	return false, tx.Commit()
}

func TestPostgresClaimLockAdvance(t *testing.T) {
	db, tbl := pgTable(t)
	ctx := context.Background()
	data := pgtest.Name("data")
	_, err := db.Exec(`CREATE TABLE ` + data + ` (cp text)`)
	require.NoError(t, err)
	t.Cleanup(func() { db.Exec(`DROP TABLE ` + data) }) //nolint:errcheck

	cp, err := tbl.Read(ctx, sqlcheckpoint.SQL(db), "p", "")
	require.NoError(t, err)
	require.Nil(t, cp, "no row: no checkpoint")

	e1, cp := claim(t, db, tbl, "p", "")
	require.Equal(t, int64(1), e1)
	require.Nil(t, cp)

	replay, err := write(ctx, db, tbl, data, "p", "", e1, []byte("a"), 2)
	require.NoError(t, err)
	require.False(t, replay)
	replay, err = write(ctx, db, tbl, data, "p", "", e1, []byte("a"), 2)
	require.NoError(t, err)
	require.True(t, replay, "the same checkpoint again is a replay")

	got, err := tbl.Read(ctx, sqlcheckpoint.SQL(db), "p", "")
	require.NoError(t, err)
	require.Equal(t, "a", string(got))

	// A second target of the pipeline is a row of its own.
	e, cp := claim(t, db, tbl, "p", "other")
	require.Equal(t, int64(1), e)
	require.Nil(t, cp)

	// A newer claim fences the old writer, replays included.
	e2, cp := claim(t, db, tbl, "p", "")
	require.Equal(t, int64(2), e2)
	require.Equal(t, "a", string(cp))
	for _, c := range []string{"a", "b"} {
		_, err = write(ctx, db, tbl, data, "p", "", e1, []byte(c), 1)
		require.ErrorIs(t, err, flightline.ErrFenced, "checkpoint %s", c)
	}
	_, err = write(ctx, db, tbl, data, "p", "", e2, []byte("b"), 1)
	require.NoError(t, err)

	var n int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM `+data).Scan(&n))
	require.Equal(t, 3, n, "two rows at a, one at b: nothing from the replay or the fenced writer")
}

// Positions checkpoints merge: the stored checkpoint is the union, and a
// batch it covers is a replay.
func TestPostgresMergesPositions(t *testing.T) {
	db, tbl := pgTable(t)
	ctx := context.Background()
	data := pgtest.Name("data")
	_, err := db.Exec(`CREATE TABLE ` + data + ` (cp text)`)
	require.NoError(t, err)
	t.Cleanup(func() { db.Exec(`DROP TABLE ` + data) }) //nolint:errcheck

	e, _ := claim(t, db, tbl, "p", "")
	a := checkpoint.Positions{"t/0": 5}.Encode()
	b := checkpoint.Positions{"t/1": 7}.Encode()
	for _, cp := range [][]byte{a, b} {
		_, err := write(ctx, db, tbl, data, "p", "", e, cp, 1)
		require.NoError(t, err)
	}
	got, err := tbl.Read(ctx, sqlcheckpoint.SQL(db), "p", "")
	require.NoError(t, err)
	pos, err := checkpoint.Parse(got)
	require.NoError(t, err)
	require.Equal(t, checkpoint.Positions{"t/0": 5, "t/1": 7}, pos)
	replay, err := write(ctx, db, tbl, data, "p", "", e, a, 1)
	require.NoError(t, err)
	require.True(t, replay)
}

// A claim between a writer's read of the row and its Advance, as on a
// dialect without row locks: Advance's compare-and-set refuses.
func TestPostgresAdvanceComparesEpoch(t *testing.T) {
	db, tbl := pgTable(t)
	ctx := context.Background()
	e1, _ := claim(t, db, tbl, "p", "")

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback() //nolint:errcheck
	// Bypass Lock's row lock: read as an unlocked reader would.
	last, err := tbl.Read(ctx, sqlcheckpoint.SQL(tx), "p", "")
	require.NoError(t, err)

	claimed := make(chan int64, 1)
	go func() {
		e, _ := claim(t, db, tbl, "p", "")
		claimed <- e
	}()
	e2 := <-claimed
	require.Equal(t, e1+1, e2)

	err = tbl.Advance(ctx, sqlcheckpoint.SQL(tx), "p", "", e1, last, []byte("x"))
	require.ErrorIs(t, err, flightline.ErrFenced)
	var fe *sqlcheckpoint.FencedError
	require.True(t, errors.As(err, &fe))
	require.Equal(t, "p", fe.Pipeline)
}

// Racing first claims of a new key: every one gets a distinct epoch, and
// only the last one's writer may write.
func TestPostgresConcurrentClaims(t *testing.T) {
	db, tbl := pgTable(t)
	distinctEpochs(t, 8, func() int64 {
		e, _ := claim(t, db, tbl, "race", "")
		return e
	})
	var rows int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM `+tbl.Name()+` WHERE pipeline_id = 'race'`).Scan(&rows))
	require.Equal(t, 1, rows)
}

// distinctEpochs runs n claims at once and requires n distinct epochs.
func distinctEpochs(t *testing.T, n int, claim func() int64) {
	t.Helper()
	var wg sync.WaitGroup
	epochs := make(chan int64, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			epochs <- claim()
		}()
	}
	wg.Wait()
	close(epochs)
	seen := map[int64]bool{}
	for e := range epochs {
		require.False(t, seen[e], "epoch %d handed out twice", e)
		seen[e] = true
	}
	require.Len(t, seen, n)
}

func TestReadWithoutTable(t *testing.T) {
	db, err := sql.Open("pgx", pgtest.DSN(t))
	require.NoError(t, err)
	defer db.Close()
	tbl := sqlcheckpoint.New(sqlcheckpoint.Postgres, `"no_such_checkpoints"`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cp, err := tbl.Read(ctx, sqlcheckpoint.SQL(db), "p", "")
	require.NoError(t, err)
	require.Nil(t, cp)
}

// The statements of every dialect put their placeholders where the
// arguments go: "?" dialects bind in order of appearance.
func TestDialectStatements(t *testing.T) {
	for _, d := range []sqlcheckpoint.Dialect{sqlcheckpoint.Postgres, sqlcheckpoint.SQLite, sqlcheckpoint.Snowflake, sqlcheckpoint.DuckDB, sqlcheckpoint.Generic} {
		t.Run(d.Name, func(t *testing.T) {
			tbl := sqlcheckpoint.New(d, d.Quote("ck"))
			rec := &recorder{}
			ctx := context.Background()
			_, _ = tbl.Read(ctx, rec, "P", "T")
			require.NoError(t, tbl.Ensure(ctx, rec, "P", "T"))
			_, _, _ = tbl.Claim(ctx, rec, "P", "T")
			_, _, _ = tbl.Lock(ctx, rec, "P", "T", 3, []byte("c"))
			_ = tbl.Advance(ctx, rec, "P", "T", 3, nil, []byte("c"))
			for _, c := range rec.calls {
				marks := strings.Count(c.q, "?")
				if d.Placeholder(1) == "?" {
					require.Equal(t, len(c.args), marks, c.q)
				} else {
					require.Zero(t, marks, c.q)
				}
				if strings.HasPrefix(c.q, "UPDATE") && strings.Contains(c.q, "checkpoint =") {
					require.Equal(t, []any{[]byte("c"), "P", "T", int64(3)}, c.args, "Advance binds checkpoint, pipeline, target, epoch")
				}
			}
			require.Contains(t, tbl.CreateSQL(), "PRIMARY KEY (pipeline_id, target)")
		})
	}
}

type call struct {
	q    string
	args []any
}

// recorder is a Conn that records statements and answers "one row changed"
// and "no row".
type recorder struct{ calls []call }

func (r *recorder) Exec(_ context.Context, q string, args ...any) (int64, error) {
	r.calls = append(r.calls, call{q, args})
	return 1, nil
}

func (r *recorder) QueryRow(_ context.Context, q string, _ []any, args ...any) (bool, error) {
	r.calls = append(r.calls, call{q, args})
	return false, nil
}

// pgInstances opens the test PostgreSQL and creates a fresh per-instance
// checkpoint table.
func pgInstances(t *testing.T) (*sql.DB, *sqlcheckpoint.Instances) {
	t.Helper()
	db, err := sql.Open("pgx", pgtest.DSN(t))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	tbl, err := sqlcheckpoint.NewInstances(sqlcheckpoint.Postgres, sqlcheckpoint.Postgres.Quote(pgtest.Name("ick")))
	require.NoError(t, err)
	_, err = db.Exec(tbl.CreateSQL())
	require.NoError(t, err)
	t.Cleanup(func() { db.Exec(`DROP TABLE ` + tbl.Name()) }) //nolint:errcheck
	return db, tbl
}

func claimInstance(t *testing.T, db *sql.DB, tbl *sqlcheckpoint.Instances, instance string) (*sqlcheckpoint.Lease, []byte) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, tbl.Ensure(ctx, sqlcheckpoint.SQL(db), "p", "", instance))
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	l, cp, err := tbl.Claim(ctx, sqlcheckpoint.SQL(tx), "p", "", instance)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	return l, cp
}

// Two instances' transactions that both passed Lock for one partition (a
// hand-over racing a zombie): Advance locks every row of the pipeline, so
// the second to get there sees the first's commit and is refused with
// ErrConflict, instead of both committing the partition's records.
func TestPostgresInstancesAdvanceSerialises(t *testing.T) {
	db, tbl := pgInstances(t)
	ctx := context.Background()
	pos := func(n int64) []byte { return checkpoint.Positions{"t/0": n}.Encode() }
	a, cp := claimInstance(t, db, tbl, "a")
	require.Nil(t, cp)
	b, _ := claimInstance(t, db, tbl, "b")
	require.Equal(t, "b", b.Instance)

	txA, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer txA.Rollback() //nolint:errcheck
	txB, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer txB.Rollback() //nolint:errcheck
	for _, w := range []struct {
		tx *sql.Tx
		l  *sqlcheckpoint.Lease
	}{{txA, a}, {txB, b}} {
		_, replay, err := tbl.Lock(ctx, sqlcheckpoint.SQL(w.tx), w.l, pos(10))
		require.NoError(t, err)
		require.False(t, replay)
	}
	require.NoError(t, tbl.Advance(ctx, sqlcheckpoint.SQL(txA), a, pos(10)))
	done := make(chan error, 1)
	go func() { done <- tbl.Advance(ctx, sqlcheckpoint.SQL(txB), b, pos(12)) }()
	select {
	case err := <-done:
		t.Fatalf("b's Advance did not wait for a's lock: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, txA.Commit())
	err = <-done
	require.ErrorIs(t, err, flightline.ErrConflict)
	var moved *sqlcheckpoint.MovedError
	require.ErrorAs(t, err, &moved)
	require.Equal(t, "t/0", moved.Key)
	require.NoError(t, txB.Rollback())

	got, err := tbl.Read(ctx, sqlcheckpoint.SQL(db), "p", "")
	require.NoError(t, err)
	require.Equal(t, string(pos(10)), string(got))

	// b re-claims and resumes from a's commit; a's older writer is not
	// fenced by that, a newer claim of a is.
	b2, cp := claimInstance(t, db, tbl, "b")
	require.Equal(t, string(pos(10)), string(cp))
	_, err = writeInstance(ctx, db, tbl, b2, pos(12))
	require.NoError(t, err)
	_, err = writeInstance(ctx, db, tbl, a, checkpoint.Positions{"t/1": 3}.Encode())
	require.NoError(t, err, "b's claim does not fence a")
	claimInstance(t, db, tbl, "a")
	_, err = writeInstance(ctx, db, tbl, a, checkpoint.Positions{"t/1": 4}.Encode())
	require.ErrorIs(t, err, flightline.ErrFenced)
	var fenced *sqlcheckpoint.FencedError
	require.ErrorAs(t, err, &fenced)
	require.Equal(t, "a", fenced.Instance)
	got, err = tbl.Read(ctx, sqlcheckpoint.SQL(db), "p", "")
	require.NoError(t, err)
	require.Equal(t, `{"positions":{"t/0":12,"t/1":3}}`, string(got))
}

func writeInstance(ctx context.Context, db *sql.DB, tbl *sqlcheckpoint.Instances, l *sqlcheckpoint.Lease, cp []byte) (bool, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback() //nolint:errcheck
	_, replay, err := tbl.Lock(ctx, sqlcheckpoint.SQL(tx), l, cp)
	if err != nil || replay {
		return replay, err
	}
	if err := tbl.Advance(ctx, sqlcheckpoint.SQL(tx), l, cp); err != nil {
		return false, err
	}
	return false, tx.Commit()
}

// Opaque checkpoints merge only while one instance holds one.
func TestPostgresInstancesOpaque(t *testing.T) {
	db, tbl := pgInstances(t)
	ctx := context.Background()
	a, _ := claimInstance(t, db, tbl, "a")
	_, err := writeInstance(ctx, db, tbl, a, []byte("lsn-1"))
	require.NoError(t, err)
	replay, err := writeInstance(ctx, db, tbl, a, []byte("lsn-1"))
	require.NoError(t, err)
	require.True(t, replay)
	b, cp := claimInstance(t, db, tbl, "b")
	require.Equal(t, "lsn-1", string(cp))
	_, err = writeInstance(ctx, db, tbl, b, []byte("lsn-2"))
	require.NoError(t, err)
	_, err = tbl.Read(ctx, sqlcheckpoint.SQL(db), "p", "")
	require.ErrorIs(t, err, flightline.ErrInvalidInput)
}

// The ADBC PostgreSQL sink (Table) and the PostgreSQL sink (Instances) use
// the same default checkpoint table name; once the PostgreSQL sink has
// upgraded the table to one row per instance, the ADBC sink's pipelines
// must still claim, write and resume on it — as the unnamed instance. (A
// full make test found the ADBC sink's INSERT … ON CONFLICT (pipeline_id,
// target) refused there: no unique key on those two columns any more.)
func TestPostgresTableOnInstancesLayout(t *testing.T) {
	db, inst := pgInstances(t)
	ctx := context.Background()
	tbl := sqlcheckpoint.New(sqlcheckpoint.Postgres, inst.Name())
	_, err := db.Exec(tbl.CreateSQL()) // IF NOT EXISTS: leaves the upgraded table as it is
	require.NoError(t, err)
	data := pgtest.Name("data")
	_, err = db.Exec(`CREATE TABLE ` + data + ` (cp text)`)
	require.NoError(t, err)
	t.Cleanup(func() { db.Exec(`DROP TABLE ` + data) }) //nolint:errcheck

	// Another pipeline of the table has named instances.
	require.NoError(t, inst.Ensure(ctx, sqlcheckpoint.SQL(db), "other", "", "a"))

	e1, cp := claim(t, db, tbl, "p", "")
	require.Equal(t, int64(1), e1)
	require.Nil(t, cp)
	_, err = write(ctx, db, tbl, data, "p", "", e1, []byte("a"), 2)
	require.NoError(t, err)
	e2, cp := claim(t, db, tbl, "p", "")
	require.Equal(t, int64(2), e2)
	require.Equal(t, "a", string(cp))
	_, err = write(ctx, db, tbl, data, "p", "", e1, []byte("b"), 1)
	require.ErrorIs(t, err, flightline.ErrFenced)
	got, err := inst.Read(ctx, sqlcheckpoint.SQL(db), "p", "")
	require.NoError(t, err)
	require.Equal(t, "a", string(got), "the instances' reader sees it as the unnamed instance's checkpoint")
}

// Where Lock cannot lock the row (Snowflake's standard tables), two
// transactions of one writer can read the same checkpoint: a retry of a
// batch whose earlier try's COMMIT was still on its way. The later one's
// Advance, run once the earlier one has committed, still finds its epoch;
// it must not move the checkpoint past the same batch a second time, but
// fail with ErrConflict (not ErrFenced: the writer still holds the
// target), so that the retry finds the batch covered. PostgreSQL without
// FOR UPDATE, in READ COMMITTED, behaves as Snowflake does here. Before
// Advance compared the checkpoint, the second Advance succeeded: the batch
// was committed twice. Both the first batch (no checkpoint stored yet) and
// a later one.
func TestAdvanceWithoutRowLockComparesCheckpoint(t *testing.T) {
	for _, stored := range []bool{false, true} {
		t.Run(map[bool]string{false: "first batch", true: "later batch"}[stored], func(t *testing.T) {
			db, pg := pgTable(t)
			d := sqlcheckpoint.Postgres
			d.ForUpdate, d.CompareCheckpoint = sqlcheckpoint.Snowflake.ForUpdate, sqlcheckpoint.Snowflake.CompareCheckpoint
			tbl := sqlcheckpoint.New(d, pg.Name())
			ctx := context.Background()
			epoch, _ := claim(t, db, tbl, "p", "")
			if stored {
				tx, err := db.BeginTx(ctx, nil)
				require.NoError(t, err)
				last, _, err := tbl.Lock(ctx, sqlcheckpoint.SQL(tx), "p", "", epoch, cpAt(5))
				require.NoError(t, err)
				require.NoError(t, tbl.Advance(ctx, sqlcheckpoint.SQL(tx), "p", "", epoch, last, cpAt(5)))
				require.NoError(t, tx.Commit())
			}

			batch := cpAt(10)
			var txs [2]*sql.Tx
			var lasts [2][]byte
			for i := range txs {
				tx, err := db.BeginTx(ctx, nil)
				require.NoError(t, err)
				defer tx.Rollback() //nolint:errcheck
				last, replay, err := tbl.Lock(ctx, sqlcheckpoint.SQL(tx), "p", "", epoch, batch)
				require.NoError(t, err)
				require.False(t, replay)
				txs[i], lasts[i] = tx, last
			}
			require.NoError(t, tbl.Advance(ctx, sqlcheckpoint.SQL(txs[0]), "p", "", epoch, lasts[0], batch))
			require.NoError(t, txs[0].Commit())

			err := tbl.Advance(ctx, sqlcheckpoint.SQL(txs[1]), "p", "", epoch, lasts[1], batch)
			require.ErrorIs(t, err, flightline.ErrConflict, "the same batch moved the checkpoint twice")
			require.NotErrorIs(t, err, flightline.ErrFenced)
			require.NoError(t, txs[1].Rollback())

			// The retry finds the batch covered.
			tx, err := db.BeginTx(ctx, nil)
			require.NoError(t, err)
			defer tx.Rollback() //nolint:errcheck
			_, replay, err := tbl.Lock(ctx, sqlcheckpoint.SQL(tx), "p", "", epoch, batch)
			require.NoError(t, err)
			require.True(t, replay)
		})
	}
}

// cpAt is a checkpoint of one partition at offset n.
func cpAt(n int64) []byte {
	return checkpoint.Positions{"t/0": n}.Encode()
}

// ClaimAutocommit (Snowflake's claim): each claim a new epoch, also
// when eight race; it fences the earlier writer as Claim does; and a
// writer's Advance that is not yet committed when the claim starts is in
// the checkpoint the claim returns once it commits (the raise waits for
// its row lock), never lost under it.
func TestPostgresClaimAutocommit(t *testing.T) {
	db, tbl := pgTable(t)
	ctx := context.Background()
	data := pgtest.Name("data")
	_, err := db.Exec(`CREATE TABLE ` + data + ` (cp text)`)
	require.NoError(t, err)
	t.Cleanup(func() { db.Exec(`DROP TABLE ` + data) }) //nolint:errcheck
	c := sqlcheckpoint.SQL(db)
	require.NoError(t, tbl.Ensure(ctx, c, "p", ""))

	e1, cp, err := tbl.ClaimAutocommit(ctx, c, "p", "")
	require.NoError(t, err)
	require.Equal(t, int64(1), e1)
	require.Nil(t, cp)
	_, err = write(ctx, db, tbl, data, "p", "", e1, []byte("a"), 1)
	require.NoError(t, err)
	e2, cp, err := tbl.ClaimAutocommit(ctx, c, "p", "")
	require.NoError(t, err)
	require.Equal(t, int64(2), e2)
	require.Equal(t, "a", string(cp))
	_, err = write(ctx, db, tbl, data, "p", "", e1, []byte("b"), 1)
	require.ErrorIs(t, err, flightline.ErrFenced)

	// The epoch-2 writer's batch is between its Advance and its COMMIT
	// when a claim starts.
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	last, replay, err := tbl.Lock(ctx, sqlcheckpoint.SQL(tx), "p", "", e2, []byte("b"))
	require.NoError(t, err)
	require.False(t, replay)
	require.NoError(t, tbl.Advance(ctx, sqlcheckpoint.SQL(tx), "p", "", e2, last, []byte("b")))
	type claimed struct {
		epoch int64
		cp    []byte
		err   error
	}
	done := make(chan claimed, 1)
	go func() {
		e, cp, err := tbl.ClaimAutocommit(ctx, c, "p", "")
		done <- claimed{e, cp, err}
	}()
	select {
	case got := <-done:
		t.Fatalf("the claim did not wait for the writer's open transaction: %+v", got)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, tx.Commit())
	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, int64(3), got.epoch)
	require.Equal(t, "b", string(got.cp), "the batch committed under the claim is in its checkpoint")

	distinctEpochs(t, 8, func() int64 {
		e, _, err := tbl.ClaimAutocommit(ctx, c, "p", "")
		assert.NoError(t, err)
		return e
	})
}
