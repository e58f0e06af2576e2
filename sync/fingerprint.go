package sync

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
	"goldbridge/serving/push"
)

// A row fingerprint is the SipHash-2-4 (zero keys, 64 bits: ClickHouse's sipHash64) of
// the row's canonical text; a partition level's fingerprint is the wrapping sum of its
// rows' fingerprints, which does not depend on row order. The canonical text is built
// in Go from Gold's Arrow columns (appendCanon) and in ClickHouse from the served view
// (canonSQL), field by field in the same order: grain, level, dimensions, grouping
// flags, measures; each field ends with ';'. Encodings: strings as <bytes>:<string>
// (so no separator is ambiguous), integers in decimal, floats as their IEEE-754 bits,
// decimals as ClickHouse's toString (trailing zeros trimmed), dates as days since
// 1970-01-01, timestamps as microseconds, quantile lists as their floats' bits joined
// with ',', and NULL as N (a NULL sum, min or max is served as NULL). Counts and
// distinct counts are never NULL in Gold; a NULL there reads as 0, as it is served.

// A double that is added up (a sum, an average: approx) is no exact field: levels built
// by the server add the carrier rows' values in another order than Gold, so the last
// bits may differ. Its field says only whether it is NULL (N) or not (V), and its values
// are compared per level within a relative 1e-9, by their sum and by their sum weighted
// by each row's weight (rowWeight), which a value moved between rows changes.
//
// The served aggregate states are compared too (checkedStates): per row, a digest of the
// state's elements (appendStateDigest) after the row's key text, summed per level like the
// row fingerprints. ClickHouse reads the states of <t>, row by row as stored.

// canonField is one field of the canonical text: the Gold column it comes from, its
// ClickHouse expression over the view, and how a NULL reads.
type canonField struct {
	gold    string // Gold column
	sql     string // canonical text of the served value (ClickHouse)
	nullAs0 bool   // a Gold NULL is served as 0
	present bool   // an approx measure: only N (NULL) or V
}

// canonFields lists the fields of a mart's canonical row text, in order.
func canonFields(m *serving.Mart) []canonField {
	q := serving.Q
	out := []canonField{
		{gold: m.Grain.As, sql: canonSQL(q(m.Grain.As), m.GrainType(), false)},
		{gold: mart.ColGroupingLevel, sql: canonSQL("toString("+q(mart.ColGroupingLevel)+")", "String", false)},
	}
	for _, d := range m.Dimensions {
		out = append(out, canonField{gold: d.Name, sql: canonSQL(q(d.Name), d.Type, true)})
	}
	for _, d := range m.Dimensions {
		out = append(out, canonField{gold: mart.GroupingCol(d.Name), sql: canonSQL(q(mart.GroupingCol(d.Name)), "UInt8", false)})
	}
	for _, ms := range m.Measures {
		f := canonField{gold: ms.Name}
		if approx(ms) {
			f.sql, f.present = "if(isNull("+q(ms.Name)+"), 'N', 'V')", true
			out = append(out, f)
			continue
		}
		switch ms.Agg {
		case mart.Count, mart.CountDistinct:
			f.sql, f.nullAs0 = canonSQL(q(ms.Name), ms.FinalType(), false), true
		case mart.Sum, mart.Min, mart.Max, mart.Avg:
			f.sql = canonSQL(q(ms.Name), ms.FinalType(), true)
		case mart.Quantiles:
			// Gold's NULL (no value in the group) is served as an empty array.
			f.sql = "if(empty(" + q(ms.Name) + "), 'N', arrayStringConcat(arrayMap(x -> toString(reinterpretAsUInt64(x)), " + q(ms.Name) + "), ','))"
		}
		out = append(out, f)
	}
	return out
}

// canonSQL is the canonical text of expression e of ClickHouse type t (Nullable when
// nullable).
func canonSQL(e, t string, nullable bool) string {
	if nullable {
		return "if(isNull(" + e + "), 'N', " + canonSQL("assumeNotNull("+e+")", t, false) + ")"
	}
	switch {
	case t == "String":
		return "concat(toString(length(" + e + ")), ':', " + e + ")"
	case t == "Float64":
		return "toString(reinterpretAsUInt64(" + e + "))"
	case t == "Bool":
		return "toString(toUInt8(" + e + "))"
	case t == "Date32" || t == "Date":
		return "toString(toInt32(" + e + "))"
	case strings.HasPrefix(t, "DateTime64"):
		return "toString(toUnixTimestamp64Micro(" + e + "))"
	}
	return "toString(" + e + ")" // integers, decimals
}

