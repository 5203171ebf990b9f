package kafkadecode

import (
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
)

var errBadTime = errors.New("not an RFC 3339 date-time")

// daysFromCivil returns days since 1970-01-01 for a proleptic Gregorian date
// (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era = (y - 399) / 400
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

func digits(s []byte, n int) (int64, bool) {
	if len(s) < n {
		return 0, false
	}
	var v int64
	for _, c := range s[:n] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

var monthDays = [13]int64{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// parseDate parses YYYY-MM-DD into days since the epoch.
func parseDate(s []byte) (int64, bool) {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return 0, false
	}
	y, ok1 := digits(s, 4)
	m, ok2 := digits(s[5:], 2)
	d, ok3 := digits(s[8:], 2)
	if !ok1 || !ok2 || !ok3 || m < 1 || m > 12 || d < 1 || d > monthDays[m] {
		return 0, false
	}
	if m == 2 && d == 29 && !(y%4 == 0 && (y%100 != 0 || y%400 == 0)) {
		return 0, false
	}
	return daysFromCivil(y, m, d), true
}

// parseRFC3339 parses an RFC 3339 date-time (T or space separator,
// optional fraction up to nanoseconds, Z or ±hh:mm) into the given unit
// since the epoch, without allocating. Finer fractions are truncated.
func parseRFC3339(s []byte, unit arrow.TimeUnit) (int64, error) {
	days, ok := parseDate(s)
	if !ok || len(s) < 20 || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || s[13] != ':' || s[16] != ':' {
		return 0, errBadTime
	}
	hh, ok1 := digits(s[11:], 2)
	mm, ok2 := digits(s[14:], 2)
	ss, ok3 := digits(s[17:], 2)
	if !ok1 || !ok2 || !ok3 || hh > 23 || mm > 59 || ss > 60 {
		return 0, errBadTime
	}
	i := 19
	var nanos int64
	if s[i] == '.' {
		i++
		start := i
		scale := int64(100_000_000)
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			nanos += int64(s[i]-'0') * scale
			scale /= 10
			i++
		}
		if i == start {
			return 0, errBadTime
		}
	}
	if i >= len(s) {
		return 0, errBadTime
	}
	var zone int64
	switch s[i] {
	case 'Z', 'z':
		i++
	case '+', '-':
		zh, ok1 := digits(s[i+1:], 2)
		if !ok1 || len(s) < i+6 || s[i+3] != ':' {
			return 0, errBadTime
		}
		zm, ok2 := digits(s[i+4:], 2)
		if !ok2 || zh > 23 || zm > 59 {
			return 0, errBadTime
		}
		zone = zh*3600 + zm*60
		if s[i] == '-' {
			zone = -zone
		}
		i += 6
	default:
		return 0, errBadTime
	}
	if i != len(s) {
		return 0, errBadTime
	}
	secs := days*86400 + hh*3600 + mm*60 + ss - zone
	switch unit {
	case arrow.Second:
		return secs, nil
	case arrow.Millisecond:
		return secs*1e3 + nanos/1e6, nil
	case arrow.Microsecond:
		return secs*1e6 + nanos/1e3, nil
	default:
		if secs > 9_223_372_035 || secs < -9_223_372_035 {
			return 0, errBadTime
		}
		return secs*1e9 + nanos, nil
	}
}

var unitPerSecond = [...]int64{arrow.Second: 1, arrow.Millisecond: 1e3, arrow.Microsecond: 1e6, arrow.Nanosecond: 1e9}

// convertUnit converts v from unit from to unit to, reporting overflow.
func convertUnit(v int64, from, to arrow.TimeUnit) (int64, bool) {
	if from == to {
		return v, true
	}
	f, t := unitPerSecond[from], unitPerSecond[to]
	if t > f {
		k := t / f
		r := v * k
		if r/k != v {
			return 0, false
		}
		return r, true
	}
	return v / (f / t), true
}
