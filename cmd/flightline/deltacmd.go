package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	sinkdelta "github.com/flightline/flightline/flightsink/delta"
	"github.com/flightline/flightline/internal/spec"
)

const deltaUsage = `usage: flightline delta optimize|vacuum [flags] URI

  optimize   rewrite the table's small files into files near --target-file-size,
             one commit per file (dataChange=false: streaming readers see no new
             data); safe beside running writers, whose appends win any conflict
  vacuum     delete log entries older than the log retention (a checkpoint
             older than it becomes the oldest version) and the data files no
             retained version references (see docs/sinks/delta.md)

URI is a local path or s3://BUCKET/PREFIX (credentials and AWS_ENDPOINT_URL
from the environment, as for the delta: kind).
`

// deltaCommand runs `flightline delta optimize|vacuum`.
func deltaCommand(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || (args[0] != "optimize" && args[0] != "vacuum") {
		fmt.Fprint(out, deltaUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return flag.ErrHelp
		}
		return fmt.Errorf("delta: want optimize or vacuum")
	}
	cmd := args[0]
	fs := flag.NewFlagSet("delta "+cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	target := fs.String("target-file-size", "32MiB", "optimize: the size to aim files at (a file under half of it is small)")
	dry := fs.Bool("dry-run", false, "vacuum: list what would be deleted, delete nothing")
	logRet := fs.Duration("log-retention", 0, "vacuum: override the table's delta.logRetentionDuration (default 30 days)")
	fileRet := fs.Duration("file-retention", 0, "vacuum: override the table's delta.deletedFileRetentionDuration (default 7 days)")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	fs.Usage = func() { fmt.Fprint(out, deltaUsage); fs.PrintDefaults() }
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("delta %s: want one table URI", cmd)
	}
	uri := strings.TrimPrefix(fs.Arg(0), "delta:")
	size, err := spec.ParseSize(*target)
	if err != nil {
		return fmt.Errorf("--target-file-size: %w", err)
	}
	if size < 1 { // the sink reads 0 as its default
		return fmt.Errorf("--target-file-size %s: want a positive size", *target)
	}
	s, err := sinkdelta.New(ctx, sinkdelta.Config{URI: uri, TargetFileSize: int64(size)}, sinkdelta.LogRetention(*logRet), sinkdelta.FileRetention(*fileRet))
	if err != nil {
		return err
	}
	start := time.Now()
	var res any
	var line string
	switch cmd {
	case "optimize":
		r, err := s.Optimize(ctx, "")
		if err != nil {
			return err
		}
		res = r
		line = fmt.Sprintf("optimized %s: %d small files (%d bytes) rewritten into %d (%d bytes) in %d commits, version %d, %d yielded to newer commits, %s",
			s.URL(""), r.FilesRemoved, r.BytesRemoved, r.FilesAdded, r.BytesAdded, r.Commits, r.Version, r.Yielded, time.Since(start).Round(time.Millisecond))
	case "vacuum":
		r, err := s.Vacuum(ctx, "", *dry)
		if err != nil {
			return err
		}
		res = r
		verb := "deleted"
		if r.DryRun {
			verb = "would delete"
		}
		line = fmt.Sprintf("vacuum %s: %s %d log files and %d data files; oldest version kept %d", s.URL(""), verb, len(r.LogFiles), len(r.DataFiles), r.Oldest)
		if r.Note != "" {
			line += " (" + r.Note + ")"
		}
		if r.DryRun && !*asJSON {
			for _, k := range append(append([]string{}, r.LogFiles...), r.DataFiles...) {
				fmt.Fprintln(out, k)
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintln(out, line)
	return nil
}
