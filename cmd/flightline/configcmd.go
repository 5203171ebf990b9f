package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/flightline/flightline/config"
)

// configFlag registers --config on fs.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", config.DefaultFile, "the config file")
}

// configCommand runs `flightline config show|doc`.
func configCommand(args []string, out io.Writer) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return errors.New("config: want a subcommand: show (the resolved file, secrets masked) or doc (the reference of every kind's keys)")
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "show":
		fs := newFlagSet("config show", "config show [--config FILE]")
		path := configFlag(fs)
		if err := parse(fs, rest); err != nil {
			return err
		}
		c, err := config.Load(*path, os.LookupEnv)
		if err != nil {
			return err
		}
		b, err := c.Show()
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	case "doc":
		fs := newFlagSet("config doc", "config doc")
		if err := parse(fs, rest); err != nil {
			return err
		}
		_, err := io.WriteString(out, config.Reference())
		return err
	case "schema":
		return configSchemaCommand(rest, out)
	case "apply":
		return configApplyCommand(rest, os.Stdin, out)
	}
	return fmt.Errorf("config: unknown subcommand %q: want show or doc", args[0])
}

// checkCommand runs `flightline check`: it loads the file, then opens each
// endpoint and asks it one read-only question: a source its streams (and
// whether the pipelines' streams are among them), a sink the checkpoint
// of each pipeline writing to it. That exercises reachability, the
// credentials, and the target: a sink that can answer Checkpoint has (or
// can create, for the kinds that create on first use) its checkpoint
// store. check never calls Open, which would fence a running pipeline.
func checkCommand(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("check", "check [--config FILE] [--timeout D]")
	path := configFlag(fs)
	timeout := fs.Duration("timeout", 20*time.Second, "how long each endpoint may take to answer")
	once := fs.Bool("once", false, "also require what sync --once requires: that each pipeline's source can tell where its stream ends")
	var c common
	c.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg, err := config.Load(*path, os.LookupEnv)
	if err != nil {
		fmt.Fprintf(out, "FAIL  %s: %v\n", *path, err)
		return err
	}
	fmt.Fprintf(out, "ok    %s: %s\n", *path, cfg.Summary())
	log, err := c.logger(io.Discard)
	if err != nil {
		return err
	}
	failed := 0
	cfg.Check(ctx, *timeout, *once, log, func(r config.CheckResult) {
		if r.Err != nil {
			failed++
			fmt.Fprintf(out, "FAIL  %-32s %-10s %s\n", r.Ref, r.Kind, strings.Join(strings.Fields(r.Err.Error()), " "))
			return
		}
		fmt.Fprintf(out, "ok    %-32s %-10s %s\n", r.Ref, r.Kind, r.Detail)
	})
	if failed > 0 {
		return fmt.Errorf("check: %d endpoint(s) failed", failed)
	}
	return nil
}

// configSchemaCommand runs `flightline config schema --json`.
func configSchemaCommand(args []string, out io.Writer) error {
	fs := newFlagSet("config schema", "config schema --json")
	asJSON := fs.Bool("json", false, "print the schema as JSON (the only form)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if !*asJSON {
		return fmt.Errorf("config schema: want --json (for the reference as text: flightline config doc)")
	}
	return config.WriteSchema(out)
}
