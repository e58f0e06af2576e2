package silver

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// PropReplacedPrefix + a sort_by column names the summary property of an upsert commit
// that lists the values (timestamps truncated to the hour) the versions it replaced
// held in that column: with the new versions, which are the rows carrying the commit's
// run id, a downstream mart knows every grain a commit touched without looking the old
// versions up. The value is a comma-separated list of ranges "a-b" or single values of
// hours since the epoch (timestamps), days (dates) or the integers; "" means none. A
// commit without the property (or "*": too many ranges to list) says nothing, and the
// reader must look the old versions up. An append commit lists "" (it replaces nothing)
// for the columns of its PropWrittenPrefix lists, its event time among them.
const PropReplacedPrefix = "goldbridge.replaced."

// PropWrittenPrefix + a sort_by column names the summary property of a commit that lists,
// in PropReplacedPrefix's form, the values its written rows (every row carrying its run
// id) hold in that column: with the replaced values, a downstream mart knows every grain
// the commit touched from the snapshot summaries alone, reading no data file.
const PropWrittenPrefix = "goldbridge.written."

// maxReplacedRanges bounds the ranges listed in one property; beyond it "*" is written.
const maxReplacedRanges = 2000

const microsPerHour = 3600 * 1_000_000

// replacedKey is the value recorded for a cell of a sort_by column, and whether the
// column's kind can be recorded.
func replacedKey(v Value, k Kind) (int64, bool) {
	switch k {
	case Timestamp:
		h := v.I / microsPerHour
		if v.I < 0 && v.I%microsPerHour != 0 {
			h-- // floor
		}
		return h, true
	case Date, Int32, Int64:
		return v.I, true
	}
	return 0, false
}

// ReplacedValue is the column value a listed value v stands for: the start of the hour
// for a timestamp column, v itself for a date or an integer.
func ReplacedValue(v int64, k Kind) Value {
	if k == Timestamp {
		return Value{I: v * microsPerHour}
	}
	return Value{I: v}
}

// encodeReplaced renders a set of values as sorted ranges.
func encodeReplaced(set map[int64]bool) string {
	vals := make([]int64, 0, len(set))
	for v := range set {
		vals = append(vals, v)
	}
	slices.Sort(vals)
	var b strings.Builder
	ranges := 0
	for i := 0; i < len(vals); {
		j := i
		for j+1 < len(vals) && vals[j+1] == vals[j]+1 {
			j++
		}
		if ranges++; ranges > maxReplacedRanges {
			return "*"
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(vals[i], 10))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.FormatInt(vals[j], 10))
		}
		i = j + 1
	}
	return b.String()
}

// DecodeReplaced parses a PropReplacedPrefix property and calls fn with each range
// [lo, hi] of values (hours since the epoch for a timestamp column). ok is false for
// "*" (not listed).
func DecodeReplaced(s string, fn func(lo, hi int64)) (ok bool, err error) {
	if s == "*" {
		return false, nil
	}
	if s == "" {
		return true, nil
	}
	for r := range strings.SplitSeq(s, ",") {
		a, b, isRange := strings.Cut(r, "-")
		if a == "" { // a negative single value "-5" or range "-5--3"
			a, b, isRange = cutNegative(r)
		}
		lo, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			return false, fmt.Errorf("replaced values %q: %w", r, err)
		}
		hi := lo
		if isRange {
			if hi, err = strconv.ParseInt(b, 10, 64); err != nil {
				return false, fmt.Errorf("replaced values %q: %w", r, err)
			}
		}
		fn(lo, hi)
	}
	return true, nil
}

// cutNegative splits a range whose first value is negative.
func cutNegative(r string) (a, b string, isRange bool) {
	a, b, isRange = strings.Cut(r[1:], "-")
	return "-" + a, b, isRange
}
