// Package delta is Flightline's exactly-once Delta Lake sink, on local
// disk or S3 (docs/sinks/delta.md is the user's page).
//
// Every commit is one put-if-absent of the next log version holding the
// data files and the pipeline instance's checkpoint (a domainMetadata
// action and txn actions), so data and checkpoint land together or not at
// all; a crash leaves at most unreferenced files, which the cleanup
// (vacuum.go) deletes. A writer that loses a version reads the commits
// that beat it (reconcile): a newer claim of its instance fences it, its
// own earlier attempt that landed makes the batch a replay, anything else
// is retried on top.
//
// Two modes (Config.Mode):
//   - append (writer.go) adds a file per batch; Stage writes it ahead of
//     the commit (pipelining), since it depends on nothing in the table.
//   - merge (merge.go) applies a change stream by Config.Key: a commit
//     rewrites the live files holding its keys (remove + add, dataChange
//     true). Its files depend on the table at the commit, so it stages
//     nothing and plans again after every lost race.
//
// Pitfalls, said once:
//   - The background compaction (compact.go, background.go) commits on top
//     of the writer's own snapshot, between two of its commits, and only
//     while all its inputs are live there: a merge that removed one makes
//     it yield, or it would bring back the rows the merge deleted.
//   - A writer's snapshot is lean: the stats of files a checkpoint holds
//     are not in memory. Merge reads them back from the checkpoint once
//     per checkpoint version (keyRanges) to prune by key.
//   - No deletion vectors are written or read (the table feature is
//     refused): a merge reading a file without its vector would resurrect
//     deleted rows.
package delta
