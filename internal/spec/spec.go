// Package spec declares the options of an endpoint kind once, as the
// fields of a Go struct, and derives from that declaration the parser of
// a kind's URL query (kafka:?brokers=…&topics=…), the usage text and,
// later, the config file.
//
// A config struct's fields carry their option in tags:
//
//	type config struct {
//		Brokers []string      `spec:"brokers" doc:"bootstrap brokers, HOST:PORT"`
//		Wait    time.Duration `spec:"batch_wait" default:"500ms" doc:"…"`
//		Reset   string        `spec:"reset" enum:"earliest,latest" doc:"…"`
//		Pass    string        `spec:"password" secret:"true" doc:"…"`
//		Extra   map[string]string `spec:",extra"`
//	}
//
// The Go type of a field gives the option's type: string (or an enum with
// an enum tag), bool, int, int32, int64, time.Duration, Size (bytes, with
// an optional KiB/MiB/GiB or KB/MB/GB suffix) and []string (a
// comma-separated list). A pointer field is nil when the option is not
// given and has no default, so a kind applies only what the user set and
// leaves the rest to its library's defaults. Embedded structs contribute
// their fields. One map[string]string field tagged `spec:",extra"`
// receives keys passed through unchanged (storage or driver options),
// which a kind lists with Extra.
//
// Unknown keys are errors. A secret option's value never appears in an
// error, and usage marks it as secret.
package spec

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flightline/flightline"
)

// Type is the type of an option's value.
type Type int

// The option types.
const (
	String Type = iota
	Int
	Bool
	Duration
	SizeType
	List
	Enum
)

func (t Type) String() string {
	return [...]string{"STRING", "N", "BOOL", "DURATION", "SIZE", "LIST", "ENUM"}[t]
}

// Size is a number of bytes; in a query it may carry a KiB, MiB, GiB (or
// KB, MB, GB: powers of ten) suffix.
type Size int64

// Field is one declared option.
type Field struct {
	Name    string
	Type    Type
	Default string // as written in a query; "" when none
	Doc     string
	Enum    []string // the accepted values of an Enum
	Secret  bool

	index []int
	ptr   bool
}

// Extra declares keys passed through unchanged into the config's extra
// map: a kind's storage or driver options.
type Extra struct {
	Doc    string   // what the keys are, for usage
	Keys   []string // the accepted keys
	Secret []string // those whose values are secrets
}

// Spec is the declaration of one kind whose options parse into a T.
type Spec[T any] struct {
	Kind   string // the URL scheme, e.g. "kafka"
	Form   string // how a spec of the kind is written, e.g. "dir:PATH"
	Doc    string // one line
	Fields []Field
	Extra  *Extra

	extra []int // index of the extra map field, nil when none
}

// New declares kind, whose options are the fields of T; it panics if T's
// tags are malformed, which is a programming error caught by any test
// that touches the kind.
func New[T any](kind, form, doc string, extra *Extra) *Spec[T] {
	s := &Spec[T]{Kind: kind, Form: form, Doc: doc, Extra: extra}
	var zero T
	if err := s.collect(reflect.TypeOf(zero), nil); err != nil {
		panic(fmt.Sprintf("spec %s: %v", kind, err))
	}
	if (s.extra == nil) != (extra == nil) {
		panic(fmt.Sprintf("spec %s: an Extra declaration needs one map field tagged `spec:\",extra\"`, and vice versa", kind))
	}
	seen := map[string]bool{}
	for _, f := range s.Fields {
		if seen[f.Name] {
			panic(fmt.Sprintf("spec %s: option %q declared twice", kind, f.Name))
		}
		seen[f.Name] = true
		if f.Default != "" {
			if _, err := f.parse(f.Default); err != nil {
				panic(fmt.Sprintf("spec %s: default of %s: %v", kind, f.Name, err))
			}
		}
	}
	return s
}

var (
	durationType = reflect.TypeOf(time.Duration(0))
	sizeType     = reflect.TypeOf(Size(0))
)