// approx reports whether measure ms is compared within a relative 1e-9 rather than
// exactly: a double that is added up (a sum or an average), which ClickHouse may add in
// another order than Gold. Minima, maxima and quantiles select values: exact.
func approx(ms serving.Measure) bool {
	return isFloat(ms) && (ms.Agg == mart.Sum || ms.Agg == mart.Avg)
}

// keyFields is the number of leading canonFields that identify a row: grain, level,
// dimensions and grouping flags.
func keyFields(m *serving.Mart) int { return 2 + 2*len(m.Dimensions) }

// canonSQLParts are the arguments of the ClickHouse concat() of the fields' canonical
// text, each followed by ';'.
func canonSQLParts(fields []canonField) []string {
	var parts []string
	for _, f := range fields {
		parts = append(parts, f.sql, "';'")
	}
	return parts
}

// rowHashSQL is the ClickHouse expression of a served row's fingerprint.
func rowHashSQL(m *serving.Mart) string {
	return "sipHash64(concat(" + strings.Join(canonSQLParts(canonFields(m)), ", ") + "))"
}

// rowKeySQL is the ClickHouse expression of a row's key text (its key fields' text).
func rowKeySQL(m *serving.Mart) string {
	return "concat(" + strings.Join(canonSQLParts(canonFields(m)[:keyFields(m)]), ", ") + ")"
}

// rowWeight is the weight of a row in the weighted sums of approx measures: 1 plus the
// top 53 bits of the sipHash64 of its key text as a fraction, in [1, 2).
func rowWeight(keyHash uint64) float64 { return 1 + float64(keyHash>>11)/(1<<53) }

// rowWeightSQL is rowWeight in ClickHouse.
func rowWeightSQL(m *serving.Mart) string {
	return "(1 + toFloat64(bitShiftRight(sipHash64(" + rowKeySQL(m) + "), 11)) / 9007199254740992)"
}

// stateCheck is a served state Check compares: a measure's, serialized as a varuint
// count followed by elements of width bytes.
type stateCheck struct {
	ms    serving.Measure
	width int
}

// checkedStates lists the states Check compares with Gold's lists: quantiles'
// (groupArray(Float64): the values, 8 bytes each), and distinct counts' served as
// uniqExact (a set of the keys' SipHash-128, 16 bytes each). A uniq state is a sample
// of the keys' hashes, which goldbridge does not build: its finished count is compared.
func checkedStates(m *serving.Mart) []stateCheck {
	var out []stateCheck
	for _, ms := range m.Measures {
		switch {
		case ms.Agg == mart.Quantiles:
			out = append(out, stateCheck{ms, 8})
		case ms.Agg == mart.CountDistinct && m.Distinct == "uniqExact":
			out = append(out, stateCheck{ms, 16})
		}
	}
	return out
}

// stateMeasures are the measures of checks.
func stateMeasures(checks []stateCheck) []serving.Measure {
	out := make([]serving.Measure, len(checks))
	for i, c := range checks {
		out[i] = c.ms
	}
	return out
}

// appendStateDigest appends the digest of a serialized state (a varuint count, then
// the elements, width bytes each): "n:d", n the number of elements and d the wrapping
// sum of their sipHash64, which does not depend on their order (ClickHouse writes a
// set in its hash table's order).
func appendStateDigest(b, state []byte, width int) ([]byte, error) {
	n, k := binary.Uvarint(state)
	if k <= 0 || uint64(len(state)-k) != n*uint64(width) {
		return nil, fmt.Errorf("a state of %d bytes is no count of %d-byte elements", len(state), width)
	}
	var d uint64
	for e := state[k:]; len(e) > 0; e = e[width:] {
		d += push.SipHash64(e[:width])
	}
	b = strconv.AppendUint(b, n, 10)
	return strconv.AppendUint(append(b, ':'), d, 10), nil
}

// groupArrayMax is the most elements ClickHouse reads into a groupArray state (its
// aggregate_function_group_array_max_element_size, by default).
const groupArrayMax = 1<<24 - 1

