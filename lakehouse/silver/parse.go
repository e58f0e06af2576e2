package silver

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/valyala/fastjson"

	"goldbridge/lakehouse/bronze"
)

// parser types one payload into a row of Values. It is not safe for concurrent use
// (fastjson reuses its memory); make one per goroutine.
//
// The string Values it returns point into arena (appended to, never copied per value
// into its own allocation): they are valid until the caller reuses the arena, and
// whoever keeps one beyond that (the winners, the key set) copies it.
type parser struct {
	cols  []ColumnSpec
	paths [][]string
	defs  []Value // typed defaults; defs[i].Null when none
	hasDf []bool
	p     fastjson.Parser
	arena []byte // where string values are copied to (see above)
	num   []byte // scratch for number text
	// known are the top-level fields the columns read; tally, when set, counts the
	// others (drift.go). topCol[i]: column i's path is the first one that is the
	// top-level field alone, so the columns that find theirs count distinct fields.
	known  map[string]struct{}
	topCol []bool
	tally  *fieldTally
	flat   *flatScanner // nil unless every column reads a top-level field of its own
}

func newParser(cols []ColumnSpec) (*parser, error) {
	ps := &parser{cols: cols, paths: make([][]string, len(cols)), defs: make([]Value, len(cols)), hasDf: make([]bool, len(cols))}
	for i, c := range cols {
		path := strings.TrimPrefix(strings.TrimPrefix(c.Path, "$"), ".")
		if path == "" {
			path = c.Name
		}
		ps.paths[i] = strings.Split(path, ".")
		if c.Default != nil {
			v, err := convertString(&c, *c.Default)
			if err != nil {
				return nil, fmt.Errorf("column %s: default: %w", c.Name, err)
			}
			ps.defs[i], ps.hasDf[i] = v, true
		}
	}
	ps.known, ps.topCol = knownFields(ps.paths)
	ps.flat = newFlatScanner(ps.paths)
	return ps, nil
}

// parse fills row (len(cols)) from payload; on failure it returns the quarantine reason.
func (ps *parser) parse(payload []byte, row []Value) string {
	if len(payload) > MaxPayloadBytes {
		return payloadTooLarge
	}
	if len(bytes.TrimSpace(payload)) == 0 || payload[0] != '{' && bytes.TrimSpace(payload)[0] != '{' {
		return "invalid_json: not a JSON object"
	}
	if ps.flat != nil {
		if reason, ok := ps.parseFlat(payload, row); ok {
			return reason
		}
	}
	doc, err := ps.p.ParseBytes(payload)
	if err != nil {
		if strings.Contains(err.Error(), "too big depth") {
			return payloadDepthReason
		}
		return "invalid_json: " + firstLine(err.Error())
	}
	if doc.Type() != fastjson.TypeObject {
		return "invalid_json: not a JSON object"
	}
	reason, present := ps.columns(doc, row)
	if ps.tally != nil {
		ps.noteFields(doc.GetObject(), present, false)
	}
	return reason
}

