package s3

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/flightline/flightline"
	"github.com/flightline/flightline/checkpoint"
)

// maxNameLen bounds a readable object name; longer ones are hashed. S3 keys
// may be 1024 bytes, but prefix + target + pipeline id come on top.
const maxNameLen = 200

// SchemaObject is the name, inside a pipeline's directory, of the object
// that fixes the pipeline's schema: a 0-row Parquet file in the
// _common_metadata convention, which dataset readers skip.
const SchemaObject = "_common_metadata"

// ObjectName returns the name (without directory) of the object holding a
// batch that moved its source from checkpoint prev (nil when unknown) to cp.
// It depends on nothing else, so a replay of the same batch gets the same
// name. See the package documentation for the scheme.
//
// For mergeable Positions the name lists, in key order, every partition
// whose position differs between prev and cp (all of cp's partitions when
// prev is nil, not Positions, or equal), each as
// <escaped key>~<position, 20 digits>, joined with "~"; e.g.
// orders!2F3~00000000000000012000.parquet. A name longer than maxNameLen,
// and every opaque checkpoint, becomes "~" + the SHA-256 of the canonical
// form. The start of the range is deliberately not part of the name: see
// the package documentation.
func ObjectName(prev, cp []byte) string {
	c, err := checkpoint.Parse(cp)
	if err != nil {
		sum := sha256.Sum256(append([]byte("opaque\x00"), cp...))
		return "~" + hex.EncodeToString(sum[:]) + ".parquet"
	}
	p, _ := checkpoint.Parse(prev) // nil when prev is nil or opaque
	keys := advanced(p, c)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('~')
		}
		b.WriteString(escape(k))
		b.WriteByte('~')
		fmt.Fprintf(&b, "%020d", c[k])
	}
	if b.Len() > maxNameLen || b.Len() == 0 {
		canon := make(checkpoint.Positions, len(keys))
		for _, k := range keys {
			canon[k] = c[k]
		}
		sum := sha256.Sum256(append([]byte("positions\x00"), canon.Encode()...))
		return "~" + hex.EncodeToString(sum[:]) + ".parquet"
	}
	return b.String() + ".parquet"
}

// advanced returns, sorted, the partitions of c whose position differs
// from p's; all of c's when none does (or p is nil).
func advanced(p, c checkpoint.Positions) []string {
	var keys []string
	for k, v := range c {
		if pv, ok := p[k]; !ok || pv != v {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		for k := range c {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// escape maps a partition key to characters that are safe in S3 keys and
// URLs: A-Z a-z 0-9 . _ - stay, every other byte becomes !XX (upper-case
// hex), and so does a leading '.' or '_' (dataset readers skip such files).
// '~' never appears in the output, so it can separate fields.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		safe := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' ||
			(c == '.' || c == '_') && i > 0
		if safe {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "!%02X", c)
	}
	return b.String()
}

// checkSegment validates one path segment of a pipeline id or target:
// non-empty, only A-Z a-z 0-9 . _ -, not starting with '.' or '_' (dataset
// readers skip such directories).
func checkSegment(what, s string) error {
	if s == "" {
		return fmt.Errorf("%w: s3 sink: empty %s", flightline.ErrInvalidInput, what)
	}
	if s[0] == '.' || s[0] == '_' {
		return fmt.Errorf("%w: s3 sink: %s %q starts with %q: dataset readers would skip it", flightline.ErrInvalidInput, what, s, s[:1])
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return fmt.Errorf("%w: s3 sink: %s %q: only A-Z a-z 0-9 . _ - are allowed", flightline.ErrInvalidInput, what, s)
		}
	}
	return nil
}