// stateDigestSQL is appendStateDigest in ClickHouse over the state column col: of a
// distinct count's uniqExact(String) state, else of a quantiles' groupArray(Float64).
// A uniqExact(String) state is serialized as a groupArray(UInt128) of its hashes is, so
// it is read back as one (as a groupUniqArray(UInt128), which rebuilds a set, when it
// holds more than limit: groupArray refuses more than groupArrayMax).
func stateDigestSQL(col string, distinct bool, limit int) string {
	elems := "finalizeAggregation(" + col + ")"
	if distinct {
		as := func(f string) string {
			return "finalizeAggregation(CAST(CAST(" + col + " AS String) AS AggregateFunction(" + f + ", UInt128)))"
		}
		elems = fmt.Sprintf("if(finalizeAggregation(%s) <= %d, %s, %s)", col, limit, as("groupArray"), as("groupUniqArray"))
	}
	h := "arrayMap(x -> sipHash64(x), " + elems + ")" // computed once
	return "concat(toString(length(" + h + ")), ':', toString(arraySum(" + h + ")))"
}

// appendField appends the canonical text of row i of the Gold column a as field f.
func appendField(b []byte, a arrow.Array, i int, f canonField) ([]byte, error) {
	if f.present {
		if a.IsNull(i) {
			return append(b, 'N'), nil
		}
		return append(b, 'V'), nil
	}
	return appendCanon(b, a, i, f.nullAs0)
}

// appendCanon appends the canonical text of row i of the Gold column a.
func appendCanon(b []byte, a arrow.Array, i int, nullAs0 bool) ([]byte, error) {
	if a.IsNull(i) {
		if nullAs0 {
			return append(b, '0'), nil
		}
		return append(b, 'N'), nil
	}
	switch v := a.(type) {
	case *array.String:
		s := v.Value(i)
		b = strconv.AppendInt(b, int64(len(s)), 10)
		return append(append(b, ':'), s...), nil
	case *array.LargeString:
		s := v.Value(i)
		b = strconv.AppendInt(b, int64(len(s)), 10)
		return append(append(b, ':'), s...), nil
	case *array.Int32:
		return strconv.AppendInt(b, int64(v.Value(i)), 10), nil
	case *array.Int64:
		return strconv.AppendInt(b, v.Value(i), 10), nil
	case *array.Float64:
		return strconv.AppendUint(b, math.Float64bits(v.Value(i)), 10), nil
	case *array.Boolean:
		if v.Value(i) {
			return append(b, '1'), nil
		}
		return append(b, '0'), nil
	case *array.Date32:
		return strconv.AppendInt(b, int64(v.Value(i)), 10), nil
	case *array.Timestamp:
		return strconv.AppendInt(b, micros(v, i), 10), nil
	case *array.Decimal128:
		return appendDecimal(b, v.Value(i), v.DataType().(*arrow.Decimal128Type).Scale), nil
	case *array.List:
		fs, ok := v.ListValues().(*array.Float64)
		if !ok {
			return nil, fmt.Errorf("unsupported list type %s", a.DataType())
		}
		s, e := v.ValueOffsets(i)
		for k := s; k < e; k++ {
			if k > s {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, math.Float64bits(fs.Value(int(k))), 10)
		}
		return b, nil
	}
	return nil, fmt.Errorf("unsupported type %s", a.DataType())
}

// micros is row i of a timestamp array in microseconds.
func micros(v *array.Timestamp, i int) int64 {
	t := int64(v.Value(i))
	switch v.DataType().(*arrow.TimestampType).Unit {
	case arrow.Second:
		return t * 1e6
	case arrow.Millisecond:
		return t * 1e3
	case arrow.Nanosecond:
		return t / 1e3
	}
	return t
}

// appendDecimal appends n at scale as ClickHouse's toString prints a decimal: no
// trailing zeros after the point, no point for an integral value.
func appendDecimal(b []byte, n decimal128.Num, scale int32) []byte {
	var digits []byte
	neg := n.Sign() < 0
	if neg {
		n = n.Negate()
	}
	if n.HighBits() == 0 && n.LowBits() < 1<<63 {
		digits = strconv.AppendUint(nil, n.LowBits(), 10)
	} else {
		digits = []byte(n.BigInt().Text(10))
	}
	if neg && !(len(digits) == 1 && digits[0] == '0') {
		b = append(b, '-')
	}
	s := int(scale)
	for len(digits) <= s {
		digits = append([]byte{'0'}, digits...)
	}
	ip, fp := digits[:len(digits)-s], digits[len(digits)-s:]
	for len(fp) > 0 && fp[len(fp)-1] == '0' {
		fp = fp[:len(fp)-1]
	}
	b = append(b, ip...)
	if len(fp) > 0 {
		b = append(append(b, '.'), fp...)
	}
	return b
}
