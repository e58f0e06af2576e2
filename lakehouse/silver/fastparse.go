package silver

// Fast paths for the two conversions every CDC row makes (a decimal amount, RFC 3339
// timestamps): they handle the common canonical forms without allocating and give up
// (ok false) on anything else, which then takes the general parser (with its error
// messages). They agree with the general parsers wherever they succeed; see the tests.

// fastDecimal parses [+-]digits[.digits] with at most scale fraction digits and at most
// 18 digits in all into the unscaled value; ok is false for any other form and for a
// value with more than prec digits.
func fastDecimal(s string, prec, scale int) (unscaled int64, ok bool) {
	i, neg := 0, false
	if len(s) > 0 && (s[0] == '-' || s[0] == '+') {
		neg, i = s[0] == '-', 1
	}
	var u int64
	digits, frac, dot := 0, 0, false
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			if digits++; digits > 18 {
				return 0, false
			}
			u = u*10 + int64(c-'0')
			if dot {
				frac++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return 0, false
		}
	}
	if digits == 0 || frac > scale || digits+scale-frac > 18 {
		return 0, false
	}
	for range scale - frac {
		u *= 10
	}
	if prec < 18 && u >= pow10[prec] {
		return 0, false
	}
	if neg {
		u = -u
	}
	return u, true
}

var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// fastRFC3339 parses YYYY-MM-DD(T| )HH:MM:SS[.fraction][Z|±HH:MM] into Unix microseconds
// (a fraction beyond microseconds is truncated, as time.Time.UnixMicro does; no zone is
// UTC): every form parseTime's general path accepts for a timestamp without a format,
// in one pass. Parquet and CSV sources write their timestamps without a zone
// ("2024-10-01T00:08:57"), which the general path reaches only after two failed
// time.Parse calls: 11% of Silver's CPU on the taxi example (bench/parquet.sh).
func fastRFC3339(s string) (micros int64, ok bool) {
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != ' ') || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	year, ok1 := digitsAt(s, 0, 4)
	month, ok2 := digitsAt(s, 5, 2)
	day, ok3 := digitsAt(s, 8, 2)
	hour, ok4 := digitsAt(s, 11, 2)
	minute, ok5 := digitsAt(s, 14, 2)
	sec, ok6 := digitsAt(s, 17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 ||
		day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return 0, false
	}
	i, nanos := 19, int64(0)
	if i < len(s) && s[i] == '.' {
		n := 0
		for i++; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if n++; n > 9 {
				return 0, false
			}
			nanos = nanos*10 + int64(s[i]-'0')
		}
		if n == 0 {
			return 0, false
		}
		for range 9 - n {
			nanos *= 10
		}
	}
	var offset int64
	switch rest := s[i:]; {
	case rest == "Z", rest == "":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, ok1 := digitsAt(rest, 1, 2)
		om, ok2 := digitsAt(rest, 4, 2)
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return 0, false
		}
		offset = int64(oh*3600 + om*60)
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return 0, false
	}
	// Four-digit years keep secs far from overflowing in microseconds.
	secs := daysFromCivil(year, month, day)*86400 + int64(hour*3600+minute*60+sec) - offset
	return secs*1e6 + nanos/1e3, true
}

// digitsAt reads the n decimal digits of s at i.
func digitsAt(s string, i, n int) (int, bool) {
	v := 0
	for _, c := range []byte(s[i : i+n]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// daysFromCivil is the number of days from 1970-01-01 to a proleptic Gregorian date
// (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + int64(doe) - 719468
}
