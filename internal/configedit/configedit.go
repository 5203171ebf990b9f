// Package configedit is the one merge writer of flightline.yml: it adds
// or updates an entry of a section (a source, a sink, a dead-letter sink,
// a schema sink) and links it to a pipeline, on the file's yaml.v3 node
// tree, so the file's comments, key order and flow or block style stay
// as they were. `flightline connect` and `flightline config apply --json`
// (which the Python package's Config.save calls) both go through Apply,
// so the command line and Python cannot disagree.
//
// Apply edits; it does not validate the whole result. Its caller loads
// the result with the real config loader before writing it (Validate
// form: Prune drops the pipelines an edit left without a source or sink,
// which a series of connect calls builds one end at a time).
//
// Refused, before anything is written: a key the kind does not declare,
// a plaintext value for a secret key (only ${VAR} is accepted), and a
// change of an existing entry's kind.
package configedit

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/flightline/flightline"
)

// The sections an entry may be in, and the pipeline key that links one.
var linkKey = map[string]string{
	"sources":          "source",
	"sinks":            "sink",
	"deadletter_sinks": "deadletter_sink",
	"schema_sinks":     "schema_sink",
}

// sectionOrder is the order new sections are added in.
var sectionOrder = []string{"sources", "sinks", "deadletter_sinks", "schema_sinks", "pipelines", "listen"}

// Key is what the editor needs to know of one key of a kind.
type Key struct {
	List   bool // a list: a []string value is written as a YAML sequence
	Secret bool // only ${VAR} is accepted
}

// Kind is what the editor needs to know of a kind: its keys, the
// location key included.
type Kind struct {
	Keys map[string]Key
}

// Kinds finds the declaration of kind in section; ok is false for an
// unknown kind.
type Kinds func(section, kind string) (k Kind, ok bool)

// Entry is an entry to add or update.
type Entry struct {
	Section string // sources, sinks, deadletter_sinks or schema_sinks
	Name    string
	Kind    string
	// Fields are the kind's keys: each value a string or a []string
	// (for a list key).
	Fields map[string]any
	// Replace drops the keys of an existing entry that Fields does not
	// name; otherwise they are kept and Fields' keys set.
	Replace bool
	// Pipeline, when not "", is linked to the entry: its source, sink,
	// deadletter_sink or schema_sink is set to SECTION.NAME (and a
	// pipeline that does not exist is added).
	Pipeline string
}

// Pipeline sets keys of a pipelines entry (added when missing); a nil
// value removes the key.
type Pipeline struct {
	Name string
	Keys map[string]any
}

// Change is one edit: entries, then pipelines, applied in order.
type Change struct {
	Entries   []Entry
	Pipelines []Pipeline
}

// Errors callers may branch on; each wraps flightline.ErrInvalidInput.
var (
	ErrPlaintextSecret = fmt.Errorf("%w: a secret key takes only ${VAR}", flightline.ErrInvalidInput)
	ErrKindChange      = fmt.Errorf("%w: an entry's kind cannot change", flightline.ErrInvalidInput)
	ErrUnknown         = fmt.Errorf("%w: unknown", flightline.ErrInvalidInput)
)

var envRef = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`)

var name = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`)

// Apply returns src with ch applied. src may be empty (a new file).
func Apply(src []byte, ch Change, kinds Kinds) ([]byte, error) {
	doc, err := parse(src)
	if err != nil {
		return nil, err
	}
	root := doc.Content[0]
	for _, e := range ch.Entries {
		if err := applyEntry(root, e, kinds); err != nil {
			return nil, err
		}
	}
	for _, p := range ch.Pipelines {
		if err := applyPipeline(root, p); err != nil {
			return nil, err
		}
	}
	return encode(doc)
}

func parse(src []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("%w: not valid YAML: %v", flightline.ErrInvalidInput, err)
	}
	if doc.Kind == 0 { // empty input, or only comments: keep them
		doc = yaml.Node{Kind: yaml.DocumentNode}
		var comments []string
		for _, line := range strings.Split(string(src), "\n") {
			if t := strings.TrimSpace(line); strings.HasPrefix(t, "#") {
				comments = append(comments, t)
			}
		}
		doc.HeadComment = strings.Join(comments, "\n")
	}
	if len(doc.Content) == 0 || (doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].Tag == "!!null") {
		doc.Content = []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}
	}
	if doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: the file is not a mapping of sections", flightline.ErrInvalidInput)
	}
	return &doc, nil
}

func encode(doc *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// scalar is s as a scalar node. The loader reads every value as text, so
// only a value YAML would read as null is tagged (and so quoted) as a
// string; the rest are written plain where YAML allows.
func scalar(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Value: s}
	switch s {
	case "", "~", "null", "Null", "NULL":
		n.Tag = "!!str"
	}
	return n
}

