package stdout

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
)

// tableEncoder prints aligned columns. Widths only grow over a writer's
// life; the header is printed first and again whenever a column widens.
type tableEncoder struct {
	names   []string
	right   []bool // numbers align right
	widths  []int
	max     int
	printed bool
	cells   []string // scratch: one batch, column after column
}

func newTableEncoder(sc *arrow.Schema, maxWidth int) *tableEncoder {
	e := &tableEncoder{max: maxWidth}
	for _, f := range sc.Fields() {
		name := cell(f.Name, maxWidth)
		e.names = append(e.names, name)
		e.widths = append(e.widths, utf8.RuneCountInString(name))
		e.right = append(e.right, numeric(f.Type))
	}
	return e
}

func numeric(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64,
		arrow.DECIMAL32, arrow.DECIMAL64, arrow.DECIMAL128, arrow.DECIMAL256:
		return true
	}
	return false
}

// cell makes v one line of at most max runes: control characters escaped
// (a newline becomes \n), a longer value cut to max-1 runes and "…".
func cell(v string, max int) string {
	clean := true
	for _, r := range v {
		if unicode.IsControl(r) || r == utf8.RuneError {
			clean = false
			break
		}
	}
	if !clean {
		var b strings.Builder
		for _, r := range v {
			if unicode.IsControl(r) || r == utf8.RuneError {
				q := strconv.QuoteRune(r)
				b.WriteString(q[1 : len(q)-1])
				continue
			}
			b.WriteRune(r)
		}
		v = b.String()
	}
	if utf8.RuneCountInString(v) <= max {
		return v
	}
	n := 0
	for i := range v {
		if n == max-1 {
			return v[:i] + "…"
		}
		n++
	}
	return v
}

func (e *tableEncoder) Encode(dst *bytes.Buffer, rec arrow.RecordBatch) error {
	rows, ncol := int(rec.NumRows()), int(rec.NumCols())
	e.cells = e.cells[:0]
	grew := !e.printed
	for j, col := range rec.Columns() {
		for i := range rows {
			v := "null"
			if col.IsValid(i) {
				v = cell(col.ValueStr(i), e.max)
			}
			if n := utf8.RuneCountInString(v); n > e.widths[j] {
				e.widths[j], grew = n, true
			}
			e.cells = append(e.cells, v)
		}
	}
	if grew {
		if e.printed {
			dst.WriteByte('\n')
		}
		e.line(dst, func(j int) string { return e.names[j] }, false)
		for j := range ncol {
			if j > 0 {
				dst.WriteString("-+-")
			}
			dst.WriteString(strings.Repeat("-", e.widths[j]))
		}
		dst.WriteByte('\n')
		e.printed = true
	}
	for i := range rows {
		e.line(dst, func(j int) string { return e.cells[j*rows+i] }, true)
	}
	return nil
}

// line prints one row of cells, padded to the widths, numbers on the
// right when align is set, without trailing blanks.
func (e *tableEncoder) line(dst *bytes.Buffer, at func(j int) string, align bool) {
	start := dst.Len()
	for j := range e.widths {
		if j > 0 {
			dst.WriteString(" | ")
		}
		v := at(j)
		pad := strings.Repeat(" ", e.widths[j]-utf8.RuneCountInString(v))
		if align && e.right[j] {
			dst.WriteString(pad)
			dst.WriteString(v)
		} else {
			dst.WriteString(v)
			dst.WriteString(pad)
		}
	}
	trimmed := bytes.TrimRight(dst.Bytes()[start:], " ")
	dst.Truncate(start + len(trimmed))
	dst.WriteByte('\n')
}
