package pgerr

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/flightline/flightline"
)

// ParseIdent parses a possibly schema-qualified table name as PostgreSQL
// would: `table`, `schema.table`, with any part in double quotes ("My
// Table", with "" for a quote inside). Unquoted parts fold to lower case.
// The result is only ever turned into SQL by pgx.Identifier.Sanitize.
func ParseIdent(s string) (pgx.Identifier, error) {
	var parts pgx.Identifier
	rest := strings.TrimSpace(s)
	for {
		var part string
		if strings.HasPrefix(rest, `"`) {
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
				return nil, fmt.Errorf("%w: table name %q: unterminated quote", flightline.ErrInvalidInput, s)
			}
			part, rest = b.String(), rest[i+1:]
		} else {
			end := strings.IndexByte(rest, '.')
			if end < 0 {
				end = len(rest)
			}
			part, rest = strings.ToLower(strings.TrimSpace(rest[:end])), rest[end:]
			if strings.ContainsAny(part, `" `) {
				return nil, fmt.Errorf("%w: table name %q: quote the part with spaces or quotes", flightline.ErrInvalidInput, s)
			}
		}
		if part == "" {
			return nil, fmt.Errorf("%w: table name %q: empty part", flightline.ErrInvalidInput, s)
		}
		parts = append(parts, part)
		rest = strings.TrimSpace(rest)
		if rest == "" {
			break
		}
		if rest[0] != '.' {
			return nil, fmt.Errorf("%w: table name %q: unexpected %q", flightline.ErrInvalidInput, s, rest)
		}
		rest = strings.TrimSpace(rest[1:])
	}
	if len(parts) > 2 {
		return nil, fmt.Errorf("%w: table name %q: want table or schema.table", flightline.ErrInvalidInput, s)
	}
	return parts, nil
}
