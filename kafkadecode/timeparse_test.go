package kafkadecode

import (
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestParseRFC3339MatchesTime(t *testing.T) {
	for _, s := range []string{
		"2024-02-29T23:59:59Z", "1970-01-01T00:00:00Z", "1969-12-31T23:59:59.999Z",
		"2026-12-02T13:25:06.123456789+05:30", "0001-01-01T00:00:00Z", "2400-03-01T00:00:00-08:00",
		"1900-01-01T12:00:00.5Z",
	} {
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range []arrow.TimeUnit{arrow.Second, arrow.Millisecond, arrow.Microsecond, arrow.Nanosecond} {
			got, err := parseRFC3339([]byte(s), u)
			if err != nil {
				if u == arrow.Nanosecond && (want.Year() < 1678 || want.Year() > 2261) {
					continue // out of int64 nanoseconds
				}
				t.Fatalf("%s: %v", s, err)
			}
			var w int64
			switch u {
			case arrow.Second:
				w = want.Unix()
			case arrow.Millisecond:
				w = want.UnixMilli()
			case arrow.Microsecond:
				w = want.UnixMicro()
			default:
				w = want.UnixNano()
			}
			if s == "1969-12-31T23:59:59.999Z" && u == arrow.Second {
				w = -1 // truncation toward the earlier second
			}
			if got != w {
				t.Fatalf("%s unit %v: got %d want %d", s, u, got, w)
			}
		}
	}
	for _, bad := range []string{"", "2024-02-30T00:00:00Z", "2023-02-29T00:00:00Z", "2024-01-01T00:00:00", "2024-01-01T25:00:00Z", "2024-01-01T00:00:00.Z", "2024-01-01T00:00:00+0100", "2024-01-01T00:00:00Zx"} {
		if _, err := parseRFC3339([]byte(bad), arrow.Millisecond); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}
