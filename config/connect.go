package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/flightline/flightline/internal/configedit"
	"github.com/flightline/flightline/internal/spec"
)

// `flightline connect` and `flightline config apply --json` write
// flightline.yml through one merge writer (internal/configedit), then
// load the whole result with the real loader before writing it,
// atomically. The Python package's Config.save calls config apply, so the
// command line and Python cannot disagree.

// roles maps connect's first argument to its section.
var roles = map[string]string{
	"source":          secSources,
	"sink":            secSinks,
	"deadletter-sink": secDeadLetters,
	"schema-sink":     secSchemaSinks,
}

// EditKind is the section connect's role (source, sink, deadletter-sink,
// schema-sink) writes to, and kind's keys there as the merge writer
// (configedit.Apply) needs them. An unknown role or kind is an error that
// lists the known ones.
func EditKind(role, kind string) (section string, k configedit.Kind, err error) {
	sec, ok := roles[role]
	if !ok {
		return "", configedit.Kind{}, fmt.Errorf("connect: %q: want source, sink, deadletter-sink or schema-sink", role)
	}
	k, ok = editKinds(sec, kind)
	if !ok {
		known := mainKinds(sec)
		if sec == secSchemaSinks {
			known = []string{"glue"}
		}
		return "", configedit.Kind{}, fmt.Errorf("connect %s: unknown kind %q (known: %s)", role, kind, strings.Join(known, ", "))
	}
	return sec, k, nil
}

// editKinds is the file's kinds as the merge writer needs them.
func editKinds(section, kind string) (configedit.Kind, bool) {
	var d *decl
	if section == secSchemaSinks {
		if kind == "glue" {
			d = glueSchemaDecl
		}
	} else if slices.Contains([]string{secSources, secSinks, secDeadLetters}, section) {
		d = kindsOf(section)[kind]
	}
	if d == nil || !slices.Contains(mainKinds(section), kind) && section != secSchemaSinks {
		return configedit.Kind{}, false
	}
	k := configedit.Kind{Keys: map[string]configedit.Key{}}
	if d.loc != "" {
		k.Keys[d.loc] = configedit.Key{}
	}
	for _, f := range d.fields {
		k.Keys[f.Name] = configedit.Key{List: f.Type == spec.List, Secret: f.Secret}
	}
	if d.extra != nil {
		for _, key := range d.extra.Keys {
			k.Keys[key] = configedit.Key{Secret: slices.Contains(d.extra.Secret, key)}
		}
	}
	return k, true
}

// ApplyResult is what an edit did.
type ApplyResult struct {
	Path    string `json:"path"`
	Changed bool   `json:"changed"` // the result differs from the file
	Written bool   `json:"written"` // and was written (not a dry run)
	// Incomplete are the pipelines still missing a source or a sink; the
	// rest of the file was validated without them.
	Incomplete []string `json:"incomplete_pipelines"`
	YAML       string   `json:"yaml"` // the resulting file
}

// placeholderEnv is the environment the result is validated in: a
// variable that is not set at write time (a secret set only where the
// pipeline runs) stands for "0", which every key type but an enum takes.
func placeholderEnv(name string) (string, bool) {
	if v, ok := os.LookupEnv(name); ok {
		return v, true
	}
	return "0", true
}

// Apply applies ch to the file at path (a missing file is an empty one),
// validates the result with the config loader and, unless dryRun, writes
// it atomically: a crash leaves the old file or the new one. Comments and
// order are kept. A result that would not load leaves the file as it was.
func Apply(path string, ch configedit.Change, dryRun bool) (ApplyResult, error) {
	res := ApplyResult{Path: path, Incomplete: []string{}}
	src, err := os.ReadFile(path)
	mode := fs.FileMode(0o644)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return res, fmt.Errorf("config: %w", err)
	default:
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
		}
	}
	out, err := configedit.Apply(src, ch, editKinds)
	if err != nil {
		return res, fmt.Errorf("%s: %w", path, err)
	}
	pruned, incomplete, err := configedit.Prune(out)
	if err != nil {
		return res, err
	}
	if _, err := Parse(path, pruned, placeholderEnv); err != nil {
		return res, fmt.Errorf("the result would not load, so %s is left as it was: %w", path, err)
	}
	if incomplete != nil {
		res.Incomplete = incomplete
	}
	res.YAML = string(out)
	res.Changed = !bytes.Equal(src, out)
	if dryRun || !res.Changed {
		return res, nil
	}
	if err := writeAtomic(path, out, mode); err != nil {
		return res, err
	}
	res.Written = true
	return res, nil
}

