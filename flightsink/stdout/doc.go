// Package stdout is a sink that prints batches for a person to read: a
// table on a terminal, JSON lines or CSV in a pipe. It is the quickest look
// at a source (`flightline sync --pipeline P --once` into stdout).
//
// It gives no delivery guarantee. A batch is written to the io.Writer, and
// flushed, before WriteBatch returns, but what happens to it there (a
// terminal scrolls, a pipe's reader exits, a redirected file is not
// synced) is out of the sink's sight. It keeps the last checkpoint of each
// pipeline in memory only, so a replay inside one process is a no-op and
// `sync --once` can see the end, while a restarted process answers no
// checkpoint and prints again whatever the source sends it (from the
// source's own committed position, if it has one). It does not fence: two
// writers of one pipeline both print.
//
// Pitfalls:
//   - Logs must not go to the same stream: the CLI logs to stderr.
//   - The table format aligns each column to the widest value seen so far
//     by the writer (truncated to MaxWidth runes with "…"), and prints the
//     header again when a column widens. Control characters are escaped,
//     so one value is one line.
//   - CSV prints its header once per Writer: a restarted pipeline prints it
//     again.
package stdout
