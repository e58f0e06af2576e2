// Package fingerprint is what a served copy of a mart must hash to: the canonical text of
// a served row, rendered from Gold's Arrow columns (Go) and from the served view (ClickHouse
// SQL) field by field in the same order, the digests of aggregate states, and the
// per-partition and per-level statistics of Gold (GoldStats) that sync.Check compares with
// what a hot.Target reads back. The two renderings live side by side so that they cannot
// drift apart unseen; the sync tests check they agree on every aggregate and type.
package fingerprint

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go/table"
	"github.com/shopspring/decimal"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
	"goldbridge/serving/ddl"
	"goldbridge/serving/hot"
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

// A double that is added up (a sum, an average: Approx) is no exact field: levels built
// by the server add the carrier rows' values in another order than Gold, so the last
// bits may differ. Its field says only whether it is NULL (N) or not (V), and its values
// are compared per level within a relative 1e-9, by their sum and by their sum weighted
// by each row's weight (rowWeight), which a value moved between rows changes.
//
// The served aggregate states are compared too (CheckedStates): per row, a digest of the
// state's elements (AppendStateDigest) after the row's key text, Summed per level like the
// row fingerprints. ClickHouse reads the states of <t>, row by row as stored.

// canonField is one field of the canonical text: the Gold column it comes from, its
// ClickHouse expression over the view, and how a NULL reads.
type canonField struct {
	gold    string // Gold column
	sql     string // canonical text of the served value (ClickHouse)
	nullAs0 bool   // a Gold NULL is served as 0
	present bool   // an Approx measure: only N (NULL) or V
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
		if Approx(ms) {
			f.sql, f.present = "if(isNull("+q(ms.Name)+"), 'N', 'V')", true
			out = append(out, f)
			continue
		}
		switch ms.Agg.Result() {
		case mart.ResultCount:
			f.sql, f.nullAs0 = canonSQL(q(ms.Name), ms.FinalType(), false), true
		case mart.ResultValue, mart.ResultAverage:
			f.sql = canonSQL(q(ms.Name), ms.FinalType(), true)
		case mart.ResultList:
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

// Approx reports whether measure ms is compared within a relative 1e-9 rather than
// exactly: a double that is added up (a sum or an average), which ClickHouse may add in
// another order than Gold. Minima, maxima and quantiles select values: exact.
func Approx(ms serving.Measure) bool {
	return IsFloat(ms) && (ms.Agg == mart.Sum || ms.Agg == mart.Avg)
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

// RowHashSQL is the ClickHouse expression of a served row's fingerprint.
func RowHashSQL(m *serving.Mart) string {
	return "sipHash64(concat(" + strings.Join(canonSQLParts(canonFields(m)), ", ") + "))"
}

// RowKeySQL is the ClickHouse expression of a row's key text (its key fields' text).
func RowKeySQL(m *serving.Mart) string {
	return "concat(" + strings.Join(canonSQLParts(canonFields(m)[:keyFields(m)]), ", ") + ")"
}

// rowWeight is the weight of a row in the weighted sums of Approx measures: 1 plus the
// top 53 bits of the sipHash64 of its key text as a fraction, in [1, 2).
func rowWeight(keyHash uint64) float64 { return 1 + float64(keyHash>>11)/(1<<53) }

// RowWeightSQL is rowWeight in ClickHouse.
func RowWeightSQL(m *serving.Mart) string {
	return "(1 + toFloat64(bitShiftRight(sipHash64(" + RowKeySQL(m) + "), 11)) / 9007199254740992)"
}

// StateCheck is a served state Check compares: a measure's, serialized as a varuint
// count followed by elements of width bytes.
type StateCheck struct {
	Measure serving.Measure
	Width   int // bytes of one element of the state (AppendStateDigest)
	// Bitmap: a bitmap of key ids (serving.DistinctBitmap), read back as the key hashes
	// its ids stand for (BitmapDigestSQL), which is what a uniqExact state holds.
	Bitmap bool
}

// CheckedStates lists the states Check compares with Gold's lists: quantiles'
// (groupArray(Float64): the values, 8 bytes each), and distinct counts' served as
// uniqExact (a set of the keys' SipHash-128, 16 bytes each) or as bitmaps (the same
// hashes, looked up by id in the key dictionary). A uniq state is a sample
// of the keys' hashes, which goldbridge does not build: its finished count is compared.
func CheckedStates(m *serving.Mart) []StateCheck {
	var out []StateCheck
	for _, ms := range m.Measures {
		switch {
		case ms.Agg == mart.Quantiles:
			out = append(out, StateCheck{Measure: ms, Width: 8})
		case ms.Agg == mart.CountDistinct && m.Distinct == serving.DistinctExact:
			out = append(out, StateCheck{Measure: ms, Width: 16})
		case ms.Agg == mart.CountDistinct && m.Distinct == serving.DistinctBitmap:
			out = append(out, StateCheck{Measure: ms, Width: 16, Bitmap: true})
		}
	}
	return out
}

// stateMeasures are the measures of checks.
func stateMeasures(checks []StateCheck) []serving.Measure {
	out := make([]serving.Measure, len(checks))
	for i, c := range checks {
		out[i] = c.Measure
	}
	return out
}

// AppendStateDigest appends the digest of a serialized state (a varuint count, then
// the elements, width bytes each): "n:d", n the number of elements and d the wrapping
// sum of their sipHash64, which does not depend on their order (ClickHouse writes a
// set in its hash table's order).
func AppendStateDigest(b, state []byte, width int) ([]byte, error) {
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

// GroupArrayMax is the most elements ClickHouse reads into a groupArray state (its
// aggregate_function_group_array_max_element_size, by default).
const GroupArrayMax = 1<<24 - 1

// StateDigestSQL is AppendStateDigest in ClickHouse over the state column col: of a
// distinct count's uniqExact(String) state, else of a quantiles' groupArray(Float64).
// A uniqExact(String) state is serialized as a groupArray(UInt128) of its hashes is, so
// it is read back as one (as a groupUniqArray(UInt128), which rebuilds a set, when it
// holds more than limit: groupArray refuses more than GroupArrayMax).
func StateDigestSQL(col string, distinct bool, limit int) string {
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

// BitmapDigestSQL is AppendStateDigest in ClickHouse over the bitmap state column col
// of a mart's distinct count: the digest of the key hashes its ids stand for in the key
// dictionary, under ddl.HashesWith (an id the dictionary lacks reads as hash 0, which
// no key of Gold's has).
func BitmapDigestSQL(col string) string {
	h := "arrayMap(x -> sipHash64(x), " + ddl.BitmapHashes(col) + ")"
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

// Summed lists the measures whose sum over a level's rows is compared (and reported)
// besides the fingerprint: the numeric ones. Quantile lists, dates and timestamps are
// covered by the fingerprint only.
func Summed(m *serving.Mart) []serving.Measure {
	var out []serving.Measure
	for _, ms := range m.Measures {
		// Minima and maxima of dates and timestamps have no sum: the fingerprint covers them.
		temporal := (ms.Agg == mart.Min || ms.Agg == mart.Max) && (ms.Type == "Date32" || strings.HasPrefix(ms.Type, "DateTime64"))
		if d, _ := ms.Agg.Desc(); d.Checked && !temporal {
			out = append(out, ms)
		}
	}
	return out
}

// IsFloat reports whether readers see the measure as a double (serving.Measure.FinalType):
// its sums are then compared within a relative 1e-9. An avg over an integer column is
// one, though its hidden __sum column is Int64.
func IsFloat(ms serving.Measure) bool { return ms.FinalType() == "Float64" }

// HotRange is the grain range [from, to) of the sorted hot partitions.
func HotRange(hot []hot.Partition) (time.Time, time.Time) {
	return hot[0].Start, hot[len(hot)-1].End
}

// GoldStats reads the Gold rows (all levels) of the hot partitions, as a push reads
// them with the states it builds, into LevelStats by partition id and level.
func GoldStats(ctx context.Context, m *serving.Mart, tbl *table.Table, hot []hot.Partition) (map[string]map[string]*hot.LevelStats, error) {
	acc := newGoldAcc(m)
	grains, err := push.ReadGrains(ctx, m, tbl, hot, acc.names(), stateMeasures(acc.states))
	if err != nil {
		return nil, fmt.Errorf("check %s: read gold: %w", m.Name, err)
	}
	for g, err := range grains {
		if err != nil {
			return nil, fmt.Errorf("check %s: read gold: %w", m.Name, err)
		}
		if err := acc.add(g); err != nil {
			return nil, fmt.Errorf("check %s: %w", m.Name, err)
		}
	}
	return acc.out, nil
}

// goldAcc adds Gold's rows up into LevelStats (by partition id and level), computing
// each row's fingerprint, sums, weighted sums and state fingerprints as ClickHouse does
// over the served rows.
type goldAcc struct {
	m      *serving.Mart
	fields []canonField
	nkey   int          // key fields (keyFields)
	sums   []int        // fields of the Summed measures
	Approx []int        // fields of the Approx measures
	states []StateCheck // state k is the grain's state k
	out    map[string]map[string]*hot.LevelStats
	ids    map[int64]string // grain value -> partition id
	buf    []byte           // a row's canonical text
	sbuf   []byte           // a row's state text
}

func newGoldAcc(m *serving.Mart) *goldAcc {
	a := &goldAcc{m: m, fields: canonFields(m), nkey: keyFields(m), states: CheckedStates(m),
		out: map[string]map[string]*hot.LevelStats{}, ids: map[int64]string{}}
	at := func(name string) int {
		return slices.IndexFunc(a.fields, func(f canonField) bool { return f.gold == name })
	}
	for _, ms := range Summed(m) {
		a.sums = append(a.sums, at(ms.Name))
	}
	for _, ms := range m.Measures {
		if Approx(ms) {
			a.Approx = append(a.Approx, at(ms.Name))
		}
	}
	return a
}

// names are the Gold columns of the fields, in order.
func (a *goldAcc) names() []string {
	out := make([]string, len(a.fields))
	for i, f := range a.fields {
		out[i] = f.gold
	}
	return out
}

// add adds the rows of one grain.
func (a *goldAcc) add(g push.GoldGrain) error {
	row := 0
	for _, rec := range g.Recs {
		for i := range int(rec.NumRows()) {
			if err := a.addRow(g, rec, i, row); err != nil {
				return err
			}
			row++
		}
	}
	return nil
}

// addRow adds row i of rec, the grain's row-th.
func (a *goldAcc) addRow(g push.GoldGrain, rec arrow.RecordBatch, i, row int) error {
	id, err := partitionOf(a.m, rec.Column(0), i, a.ids)
	if err != nil {
		return err
	}
	st := a.level(id, rec.Column(1).ValueStr(i))
	st.Rows++
	keyLen, err := a.text(rec, i)
	if err != nil {
		return err
	}
	st.Hash += push.SipHash64(a.buf)
	if err := a.addSums(st, rec, i); err != nil {
		return err
	}
	key := a.buf[:keyLen]
	if err := a.addWeighted(st, rec, i, key); err != nil {
		return err
	}
	for s, sc := range a.states {
		b, err := AppendStateDigest(append(a.sbuf[:0], key...), g.State(s, row), sc.Width)
		if err != nil {
			return fmt.Errorf("%s: %w", sc.Measure.Name, err)
		}
		a.sbuf = append(b, ';')
		st.States[sc.Measure.Name] += push.SipHash64(a.sbuf)
	}
	return nil
}

// text puts the canonical text of row i of rec into a.buf and returns the length of its
// key fields' text.
func (a *goldAcc) text(rec arrow.RecordBatch, i int) (int, error) {
	b, keyLen := a.buf[:0], 0
	var err error
	for k, f := range a.fields {
		if k == a.nkey {
			keyLen = len(b)
		}
		if b, err = appendField(b, rec.Column(k), i, f); err != nil {
			return 0, fmt.Errorf("%s: %w", f.gold, err)
		}
		b = append(b, ';')
	}
	if a.nkey == len(a.fields) {
		keyLen = len(b)
	}
	a.buf = b
	return keyLen, nil
}

// addSums adds row i of rec to the sums of the Summed measures (NULLs skipped).
func (a *goldAcc) addSums(st *hot.LevelStats, rec arrow.RecordBatch, i int) error {
	for _, k := range a.sums {
		if col := rec.Column(k); !col.IsNull(i) {
			d, err := toDecimal(col, i)
			if err != nil {
				return fmt.Errorf("%s: %w", a.fields[k].gold, err)
			}
			st.Sums[a.fields[k].gold] = st.Sums[a.fields[k].gold].Add(d)
		}
	}
	return nil
}

// addWeighted adds row i of rec, whose key text is key, to the weighted sums of the
// Approx measures (NULLs skipped).
func (a *goldAcc) addWeighted(st *hot.LevelStats, rec arrow.RecordBatch, i int, key []byte) error {
	if len(a.Approx) == 0 {
		return nil
	}
	w := rowWeight(push.SipHash64(key))
	for _, k := range a.Approx {
		col, ok := rec.Column(k).(*array.Float64)
		if !ok {
			return fmt.Errorf("%s: a double measure of type %s", a.fields[k].gold, rec.Column(k).DataType())
		}
		if !col.IsNull(i) {
			st.Weighted[a.fields[k].gold] += w * col.Value(i)
		}
	}
	return nil
}

// level returns the LevelStats of partition id and level l, created empty.
func (a *goldAcc) level(id, l string) *hot.LevelStats {
	byLevel := a.out[id]
	if byLevel == nil {
		byLevel = map[string]*hot.LevelStats{}
		a.out[id] = byLevel
	}
	st := byLevel[l]
	if st == nil {
		st = hot.NewLevelStats()
		byLevel[l] = st
	}
	return st
}

// partitionOf is the ClickHouse partition id of row i of the grain column a (ids
// caches them by grain value).
func partitionOf(m *serving.Mart, a arrow.Array, i int, ids map[int64]string) (string, error) {
	var v int64
	var t func() time.Time
	switch g := a.(type) {
	case *array.Date32:
		v = int64(g.Value(i))
		t = func() time.Time { return g.Value(i).ToTime() }
	case *array.Timestamp:
		v = micros(g, i)
		t = func() time.Time { return time.UnixMicro(v).UTC() }
	default:
		return "", fmt.Errorf("check %s: grain type %s", m.Name, a.DataType())
	}
	if a.IsNull(i) {
		return "", fmt.Errorf("check %s: gold row with a NULL grain", m.Name)
	}
	id, ok := ids[v]
	if !ok {
		id = m.PartitionID(t())
		ids[v] = id
	}
	return id, nil
}

func toDecimal(a arrow.Array, i int) (decimal.Decimal, error) {
	switch v := a.(type) {
	case *array.Decimal128:
		scale := v.DataType().(*arrow.Decimal128Type).Scale
		return decimal.NewFromBigInt(v.Value(i).BigInt(), -scale), nil
	case *array.Int64:
		return decimal.NewFromInt(v.Value(i)), nil
	case *array.Int32:
		return decimal.NewFromInt(int64(v.Value(i))), nil
	case *array.Float64:
		return decimal.NewFromFloat(v.Value(i)), nil
	}
	return decimal.Decimal{}, fmt.Errorf("unsupported type %s", a.DataType())
}

// Near reports whether two doubles agree within a relative 1e-9.
func Near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}
