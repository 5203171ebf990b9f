package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/flightline/flightline/config"
	"github.com/flightline/flightline/internal/configedit"
	"github.com/flightline/flightline/internal/spec"
)

const connectUsage = `Usage: flightline connect source|sink|deadletter-sink|schema-sink KIND --name NAME [--pipeline P] [--config FILE] [--dry-run] [--replace] [--KEY VALUE]…

Adds the entry NAME of KIND to the file's section (or updates it: the keys
given are set, the others kept; --replace drops the others), and links it
to pipeline P (its source, sink, deadletter_sink or schema_sink). KEY is one
of the kind's keys (flightline config doc); a list key may be repeated or
comma-separated. A secret key takes only ${VAR} (single-quote it in the
shell). The whole result is loaded before the file is replaced atomically;
comments and order are kept.
`

// connectCommand runs `flightline connect`.
func connectCommand(args []string, out io.Writer) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprint(out, connectUsage)
		return nil
	}
	if len(args) < 2 || strings.HasPrefix(args[0], "-") || strings.HasPrefix(args[1], "-") {
		return fmt.Errorf("connect: want ROLE KIND: %s", strings.SplitN(connectUsage, "\n", 2)[0])
	}
	role, kind := args[0], args[1]
	sec, k, err := config.EditKind(role, kind)
	if err != nil {
		return err
	}
	e := configedit.Entry{Section: sec, Kind: kind, Fields: map[string]any{}}
	path, dryRun := config.DefaultFile, false
	rest := args[2:]
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if !strings.HasPrefix(a, "--") {
			return fmt.Errorf("connect: unexpected argument %q: want --KEY VALUE", a)
		}
		key, val, hasVal := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		switch key {
		case "dry-run", "replace":
			b := true
			if hasVal {
				var err error
				if b, err = strconv.ParseBool(val); err != nil {
					return fmt.Errorf("connect: --%s=%q: want true or false", key, val)
				}
			}
			if key == "dry-run" {
				dryRun = b
			} else {
				e.Replace = b
			}
			continue
		}
		if !hasVal {
			if i+1 >= len(rest) {
				return fmt.Errorf("connect: --%s needs a value", key)
			}
			i++
			val = rest[i]
		}
		switch key {
		case "config":
			path = val
			continue
		case "pipeline":
			e.Pipeline = val
			continue
		case "name":
			e.Name = val
			continue
		}
		key = strings.ReplaceAll(key, "-", "_")
		if _, known := k.Keys[key]; !known {
			valid := slices.Sorted(func(yield func(string) bool) {
				for k := range k.Keys {
					if !yield(k) {
						return
					}
				}
			})
			if near := spec.Nearest(key, valid); near != "" {
				return fmt.Errorf("connect %s %s: unknown key --%s; did you mean --%s?", role, kind, key, near)
			}
			return fmt.Errorf("connect %s %s: unknown key --%s (keys: %s)", role, kind, key, strings.Join(valid, ", "))
		}
		switch prev := e.Fields[key].(type) {
		case nil:
			e.Fields[key] = val
		case string:
			e.Fields[key] = []string{prev, val}
		case []string:
			e.Fields[key] = append(prev, val)
		}
	}
	if e.Name == "" {
		return fmt.Errorf("connect: --name is required")
	}
	res, err := config.Apply(path, configedit.Change{Entries: []configedit.Entry{e}}, dryRun)
	if err != nil {
		return err
	}
	switch {
	case dryRun:
		fmt.Fprint(out, res.YAML)
	case !res.Changed:
		fmt.Fprintf(out, "%s: %s.%s unchanged\n", path, sec, e.Name)
	default:
		fmt.Fprintf(out, "%s: wrote %s.%s (%s)", path, sec, e.Name, kind)
		if e.Pipeline != "" {
			fmt.Fprintf(out, ", linked to pipelines.%s", e.Pipeline)
		}
		fmt.Fprintln(out)
	}
	for _, p := range res.Incomplete {
		fmt.Fprintf(out, "note: pipelines.%s needs a source and a sink before it can run\n", p)
	}
	return nil
}

// configApplyCommand runs `flightline config apply --json`: one request
// (applyRequest) on in, one applyResult (or {"error": …}) on out.
func configApplyCommand(args []string, in io.Reader, out io.Writer) error {
	fs := newFlagSet("config apply", "config apply --json [--config FILE] [--dry-run] < request.json")
	asJSON := fs.Bool("json", false, "read the request as JSON on standard input (the only form)")
	path := fs.String("config", "", "the config file (default: the request's config, else "+config.DefaultFile+")")
	dry := fs.Bool("dry-run", false, "validate and print the result, write nothing")
	if err := parse(fs, args); err != nil {
		return err
	}
	if !*asJSON {
		return errors.New("config apply: want --json and a request on standard input")
	}
	return config.ApplyJSON(in, out, *path, *dry)
}