func (s *Spec[T]) collect(t reflect.Type, index []int) error {
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("%s is not a struct", t)
	}
	for i := range t.NumField() {
		sf := t.Field(i)
		idx := append(slices.Clone(index), i)
		tag, ok := sf.Tag.Lookup("spec")
		if sf.Anonymous && !ok {
			if err := s.collect(sf.Type, idx); err != nil {
				return err
			}
			continue
		}
		if !ok || tag == "-" {
			continue
		}
		if tag == ",extra" {
			if sf.Type != reflect.TypeOf(map[string]string(nil)) {
				return fmt.Errorf("extra field %s must be a map[string]string", sf.Name)
			}
			s.extra = idx
			continue
		}
		f := Field{Name: tag, Default: sf.Tag.Get("default"), Doc: sf.Tag.Get("doc"), Secret: sf.Tag.Get("secret") == "true", index: idx}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			f.ptr, ft = true, ft.Elem()
		}
		switch {
		case ft == durationType:
			f.Type = Duration
		case ft == sizeType:
			f.Type = SizeType
		case ft.Kind() == reflect.String:
			f.Type = String
			if e := sf.Tag.Get("enum"); e != "" {
				f.Type, f.Enum = Enum, strings.Split(e, ",")
			}
		case ft.Kind() == reflect.Bool:
			f.Type = Bool
		case ft.Kind() == reflect.Int, ft.Kind() == reflect.Int32, ft.Kind() == reflect.Int64:
			f.Type = Int
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.String:
			f.Type = List
		default:
			return fmt.Errorf("field %s: unsupported type %s", sf.Name, sf.Type)
		}
		s.Fields = append(s.Fields, f)
	}
	return nil
}

