package snowflake

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A writer killed inside a transaction leaves it open on Snowflake, with
// its locks, until its session times out (four hours by default), and the
// next writer of the pipeline waits on those locks (LOCK_TIMEOUT) for as
// long. So every batch transaction of the sink is named after its pipeline
// and the writer's epoch (BEGIN TRANSACTION NAME), and a writer that claims
// a pipeline first aborts the transactions earlier writers of that
// pipeline left open: SHOW TRANSACTIONS lists the running transactions of
// the current user, SYSTEM$ABORT_TRANSACTION(id) rolls one back. Aborting
// a live earlier writer's batch costs nothing it would keep: the claim that
// follows fences it anyway, and its COMMIT fails. The claim itself runs in
// autocommit (sqlcheckpoint.Table.ClaimAutocommit), so a writer killed
// while claiming leaves no transaction behind.
//
// Name: FLIGHTLINE_<16 hex digits of the pipeline and target>_E<epoch>.

// txnPrefix is the name every transaction of (pipeline, target key) begins
// with: an unquoted identifier, so Snowflake keeps it as written.
func txnPrefix(pipeline, key string) string {
	h := sha256.Sum256([]byte(pipeline + "\x00" + key))
	return "FLIGHTLINE_" + strings.ToUpper(hex.EncodeToString(h[:8]))
}

// batchTxn is the name of a writer's batch transactions at epoch.
func batchTxn(prefix string, epoch int64) string { return fmt.Sprintf("%s_E%d", prefix, epoch) }

// openTxn is one row of SHOW TRANSACTIONS.
type openTxn struct {
	id      int64
	session string
	name    string
	started time.Time // zero when the server's answer had none
}

// deadTxns picks the transactions of prefix's pipeline to abort from
// SHOW TRANSACTIONS' rows: every batch transaction of the pipeline, of any
// epoch (the claim that follows fences them all). Other names (other
// pipelines and targets, other programs, unnamed transactions) are never
// picked.
func deadTxns(rows []openTxn, prefix string) []openTxn {
	var out []openTxn
	for _, r := range rows {
		rest, ok := strings.CutPrefix(r.name, prefix+"_E")
		if !ok {
			continue
		}
		if _, err := strconv.ParseUint(rest, 10, 63); err != nil {
			continue
		}
		out = append(out, r)
	}
	return out
}

// abortDead aborts the transactions earlier writers of prefix's pipeline
// left open (see deadTxns), before a claim that would wait on their locks.
// It is best effort: a failure is logged, and the claim then waits as it
// would have (LOCK_TIMEOUT, retried), until Snowflake ends the dead
// session. It returns the transactions aborted.
func (s *Sink) abortDead(ctx context.Context, prefix string) int {
	open, err := s.showTransactions(ctx)
	if err != nil {
		s.log.Warn("snowflake sink: listing open transactions failed; a transaction a killed writer left open is not aborted",
			"error", s.cfg.Redact(err.Error()))
		return 0
	}
	n := 0
	for _, t := range deadTxns(open, prefix) {
		var msg sql.NullString
		if err := s.db.QueryRowContext(ctx, fmt.Sprintf("SELECT SYSTEM$ABORT_TRANSACTION(%d)", t.id)).Scan(&msg); err != nil {
			s.log.Warn("snowflake sink: aborting an earlier writer's transaction failed",
				"transaction", t.id, "name", t.name, "session", t.session, "error", s.cfg.Redact(err.Error()))
			continue
		}
		n++
		s.log.Info("snowflake sink: aborted a transaction an earlier writer of the pipeline left open",
			"transaction", t.id, "name", t.name, "session", t.session, "started", t.started, "answer", msg.String)
	}
	return n
}

// showTransactions runs SHOW TRANSACTIONS, reading its columns by name.
func (s *Sink) showTransactions(ctx context.Context) ([]openTxn, error) {
	rows, err := s.db.QueryContext(ctx, "SHOW TRANSACTIONS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	at := map[string]int{}
	for i, c := range cols {
		at[strings.ToLower(c)] = i
	}
	for _, c := range []string{"id", "name"} {
		if _, ok := at[c]; !ok {
			return nil, fmt.Errorf("SHOW TRANSACTIONS has no %q column (columns %v)", c, cols)
		}
	}
	var out []openTxn
	for rows.Next() {
		vals := make([]any, len(cols))
		for i := range vals {
			vals[i] = new(any)
		}
		if err := rows.Scan(vals...); err != nil {
			return nil, err
		}
		get := func(c string) any {
			if i, ok := at[c]; ok {
				return *(vals[i].(*any))
			}
			return nil
		}
		id, err := strconv.ParseInt(strings.TrimSpace(text(get("id"))), 10, 64)
		if err != nil {
			continue
		}
		t := openTxn{id: id, session: text(get("session")), name: text(get("name"))}
		if v, ok := get("started_on").(time.Time); ok {
			t.started = v
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// text renders a scanned value as gosnowflake gives it (a string, bytes,
// or a number).
func text(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case []byte:
		return string(v)
	default:
		return fmt.Sprint(v)
	}
}