// get returns the value of key k in mapping m, or nil.
func get(m *yaml.Node, k string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == k {
			return m.Content[i+1]
		}
	}
	return nil
}

// set sets key k of mapping m to v, in place when k exists (its key
// node, and so its comments, kept), appended otherwise.
func set(m *yaml.Node, k string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == k {
			old := m.Content[i+1]
			v.LineComment, v.HeadComment, v.FootComment = old.LineComment, old.HeadComment, old.FootComment
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, scalar(k), v)
}

func remove(m *yaml.Node, k string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == k {
			m.Content = slices.Delete(m.Content, i, i+2)
			return
		}
	}
}

// section returns the mapping of section sec, adding it (in
// sectionOrder) when missing; an empty section (sec: with no value)
// becomes a mapping.
func section(root *yaml.Node, sec string) (*yaml.Node, error) {
	if v := get(root, sec); v != nil {
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			v.Kind, v.Tag, v.Value, v.Style = yaml.MappingNode, "!!map", "", 0
		}
		if v.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%w: section %s is not a mapping", flightline.ErrInvalidInput, sec)
		}
		return v, nil
	}
	m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	// Insert before the first existing section that comes after sec.
	at := len(root.Content)
	after := sectionOrder[slices.Index(sectionOrder, sec)+1:]
	for i := 0; i+1 < len(root.Content); i += 2 {
		if slices.Contains(after, root.Content[i].Value) {
			at = i
			break
		}
	}
	root.Content = slices.Insert(root.Content, at, scalar(sec), m)
	return m, nil
}

func valueNode(section, kind, key string, k Key, v any) (*yaml.Node, error) {
	where := fmt.Sprintf("%s: %s.%s", section, kind, key)
	switch v := v.(type) {
	case string:
		if k.Secret && !envRef.MatchString(v) {
			return nil, fmt.Errorf("%w: %s: write it as ${VAR} (the value is not shown)", ErrPlaintextSecret, where)
		}
		return scalar(v), nil
	case []string:
		if !k.List {
			return nil, fmt.Errorf("%w: %s takes one value, not a list", flightline.ErrInvalidInput, where)
		}
		seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
		for _, s := range v {
			if strings.Contains(s, ",") {
				return nil, fmt.Errorf("%w: %s: %q: a list item cannot hold a comma", flightline.ErrInvalidInput, where, s)
			}
			seq.Content = append(seq.Content, scalar(s))
		}
		return seq, nil
	}
	return nil, fmt.Errorf("%w: %s: want a string or a list of strings, not %T", flightline.ErrInvalidInput, where, v)
}

func applyEntry(root *yaml.Node, e Entry, kinds Kinds) error {
	link, ok := linkKey[e.Section]
	if !ok {
		return fmt.Errorf("%w section %q: want sources, sinks, deadletter_sinks or schema_sinks", ErrUnknown, e.Section)
	}
	if !name.MatchString(e.Name) {
		return fmt.Errorf("%w: %s: %q is not a name: want letters, digits, _ . -", flightline.ErrInvalidInput, e.Section, e.Name)
	}
	k, ok := kinds(e.Section, e.Kind)
	if !ok {
		return fmt.Errorf("%w kind %q in %s", ErrUnknown, e.Kind, e.Section)
	}
	where := e.Section + "." + e.Name
	keys := make([]string, 0, len(e.Fields))
	for key := range e.Fields {
		if _, ok := k.Keys[key]; !ok {
			valid := make([]string, 0, len(k.Keys))
			for v := range k.Keys {
				valid = append(valid, v)
			}
			sort.Strings(valid)
			return fmt.Errorf("%w key %q of %s (%s); valid keys: %s", ErrUnknown, key, where, e.Kind, strings.Join(valid, ", "))
		}
		keys = append(keys, key)
	}
	// Keys in the kind's declared order would need the declaration's
	// order; sorted keys make the output deterministic.
	sort.Strings(keys)
	values := make(map[string]*yaml.Node, len(keys))
	for _, key := range keys {
		n, err := valueNode(where, e.Kind, key, k.Keys[key], e.Fields[key])
		if err != nil {
			return err
		}
		values[key] = n
	}
	sec, err := section(root, e.Section)
	if err != nil {
		return err
	}
	entry := get(sec, e.Name)
	if entry == nil {
		fields := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, key := range keys {
			fields.Content = append(fields.Content, scalar(key), values[key])
		}
		m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{scalar(e.Kind), fields}}
		sec.Content = append(sec.Content, scalar(e.Name), m)
	} else {
		if entry.Kind == yaml.AliasNode {
			return fmt.Errorf("%w: %s is a YAML alias; edit it by hand", flightline.ErrInvalidInput, where)
		}
		if entry.Kind == yaml.ScalarNode {
			return fmt.Errorf("%w: %s is written as a URL (%s); replace it by hand with a %s: {…} mapping first",
				flightline.ErrInvalidInput, where, urlKind(entry.Value), e.Kind)
		}
		if entry.Kind != yaml.MappingNode || len(entry.Content) != 2 {
			return fmt.Errorf("%w: %s is not a mapping with one key, the kind", flightline.ErrInvalidInput, where)
		}
		if have := entry.Content[0].Value; have != e.Kind {
			return fmt.Errorf("%w: %s is a %s, not a %s: remove the entry first, or give it another name", ErrKindChange, where, have, e.Kind)
		}
		fields := entry.Content[1]
		if fields.Kind == yaml.ScalarNode && fields.Tag == "!!null" {
			fields.Kind, fields.Tag, fields.Value = yaml.MappingNode, "!!map", ""
		}
		if fields.Kind != yaml.MappingNode {
			return fmt.Errorf("%w: %s.%s: want a mapping of keys", flightline.ErrInvalidInput, where, e.Kind)
		}
		if e.Replace {
			for i := 0; i+1 < len(fields.Content); {
				if _, keep := values[fields.Content[i].Value]; keep {
					i += 2
					continue
				}
				fields.Content = slices.Delete(fields.Content, i, i+2)
			}
		}
		for _, key := range keys {
			v := values[key]
			if fields.Style == yaml.FlowStyle && v.Kind == yaml.SequenceNode {
				v.Style = yaml.FlowStyle
			}
			set(fields, key, v)
		}
	}
	if e.Pipeline != "" {
		keys := map[string]any{link: e.Section + "." + e.Name}
		if link == "deadletter_sink" {
			keys["deadletter"] = nil // the loader takes one or the other
		}
		return applyPipeline(root, Pipeline{Name: e.Pipeline, Keys: keys})
	}
	return nil
}