// columns types the declared columns of doc into row, or returns the quarantine reason;
// present is the number of distinct top-level fields the columns found (see topCol),
// -1 after a failure.
func (ps *parser) columns(doc *fastjson.Value, row []Value) (reason string, present int) {
	for i := range ps.cols {
		c := &ps.cols[i]
		v := doc.Get(ps.paths[i]...)
		if v != nil && ps.topCol[i] {
			present++
		}
		if v == nil || v.Type() == fastjson.TypeNull {
			if ps.hasDf[i] {
				row[i] = ps.defs[i]
				continue
			}
			if c.Required {
				return "missing_" + c.Name, -1
			}
			row[i] = Value{Null: true}
			continue
		}
		val, err := ps.convert(c, v)
		if err != nil {
			return "invalid_" + c.Name + ": " + err.Error(), -1
		}
		row[i] = val
	}
	return "", present
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// convert types one JSON value. Numbers are accepted for string columns (as written),
// and numeric strings for number columns, as CDC tools often emit them that way.
// A string result points into ps.arena.
func (ps *parser) convert(c *ColumnSpec, v *fastjson.Value) (Value, error) {
	switch v.Type() {
	case fastjson.TypeString:
		return ps.convertRaw(c, flatString, unsafeString(v.GetStringBytes()))
	case fastjson.TypeNumber:
		ps.num = v.MarshalTo(ps.num[:0])
		return ps.convertRaw(c, flatNumber, unsafeString(ps.num))
	case fastjson.TypeTrue:
		return ps.convertRaw(c, flatTrue, "")
	case fastjson.TypeFalse:
		return ps.convertRaw(c, flatFalse, "")
	default:
		return Value{}, fmt.Errorf("%s for a %s", v.Type(), c.Type)
	}
}

// convertRaw types a scalar JSON value of kind: raw is a string's (unescaped) bytes or
// a number's text, only read during the call.
func (ps *parser) convertRaw(c *ColumnSpec, kind flatKind, raw string) (Value, error) {
	switch kind {
	case flatString, flatASCII:
		if kind == flatString && !utf8.ValidString(raw) {
			return Value{}, fmt.Errorf("not valid UTF-8")
		}
		if c.Type.Kind == String {
			return Value{S: ps.keep(raw)}, nil
		}
		// Only read during the call (errors copy what they quote).
		return convertString(c, raw)
	case flatNumber:
		if c.Type.Kind == String {
			return Value{S: ps.keep(raw)}, nil
		}
		switch c.Type.Kind {
		case Timestamp, Date:
			if c.Format == "" || c.Format == "rfc3339" {
				return Value{}, fmt.Errorf("number %s for a %s (set format: epoch_s/epoch_ms/epoch_us)", raw, c.Type)
			}
		}
		return convertString(c, raw)
	default: // flatTrue, flatFalse
		if c.Type.Kind == Bool {
			return Value{B: kind == flatTrue}, nil
		}
		if c.Type.Kind == String {
			if kind == flatTrue {
				return Value{S: "true"}, nil
			}
			return Value{S: "false"}, nil
		}
		return Value{}, fmt.Errorf("boolean for a %s", c.Type)
	}
}

// keep copies b to the arena and returns it as a string pointing there.
func (ps *parser) keep(b string) string {
	if len(b) == 0 {
		return ""
	}
	n := len(ps.arena)
	ps.arena = append(ps.arena, b...)
	return unsafeString(ps.arena[n:])
}

// unsafeString views b as a string without copying; b must not change while the
// string is in use.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// convertString types a textual value.
func convertString(c *ColumnSpec, s string) (Value, error) {
	switch c.Type.Kind {
	case String:
		return Value{S: s}, nil
	case Int32, Int64:
		n, err := parseInteger(s)
		if err != nil {
			return Value{}, fmt.Errorf("not an integer %q", clip(s))
		}
		if c.Type.Kind == Int32 && (n < math.MinInt32 || n > math.MaxInt32) {
			return Value{}, fmt.Errorf("%d out of int32 range", n)
		}
		return Value{I: n}, nil
	case Float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return Value{}, fmt.Errorf("not a number %q", clip(s))
		}
		return Value{F: f}, nil
	case Decimal:
		if u, ok := fastDecimal(s, c.Type.Precision, c.Type.Scale); ok {
			return Value{D: decimal128.FromI64(u)}, nil
		}
		d, err := parseDecimal(strings.TrimSpace(s), c.Type.Precision, c.Type.Scale)
		if err != nil {
			return Value{}, err
		}
		return Value{D: d}, nil
	case Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return Value{}, fmt.Errorf("not a boolean %q", clip(s))
		}
		return Value{B: b}, nil
	case Date:
		t, err := parseTime(c.Format, s, time.DateOnly)
		if err != nil {
			return Value{}, err
		}
		if err := inTimeRange(t.UnixMicro(), s); err != nil {
			return Value{}, err
		}
		return Value{I: int64(t.Unix() / 86400)}, nil
	case Timestamp:
		if c.Format == "" || c.Format == "rfc3339" {
			if us, ok := fastRFC3339(s); ok {
				return Value{I: us}, inTimeRange(us, s)
			}
		}
		t, err := parseTime(c.Format, s, time.RFC3339Nano)
		if err != nil {
			return Value{}, err
		}
		return Value{I: t.UnixMicro()}, inTimeRange(t.UnixMicro(), s)
	}
	return Value{}, fmt.Errorf("unsupported type %s", c.Type)
}