// writeAtomic replaces path with b: a temporary file in the same
// directory, synced, then renamed over path, then the directory synced,
// so a crash leaves the old file or the new one, never a torn one.
func writeAtomic(path string, b []byte, mode fs.FileMode) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(b); err == nil {
		if err = f.Chmod(mode); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if d, derr := os.Open(dir); derr == nil {
		d.Sync() //nolint:errcheck // best effort: the rename is done
		d.Close()
	}
	return nil
}

// applyRequest is what `flightline config apply --json` reads on its
// standard input.
type applyRequest struct {
	Config  string `json:"config"`
	DryRun  bool   `json:"dry_run"`
	Entries []struct {
		Section  string                     `json:"section"`
		Name     string                     `json:"name"`
		Kind     string                     `json:"kind"`
		Fields   map[string]json.RawMessage `json:"fields"`
		Replace  bool                       `json:"replace"`
		Pipeline string                     `json:"pipeline"`
	} `json:"entries"`
	Pipelines []struct {
		Name string                     `json:"name"`
		Keys map[string]json.RawMessage `json:"keys"`
	} `json:"pipelines"`
}

// jsonValue turns a JSON value into what configedit takes: a string (from
// a string, number or bool), a []string (from a list of those), or nil
// (from null).
func jsonValue(raw json.RawMessage) (any, error) {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	one := func(v any) (string, error) {
		switch v := v.(type) {
		case string:
			return v, nil
		case json.Number:
			return v.String(), nil
		case bool:
			return strconv.FormatBool(v), nil
		}
		return "", fmt.Errorf("want a string, number or bool, not %s", raw)
	}
	switch v := v.(type) {
	case nil:
		return nil, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, it := range v {
			s, err := one(it)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	return one(v)
}

// ApplyJSON is `flightline config apply --json`: it reads one request
// (applyRequest: the file, entries to add or update, pipeline keys) from
// in, applies it to the file at path (empty: the request's file, else
// flightline.yml; dry: write nothing) and writes one ApplyResult, or
// {"error": …, "reason": …} with the error also returned, to out. The
// Python package's Config.save speaks this protocol.
func ApplyJSON(in io.Reader, out io.Writer, path string, dry bool) error {
	res, err := configApply(in, path, dry)
	enc := json.NewEncoder(out)
	if err != nil {
		enc.Encode(map[string]string{"error": err.Error(), "reason": refusalReason(err)}) //nolint:errcheck // the error is returned
		return err
	}
	return enc.Encode(res)
}

func refusalReason(err error) string {
	switch {
	case errors.Is(err, configedit.ErrPlaintextSecret):
		return "plaintext_secret"
	case errors.Is(err, configedit.ErrKindChange):
		return "kind_change"
	case errors.Is(err, configedit.ErrUnknown):
		return "unknown"
	}
	return "invalid"
}

func configApply(in io.Reader, path string, dry bool) (ApplyResult, error) {
	var req applyRequest
	dec := json.NewDecoder(io.LimitReader(in, 16<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return ApplyResult{}, fmt.Errorf("config apply: the request is not valid JSON: %w", err)
	}
	if path == "" {
		path = req.Config
	}
	if path == "" {
		path = DefaultFile
	}
	var ch configedit.Change
	for _, e := range req.Entries {
		fields := map[string]any{}
		for k, raw := range e.Fields {
			v, err := jsonValue(raw)
			if err != nil {
				return ApplyResult{}, fmt.Errorf("config apply: %s.%s.%s: %w", e.Section, e.Name, k, err)
			}
			if v != nil {
				fields[k] = v
			}
		}
		ch.Entries = append(ch.Entries, configedit.Entry{Section: e.Section, Name: e.Name, Kind: e.Kind,
			Fields: fields, Replace: e.Replace, Pipeline: e.Pipeline})
	}
	for _, p := range req.Pipelines {
		keys := map[string]any{}
		for k, raw := range p.Keys {
			v, err := jsonValue(raw)
			if err != nil {
				return ApplyResult{}, fmt.Errorf("config apply: pipelines.%s.%s: %w", p.Name, k, err)
			}
			keys[k] = v
		}
		ch.Pipelines = append(ch.Pipelines, configedit.Pipeline{Name: p.Name, Keys: keys})
	}
	return Apply(path, ch, dry || req.DryRun)
}
