package snowconn

import (
	"fmt"
	"strings"

	"github.com/flightline/flightline"
)

// Quote quotes one identifier, case preserved.
func Quote(ident string) string { return `"` + strings.ReplaceAll(ident, `"`, `""`) + `"` }

// ParseIdent splits a possibly qualified Snowflake name (a, s.a, db.s.a;
// double-quoted parts keep their case and may contain dots, unquoted parts
// are upper-cased as Snowflake does) into its parts, unquoted.
func ParseIdent(name string) ([]string, error) {
	var parts []string
	rest := strings.TrimSpace(name)
	for {
		if rest == "" {
			return nil, fmt.Errorf("%w: snowflake: empty name in %q", flightline.ErrInvalidInput, name)
		}
		var part string
		if rest[0] == '"' {
			var b strings.Builder
			i := 1
			for ; i < len(rest); i++ {
				if rest[i] == '"' {
					if i+1 < len(rest) && rest[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					break
				}
				b.WriteByte(rest[i])
			}
			if i >= len(rest) {
				return nil, fmt.Errorf("%w: snowflake: unterminated quote in %q", flightline.ErrInvalidInput, name)
			}
			part, rest = b.String(), rest[i+1:]
		} else {
			j := strings.IndexByte(rest, '.')
			if j < 0 {
				j = len(rest)
			}
			part, rest = strings.ToUpper(strings.TrimSpace(rest[:j])), rest[j:]
			if strings.ContainsAny(part, "\" ;'") || part == "" {
				return nil, fmt.Errorf("%w: snowflake: name %q needs double quotes", flightline.ErrInvalidInput, name)
			}
		}
		parts = append(parts, part)
		if rest == "" {
			break
		}
		if rest[0] != '.' {
			return nil, fmt.Errorf("%w: snowflake: unexpected %q in name %q", flightline.ErrInvalidInput, rest, name)
		}
		rest = rest[1:]
	}
	if len(parts) > 3 {
		return nil, fmt.Errorf("%w: snowflake: name %q has more than three parts", flightline.ErrInvalidInput, name)
	}
	return parts, nil
}

// QuoteParts joins parsed name parts, each quoted.
func QuoteParts(parts []string) string {
	q := make([]string, len(parts))
	for i, p := range parts {
		q[i] = Quote(p)
	}
	return strings.Join(q, ".")
}