// parseInteger reads a whole number: decimal digits, an optional sign and an optional
// fraction of zeros ("2", "-7", "2.0", "2.00"). A Parquet double 2.0 reaches Bronze as
// JSON 2, a CSV field or a JSON line may write it 2.0: the same value types the same.
// The digits are read exactly, never through a float; "2.5", "2." and "1e3" are refused.
func parseInteger(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '.'); i > 0 && i < len(s)-1 && strings.Trim(s[i+1:], "0") == "" {
		s = s[:i]
	}
	return strconv.ParseInt(s, 10, 64)
}

// inTimeRange refuses an instant outside years 0001-9999 (time.Parse reads year 0000, and
// an offset can push 9999-12-31 past the end).
func inTimeRange(us int64, s string) error {
	if us < minEpochMicros || us >= endEpochMicros {
		return fmt.Errorf("%q is outside years 0001-9999", clip(s))
	}
	return nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// parseTime reads a timestamp or date text of at most MaxTimeText bytes; an epoch number
// must fall in years 0001-9999.
func parseTime(format, s, def string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxTimeText {
		return time.Time{}, fmt.Errorf("time text of %d bytes exceeds the limit of %d", len(s), MaxTimeText)
	}
	switch format {
	case "epoch_s", "epoch_ms", "epoch_us", "epoch_ns", "epoch_days":
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			// A whole number exactly (a float loses nanoseconds: io.debezium.time.NanoTimestamp).
			return epochInt(n, format, s)
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return time.Time{}, fmt.Errorf("not an epoch number %q", clip(s))
		}
		mult := map[string]float64{"epoch_s": 1e6, "epoch_ms": 1e3, "epoch_us": 1, "epoch_ns": 1e-3, "epoch_days": 86400e6}[format]
		us := math.Round(f * mult)
		if us < float64(minEpochMicros) || us >= float64(endEpochMicros) {
			return time.Time{}, fmt.Errorf("epoch %q is outside years 0001-9999", clip(s))
		}
		return time.UnixMicro(int64(us)).UTC(), nil
	case "", "rfc3339":
		t, err := time.Parse(def, s)
		if err != nil && def == time.RFC3339Nano {
			// Accept a space instead of T and a missing zone (taken as UTC).
			for _, l := range []string{"2006-01-02 15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"} {
				if t2, err2 := time.Parse(l, s); err2 == nil {
					return t2.UTC(), nil
				}
			}
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("not a %s %q", map[string]string{time.DateOnly: "date", time.RFC3339Nano: "RFC 3339 timestamp"}[def], clip(s))
		}
		return t.UTC(), nil
	default:
		t, err := time.Parse(format, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("%q does not match layout %q", clip(s), format)
		}
		return t.UTC(), nil
	}
}

// epochInt is the instant n units after the epoch (format epoch_*), in years 0001-9999;
// nanoseconds are rounded to the nearest microsecond, half away from zero.
func epochInt(n int64, format, s string) (time.Time, error) {
	var us int64
	ok := true
	switch format {
	case "epoch_ns":
		us = n / 1000
		if r := n % 1000; r >= 500 {
			us++
		} else if r <= -500 {
			us--
		}
	default:
		per := map[string]int64{"epoch_s": 1e6, "epoch_ms": 1e3, "epoch_us": 1, "epoch_days": 86400e6}[format]
		us = n * per
		ok = n == 0 || us/per == n
	}
	if !ok || us < minEpochMicros || us >= endEpochMicros {
		return time.Time{}, fmt.Errorf("epoch %q is outside years 0001-9999", clip(s))
	}
	return time.UnixMicro(us).UTC(), nil
}

// Limits of the textual values Silver types (see docs/silver.md, "Limits"). Past them a
// value is a quarantine reason, never an allocation that grows with the input.
const (
	// MaxDecimalText is the longest decimal literal read (sign, digits, point, exponent).
	MaxDecimalText = 1024
	// MaxDecimalExponent bounds the exponent of a decimal literal (1e5000 is refused; a
	// decimal128 holds at most 38 digits, so larger exponents only matter for zeros).
	MaxDecimalExponent = 4096
	// MaxTimeText is the longest timestamp or date text read.
	MaxTimeText = 256
	// MaxPayloadBytes is the largest payload Silver parses; Bronze stores larger
	// records only up to its own line limit (docs/bronze.md).
	MaxPayloadBytes = 16 << 20
)

