package iceberg

import (
	"fmt"
	"strconv"
	"strings"

	iceberg "github.com/apache/iceberg-go"

	"github.com/flightline/flightline"
)

// partField is one field of a partition spec: a transform of a column.
type partField struct {
	col       string
	transform iceberg.Transform
}

// parsePartition parses a partition spec: comma-separated fields, each
// COLUMN (identity), identity(COLUMN), year|month|day|hour(COLUMN),
// bucket(N, COLUMN) or truncate(W, COLUMN).
func parsePartition(spec string) ([]partField, error) {
	var out []partField
	bad := func(f string, why string) error {
		return fmt.Errorf("%w: partition field %q: %s (want COLUMN, identity(COLUMN), year|month|day|hour(COLUMN), bucket(N, COLUMN) or truncate(W, COLUMN))", flightline.ErrInvalidInput, f, why)
	}
	// Split on the commas outside parentheses.
	var fields []string
	depth, start := 0, 0
	for i, r := range spec {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				fields = append(fields, spec[start:i])
				start = i + 1
			}
		}
	}
	fields = append(fields, spec[start:])
	for _, f := range fields {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, bad(f, "empty")
		}
		name, args, ok := strings.Cut(f, "(")
		if !ok {
			out = append(out, partField{col: f, transform: iceberg.IdentityTransform{}})
			continue
		}
		if !strings.HasSuffix(args, ")") {
			return nil, bad(f, "no closing parenthesis")
		}
		parts := strings.Split(strings.TrimSuffix(args, ")"), ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		name = strings.ToLower(strings.TrimSpace(name))
		var tr string
		switch name {
		case "identity", "year", "month", "day", "hour":
			if len(parts) != 1 || parts[0] == "" {
				return nil, bad(f, "want one column")
			}
			tr = name
		case "bucket", "truncate":
			if len(parts) != 2 || parts[1] == "" {
				return nil, bad(f, "want a number and a column")
			}
			n, err := strconv.Atoi(parts[0])
			if err != nil || n < 1 {
				return nil, bad(f, "the number must be a positive integer")
			}
			tr = fmt.Sprintf("%s[%d]", name, n)
			parts = parts[1:]
		default:
			return nil, bad(f, "unknown transform "+name)
		}
		t, err := iceberg.ParseTransform(tr)
		if err != nil {
			return nil, bad(f, err.Error())
		}
		out = append(out, partField{col: parts[0], transform: t})
	}
	return out, nil
}