// Parse returns the config that query q declares: each option given is
// parsed by its type, each one missing takes its default. An unknown key
// or a value that does not parse is an error wrapping
// flightline.ErrInvalidInput (and the parser's own error).
func (s *Spec[T]) Parse(q url.Values) (T, error) {
	var cfg T
	v := reflect.ValueOf(&cfg).Elem()
	var unknown []string
	byName := map[string]*Field{}
	for i := range s.Fields {
		byName[s.Fields[i].Name] = &s.Fields[i]
	}
	for k := range q {
		if byName[k] == nil && !s.isExtra(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		valid := make([]string, 0, len(s.Fields))
		for _, f := range s.Fields {
			valid = append(valid, f.Name)
		}
		if s.Extra != nil {
			valid = append(valid, s.Extra.Keys...)
		}
		var hints []string
		for _, k := range unknown {
			if near := Nearest(k, valid); near != "" {
				hints = append(hints, fmt.Sprintf("%s: did you mean %q?", k, near))
			}
		}
		hint := "; valid: " + strings.Join(valid, ", ")
		if len(valid) == 0 {
			hint = "; " + s.Kind + " takes no options"
		}
		if len(hints) > 0 {
			hint = "; " + strings.Join(hints, "; ")
		}
		return cfg, fmt.Errorf("%w: %s: unknown option(s) %s%s", flightline.ErrInvalidInput, s.Kind, strings.Join(unknown, ", "), hint)
	}
	for i := range s.Fields {
		f := &s.Fields[i]
		raw, given := last(q, f.Name)
		if !given {
			if f.Default == "" {
				continue
			}
			raw = f.Default
		}
		val, err := f.parse(raw)
		if err != nil {
			return cfg, Bad(s.Kind, *f, raw, err)
		}
		dst := v.FieldByIndex(f.index)
		if et := dst.Type(); f.Type == Int {
			if f.ptr {
				et = et.Elem()
			}
			if reflect.Zero(et).OverflowInt(val.Int()) {
				return cfg, Bad(s.Kind, *f, raw, fmt.Errorf("out of range for %s", et))
			}
		}
		if f.ptr {
			p := reflect.New(dst.Type().Elem())
			p.Elem().Set(val.Convert(dst.Type().Elem()))
			dst.Set(p)
		} else {
			dst.Set(val.Convert(dst.Type()))
		}
	}
	if s.extra != nil {
		m := map[string]string{}
		for _, k := range s.Extra.Keys {
			if raw, ok := last(q, k); ok {
				m[k] = raw
			}
		}
		v.FieldByIndex(s.extra).Set(reflect.ValueOf(m))
	}
	return cfg, nil
}

func (s *Spec[T]) isExtra(k string) bool {
	return s.Extra != nil && slices.Contains(s.Extra.Keys, k)
}

// Field returns the declared option name, for a kind's own checks.
func (s *Spec[T]) Field(name string) Field {
	for _, f := range s.Fields {
		if f.Name == name {
			return f
		}
	}
	panic(fmt.Sprintf("spec %s: no option %q", s.Kind, name))
}

// Bad returns the error for option f of kind with value raw: it wraps
// flightline.ErrInvalidInput and err, and names the value unless f is
// secret.
func Bad(kind string, f Field, raw string, err error) error {
	if f.Secret {
		// Parsers quote what they refuse: keep err for errors.Is, not its
		// text.
		return fmt.Errorf("%w: %s: %s=<secret>: %w", flightline.ErrInvalidInput, kind, f.Name, hidden{err})
	}
	return fmt.Errorf("%w: %s: %s=%q: %w", flightline.ErrInvalidInput, kind, f.Name, raw, err)
}

// hidden is an error whose text, which may quote a secret, is withheld;
// it still unwraps to the error it hides.
type hidden struct{ err error }

func (h hidden) Error() string { return "not a valid value (withheld: the option is secret)" }
func (h hidden) Unwrap() error { return h.err }

func last(q url.Values, k string) (string, bool) {
	vs, ok := q[k]
	if !ok || len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// parse parses raw as f's type, returning a value of the field's Go kind
// (string, bool, int64, time.Duration, Size or []string).
func (f Field) parse(raw string) (reflect.Value, error) {
	switch f.Type {
	case String:
		return reflect.ValueOf(raw), nil
	case Enum:
		for _, e := range f.Enum {
			if strings.EqualFold(raw, e) {
				return reflect.ValueOf(e), nil
			}
		}
		return reflect.Value{}, fmt.Errorf("want %s", orList(f.Enum))
	case Bool:
		b, err := strconv.ParseBool(raw)
		return reflect.ValueOf(b), err
	case Int:
		n, err := strconv.ParseInt(raw, 10, 64)
		return reflect.ValueOf(n), err
	case Duration:
		d, err := time.ParseDuration(raw)
		return reflect.ValueOf(d), err
	case SizeType:
		n, err := ParseSize(raw)
		return reflect.ValueOf(n), err
	case List:
		var out []string
		for _, s := range strings.Split(raw, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return reflect.ValueOf(out), nil
	}
	return reflect.Value{}, fmt.Errorf("unsupported type %v", f.Type)
}

func orList(vs []string) string {
	if len(vs) == 1 {
		return vs[0]
	}
	return strings.Join(vs[:len(vs)-1], ", ") + " or " + vs[len(vs)-1]
}

// ErrSize is wrapped by the errors of ParseSize.
var ErrSize = errors.New("want a byte count, e.g. 1048576, 512KiB, 16MiB or 1GB")

// ParseSize parses a byte count with an optional suffix: KiB, MiB, GiB
// (powers of two) or KB, MB, GB (powers of ten); B or none means bytes.
func ParseSize(raw string) (Size, error) {
	num, mult := raw, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}} {
		if strings.HasSuffix(raw, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(raw, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q: %w", raw, ErrSize)
	}
	return Size(n * mult), nil
}

// Usage describes the kind: its form and doc on one line, then one line
// per option with its type, default and doc; secret options say so and
// show no value.
func (s *Spec[T]) Usage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s\n      %s\n", s.Form, s.Doc)
	for _, f := range s.Fields {
		typ := f.Type.String()
		if f.Type == Enum {
			typ = strings.Join(f.Enum, "|")
		}
		fmt.Fprintf(&b, "      %-24s %s", f.Name+"="+typ, f.Doc)
		switch {
		case f.Secret:
			b.WriteString(" (secret)")
		case f.Default != "":
			fmt.Fprintf(&b, " (default %s)", f.Default)
		}
		b.WriteString("\n")
	}
	if s.Extra != nil {
		keys := make([]string, len(s.Extra.Keys))
		for i, k := range s.Extra.Keys {
			keys[i] = k
			if slices.Contains(s.Extra.Secret, k) {
				keys[i] += " (secret)"
			}
		}
		fmt.Fprintf(&b, "      %s: %s\n", s.Extra.Doc, strings.Join(keys, ", "))
	}
	return b.String()
}

// Nearest returns the name of valid closest to k by edit distance
// (ignoring case), or "" when none is close enough to be a likely typo.
// The config file and the command line suggest keys with it.
func Nearest(k string, valid []string) string {
	best, bestD := "", 1<<30
	for _, v := range valid {
		if d := editDistance(strings.ToLower(k), strings.ToLower(v)); d < bestD {
			best, bestD = v, d
		}
	}
	if bestD > max(2, len(k)/2) {
		return ""
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