func urlKind(s string) string {
	if k, _, ok := strings.Cut(s, ":"); ok {
		return "a " + k + " URL"
	}
	return "a URL"
}

func applyPipeline(root *yaml.Node, p Pipeline) error {
	if !name.MatchString(p.Name) {
		return fmt.Errorf("%w: pipelines: %q is not a name: want letters, digits, _ . -", flightline.ErrInvalidInput, p.Name)
	}
	sec, err := section(root, "pipelines")
	if err != nil {
		return err
	}
	m := get(sec, p.Name)
	if m == nil {
		m = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		sec.Content = append(sec.Content, scalar(p.Name), m)
	}
	if m.Kind == yaml.ScalarNode && m.Tag == "!!null" {
		m.Kind, m.Tag, m.Value = yaml.MappingNode, "!!map", ""
	}
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("%w: pipelines.%s is not a mapping", flightline.ErrInvalidInput, p.Name)
	}
	keys := make([]string, 0, len(p.Keys))
	for k := range p.Keys {
		keys = append(keys, k)
	}
	// source before sink, then the rest: the order people write them in.
	order := func(k string) int {
		if i := slices.Index([]string{"source", "sink", "deadletter_sink", "schema_sink"}, k); i >= 0 {
			return i
		}
		return 10
	}
	sort.Slice(keys, func(i, j int) bool {
		if oi, oj := order(keys[i]), order(keys[j]); oi != oj {
			return oi < oj
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		switch v := p.Keys[k].(type) {
		case nil:
			remove(m, k)
		case string:
			set(m, k, scalar(v))
		case []string:
			seq := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for _, s := range v {
				seq.Content = append(seq.Content, scalar(s))
			}
			set(m, k, seq)
		default:
			return fmt.Errorf("%w: pipelines.%s.%s: want a string or a list of strings, not %T", flightline.ErrInvalidInput, p.Name, k, v)
		}
	}
	return nil
}

// Prune returns src without the pipelines that have no source or no sink
// (which a series of connect calls leaves until both ends are
// connected), and their names, sorted, so the rest can be validated.
func Prune(src []byte) ([]byte, []string, error) {
	doc, err := parse(src)
	if err != nil {
		return nil, nil, err
	}
	sec := get(doc.Content[0], "pipelines")
	if sec == nil || sec.Kind != yaml.MappingNode {
		return src, nil, nil
	}
	var pruned []string
	for i := 0; i+1 < len(sec.Content); {
		p := sec.Content[i+1]
		if p.Kind == yaml.MappingNode && (get(p, "source") == nil || get(p, "sink") == nil) {
			pruned = append(pruned, sec.Content[i].Value)
			sec.Content = slices.Delete(sec.Content, i, i+2)
			continue
		}
		i += 2
	}
	if len(pruned) == 0 {
		return src, nil, nil
	}
	sort.Strings(pruned)
	out, err := encode(doc)
	return out, pruned, err
}