var payloadTooLarge = fmt.Sprintf("payload_too_large: over %d bytes", MaxPayloadBytes)

// recordTooLarge is the reason of a Bronze row that stands for a landing record longer
// than bronze.MaxRecordBytes (its raw_payload keeps the length and first bytes).
var recordTooLarge = fmt.Sprintf("record_too_large: over %d bytes", bronze.MaxRecordBytes)

// Epoch numbers are accepted from year 0001 to the end of 9999 (the range of RFC 3339);
// both bounds are exact as float64.
var minEpochMicros, endEpochMicros = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(),
	time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// payloadDepthReason is the quarantine reason of a payload nested deeper than fastjson's
// limit (fastjson.MaxDepth levels of objects and arrays).
var payloadDepthReason = fmt.Sprintf("invalid_json: nested deeper than %d levels", fastjson.MaxDepth)

// parseDecimal parses a decimal literal exactly, rounding half away from zero to scale
// (as a cast to DECIMAL(p,s) does), and fails when it does not fit the precision. Its
// work and memory are bounded by MaxDecimalText and MaxDecimalExponent.
func parseDecimal(s string, prec, scale int) (decimal128.Num, error) {
	bad := func() (decimal128.Num, error) { return decimal128.Num{}, fmt.Errorf("not a decimal %q", clip(s)) }
	if s == "" {
		return bad()
	}
	if len(s) > MaxDecimalText {
		return decimal128.Num{}, fmt.Errorf("decimal text of %d bytes exceeds the limit of %d", len(s), MaxDecimalText)
	}
	neg := false
	i := 0
	if s[0] == '-' || s[0] == '+' {
		neg, i = s[0] == '-', 1
	}
	var intPart, frac string
	rest := s[i:]
	exp := 0
	if e := strings.IndexAny(rest, "eE"); e >= 0 {
		x, err := strconv.Atoi(rest[e+1:])
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return bad()
		}
		if err != nil || x > MaxDecimalExponent || x < -MaxDecimalExponent {
			return decimal128.Num{}, fmt.Errorf("decimal exponent of %q exceeds ±%d", clip(s), MaxDecimalExponent)
		}
		exp, rest = x, rest[:e]
	}
	intPart, frac, _ = strings.Cut(rest, ".")
	if intPart == "" && frac == "" {
		return bad()
	}
	digits := intPart + frac
	for _, c := range digits {
		if c < '0' || c > '9' {
			return bad()
		}
	}
	// value = digits * 10^(exp - len(frac)); we want unscaled = value * 10^scale.
	shift := exp - len(frac) + scale
	digits = strings.TrimLeft(digits, "0")
	roundUp := false
	if shift < 0 {
		cut := len(digits) + shift
		if cut < 0 {
			digits, roundUp = "", false
		} else {
			roundUp = cut < len(digits) && digits[cut] >= '5'
			digits = digits[:cut]
		}
	} else if digits != "" {
		if len(digits)+shift > prec { // checked before the zeros are written
			return decimal128.Num{}, fmt.Errorf("%q does not fit decimal(%d,%d)", clip(s), prec, scale)
		}
		digits += strings.Repeat("0", shift)
	}
	if len(digits) > prec {
		return decimal128.Num{}, fmt.Errorf("%q does not fit decimal(%d,%d)", clip(s), prec, scale)
	}
	var n decimal128.Num
	if len(digits) <= 18 {
		var u int64
		for _, c := range digits {
			u = u*10 + int64(c-'0')
		}
		n = decimal128.FromI64(u)
	} else {
		var err error
		if n, err = decimal128.FromString(digits, int32(prec), 0); err != nil {
			return bad()
		}
	}
	if roundUp {
		n = n.Add(decimal128.FromI64(1))
		if !n.FitsInPrecision(int32(prec)) {
			return decimal128.Num{}, fmt.Errorf("%q does not fit decimal(%d,%d)", clip(s), prec, scale)
		}
	}
	if neg {
		n = n.Negate()
	}
	return n, nil
}
