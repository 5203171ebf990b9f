package snowflake

// SetBeforeCommitHook makes f run in every WriteBatch between the
// checkpoint's compare-and-set and COMMIT, until restore is called. Tests
// only; not safe to set while writers run.
func SetBeforeCommitHook(f func()) (restore func()) {
	testHookBeforeCommit = f
	return func() { testHookBeforeCommit = nil }
}

// DeadTxn is one row of SHOW TRANSACTIONS, for TestDeadTxns.
type DeadTxn struct {
	ID   int64
	Name string
}

// DeadTxns runs deadTxns over rows for the pipeline (pipeline, target
// key), returning the ids picked.
func DeadTxns(rows []DeadTxn, pipeline, key string) []int64 {
	in := make([]openTxn, len(rows))
	for i, r := range rows {
		in[i] = openTxn{id: r.ID, name: r.Name}
	}
	var ids []int64
	for _, t := range deadTxns(in, txnPrefix(pipeline, key)) {
		ids = append(ids, t.id)
	}
	return ids
}

// TxnName is the name the writers of (pipeline, key) give their batch
// transactions at epoch.
func TxnName(pipeline, key string, epoch int64) string {
	return batchTxn(txnPrefix(pipeline, key), epoch)
}
