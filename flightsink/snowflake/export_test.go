package snowflake

import "time"

// SetBeforeCommitHook makes f run in every WriteBatch between the
// checkpoint's compare-and-set and COMMIT, until restore is called. Tests
// only; not safe to set while writers run.
func SetBeforeCommitHook(f func()) (restore func()) {
	testHookBeforeCommit = f
	return func() { testHookBeforeCommit = nil }
}

// DeadTxn is one row of SHOW TRANSACTIONS, for TestDeadTxns.
type DeadTxn struct {
	ID      int64
	Name    string
	Started time.Time
}

// DeadTxns runs deadTxns over rows for the pipeline (pipeline, target
// key), returning the ids picked; with the names a writer and a claim of
// that pipeline would give their transactions at epoch.
func DeadTxns(rows []DeadTxn, pipeline, key string, now time.Time) []int64 {
	in := make([]openTxn, len(rows))
	for i, r := range rows {
		in[i] = openTxn{id: r.ID, name: r.Name, started: r.Started}
	}
	var ids []int64
	for _, t := range deadTxns(in, txnPrefix(pipeline, key), now) {
		ids = append(ids, t.id)
	}
	return ids
}

// TxnNames are the names the writers of (pipeline, key) give a batch
// transaction at epoch and a claim.
func TxnNames(pipeline, key string, epoch int64) (batch, claim string) {
	p := txnPrefix(pipeline, key)
	return batchTxn(p, epoch), claimTxn(p)
}
