package deltalog

import (
	"encoding/json"
	"math"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"github.com/flightline/flightline/internal/parquetw"
)

// maxStatString bounds string min/max values in stats. A longer minimum is
// truncated (a prefix is still a lower bound); a longer maximum is left out
// (a truncated maximum would not be an upper bound).
const maxStatString = 32

// StatsJSON renders file statistics as the add action's stats string:
// numRecords, minValues, maxValues and nullCount for top-level columns.
// Timestamps are rendered as ISO-8601 in UTC with millisecond precision,
// the maximum rounded up so it stays an upper bound.
func StatsJSON(st parquetw.Stats) string {
	mins, maxs, nulls := map[string]any{}, map[string]any{}, map[string]any{}
	for _, c := range st.Columns {
		if c.Type.ID() != arrow.STRUCT {
			nulls[c.Name] = c.NullCount
		}
		if !c.HasMinMax {
			continue
		}
		lo, okLo := statValue(c.Type, c.Min, false)
		hi, okHi := statValue(c.Type, c.Max, true)
		if okLo {
			mins[c.Name] = lo
		}
		if okHi {
			maxs[c.Name] = hi
		}
	}
	b, _ := json.Marshal(struct {
		NumRecords int64          `json:"numRecords"`
		MinValues  map[string]any `json:"minValues"`
		MaxValues  map[string]any `json:"maxValues"`
		NullCount  map[string]any `json:"nullCount"`
	}{st.NumRecords, mins, maxs, nulls})
	return string(b)
}

func statValue(t arrow.DataType, v any, upper bool) (any, bool) {
	switch t := t.(type) {
	case *arrow.TimestampType:
		n := v.(int64)
		var d time.Duration
		switch t.Unit {
		case arrow.Second:
			d = time.Second
		case arrow.Millisecond:
			d = time.Millisecond
		case arrow.Microsecond:
			d = time.Microsecond
		default:
			d = time.Nanosecond
		}
		tm := time.Unix(0, 0).UTC().Add(time.Duration(n) * d)
		if upper && tm.Truncate(time.Millisecond) != tm {
			tm = tm.Truncate(time.Millisecond).Add(time.Millisecond)
		}
		if t.TimeZone == "" {
			return tm.Format("2006-01-02T15:04:05.000"), true
		}
		return tm.Format("2006-01-02T15:04:05.000Z"), true
	case *arrow.Date32Type:
		return arrow.Date32(v.(int64)).FormattedString(), true
	case *arrow.Decimal128Type:
		return json.Number(v.(decimal128.Num).ToString(t.Scale)), true
	}
	switch x := v.(type) {
	case string:
		if len(x) <= maxStatString {
			return x, true
		}
		if upper {
			return nil, false
		}
		cut := maxStatString
		for cut > 0 && !utf8.RuneStart(x[cut]) {
			cut--
		}
		return x[:cut], true
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, false
		}
	}
	return v, true
}
