package snowflake

// SetBeforeCommitHook makes f run in every WriteBatch between the
// checkpoint's compare-and-set and COMMIT, until restore is called. Tests
// only; not safe to set while writers run.
func SetBeforeCommitHook(f func()) (restore func()) {
	testHookBeforeCommit = f
	return func() { testHookBeforeCommit = nil }
}
