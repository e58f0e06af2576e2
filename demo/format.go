package demo

// Allocation-free appenders for the hot path: one line is built per event, so
// nothing here goes through fmt, time.Format or encoding/json.

// Status, op and attribute vocabularies. Indexes are stored in keyState.
const (
	statusCreated uint8 = iota
	statusPaid
	statusShipped
	statusDelivered
)

var statusNames = [...]string{"created", "paid", "shipped", "delivered"}

// weighted is a value with a relative weight; pickWeighted walks a cumulative table.
type weighted struct {
	name     string
	currency string // countries only
	weight   float64
	mean     float64 // categories only: typical order amount in currency units
}

// countries is skewed towards US, DE, GB, FR (weights are relative).
var countries = [...]weighted{
	{name: "US", currency: "USD", weight: 30},
	{name: "DE", currency: "EUR", weight: 12},
	{name: "GB", currency: "GBP", weight: 10},
	{name: "FR", currency: "EUR", weight: 8},
	{name: "IN", currency: "INR", weight: 6},
	{name: "BR", currency: "BRL", weight: 5},
	{name: "CA", currency: "CAD", weight: 4},
	{name: "JP", currency: "JPY", weight: 4},
	{name: "ES", currency: "EUR", weight: 3},
	{name: "IT", currency: "EUR", weight: 3},
	{name: "NL", currency: "EUR", weight: 2},
	{name: "AU", currency: "AUD", weight: 2},
	{name: "MX", currency: "MXN", weight: 2},
	{name: "PL", currency: "PLN", weight: 2},
	{name: "SE", currency: "SEK", weight: 1.5},
	{name: "CH", currency: "CHF", weight: 1.5},
	{name: "KR", currency: "KRW", weight: 1.5},
	{name: "SG", currency: "SGD", weight: 1},
	{name: "ZA", currency: "ZAR", weight: 1},
	{name: "AR", currency: "ARS", weight: 1},
}

// categories is skewed towards electronics and fashion.
var categories = [...]weighted{
	{name: "electronics", weight: 22, mean: 250},
	{name: "fashion", weight: 18, mean: 60},
	{name: "home", weight: 14, mean: 80},
	{name: "beauty", weight: 10, mean: 30},
	{name: "books", weight: 9, mean: 20},
	{name: "sports", weight: 8, mean: 70},
	{name: "toys", weight: 7, mean: 35},
	{name: "grocery", weight: 6, mean: 40},
	{name: "automotive", weight: 4, mean: 120},
	{name: "garden", weight: 2, mean: 50},
}

// Currency encodings in keyState.currency besides "the country's currency".
const (
	currencyCountry uint8 = iota
	currencyMissing
	currencyNull
)

// notJSON are the non-JSON bad lines (a connector log line leaking into the landing zone).
var notJSON = [...]string{
	"WARN connector restarted, resuming from binlog offset ",
	"<html><body><h1>502 Bad Gateway</h1></body></html> request ",
	"order_id,user_id,amount,currency,country,category,status row ",
}

// badKind selects how appendRow corrupts a row; badNone writes a good row.
type badKind uint8

const (
	badNone badKind = iota
	badTruncated
	badMissingID
	badNullID
	badNegativeAmount
	badAmountString
	badUpdatedAt
	badNotJSON
	numBadKinds
)

// appendRow appends one JSON object (without newline) for key state k with the
// given op and updated_at (unix ms), corrupted as bad says. badTruncated and
// badNotJSON are handled by the caller.
func appendRow(b []byte, k *keyState, op byte, updatedAt int64, bad badKind) []byte {
	switch bad {
	case badMissingID:
		b = append(b, '{')
	case badNullID:
		b = append(b, `{"order_id":null,`...)
	default:
		b = append(b, `{"order_id":"o-`...)
		b = appendUint(b, uint64(k.id), 9)
		b = append(b, `",`...)
	}
	b = append(b, `"user_id":"u-`...)
	b = appendUint(b, uint64(k.user), 7)
	b = append(b, `","amount":`...)
	switch bad {
	case badAmountString:
		b = append(b, `"abc"`...)
	case badNegativeAmount:
		b = appendCents(b, -k.cents)
	default:
		b = appendCents(b, k.cents)
	}
	c := &countries[k.country]
	switch k.currency {
	case currencyMissing:
	case currencyNull:
		b = append(b, `,"currency":null`...)
	default:
		b = append(b, `,"currency":"`...)
		b = append(b, c.currency...)
		b = append(b, '"')
	}
	b = append(b, `,"country":"`...)
	b = append(b, c.name...)
	b = append(b, `","category":"`...)
	b = append(b, categories[k.category].name...)
	b = append(b, `","status":"`...)
	b = append(b, statusNames[k.status]...)
	b = append(b, `","created_at":"`...)
	b = appendTime(b, k.createdAt, false)
	if bad == badUpdatedAt {
		b = append(b, `","updated_at":"not-a-date","op":"`...)
	} else {
		b = append(b, `","updated_at":"`...)
		b = appendTime(b, updatedAt, true)
		b = append(b, `","op":"`...)
	}
	b = append(b, op)
	return append(b, `"}`...)
}

// appendUint appends v in decimal, left-padded with zeros to width digits.
func appendUint(b []byte, v uint64, width int) []byte {
	var tmp [20]byte
	i := len(tmp)
	for v >= 10 {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
	}
	i--
	tmp[i] = byte('0' + v)
	for n := len(tmp) - i; n < width; n++ {
		b = append(b, '0')
	}
	return append(b, tmp[i:]...)
}

// appendCents appends cents as a decimal with exactly two fraction digits (1990 -> 19.90).
func appendCents(b []byte, cents int64) []byte {
	u := uint64(cents)
	if cents < 0 {
		b = append(b, '-')
		u = uint64(-cents)
	}
	b = appendUint(b, u/100, 1)
	b = append(b, '.')
	return append2(b, int(u%100))
}

// append2 appends a two-digit number 0..99.
func append2(b []byte, v int) []byte {
	return append(b, byte('0'+v/10), byte('0'+v%10))
}

// appendTime appends unix milliseconds as RFC 3339 UTC: 2006-01-02T15:04:05Z, or
// 2006-01-02T15:04:05.000Z with millis. Years must be within 0..9999.
func appendTime(b []byte, ms int64, millis bool) []byte {
	secs := floorDiv(ms, 1000)
	frac := int(ms - secs*1000)
	days := floorDiv(secs, 86400)
	sod := int(secs - days*86400)
	y, m, d := civil(days)
	b = append2(b, y/100)
	b = append2(b, y%100)
	b = append(b, '-')
	b = append2(b, m)
	b = append(b, '-')
	b = append2(b, d)
	b = append(b, 'T')
	b = append2(b, sod/3600)
	b = append(b, ':')
	b = append2(b, sod/60%60)
	b = append(b, ':')
	b = append2(b, sod%60)
	if millis {
		b = append(b, '.', byte('0'+frac/100))
		b = append2(b, frac%100)
	}
	return append(b, 'Z')
}

// civil converts days since 1970-01-01 to a proleptic Gregorian date
// (Howard Hinnant's civil_from_days).
func civil(days int64) (year, month, day int) {
	z := days + 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if mp >= 10 {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return int(y), int(m), int(d)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
