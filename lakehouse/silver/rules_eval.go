package silver

// The rules registry's hot path: applying the compiled rules to each typed row, the
// values expressions see and give back, and lookup keys.

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// apply runs the rules in registry order on row (len = len(cols)+len(extra)); the extra
// cells are filled here. A filter that is not true returns "<id>:<reason>"; "" means the
// row passes. See the package notes above for NULLs and errors.
func (r *ruleSet) apply(row []Value) string {
	r.dc.newRow(row)
	r.fresh = false
	for k := range r.rules {
		ru := &r.rules[k]
		switch ru.kind {
		case ruleFilter:
			if r.noFilters {
				continue
			}
			if ru.cmp != nil {
				if !ru.cmp.pass(row) {
					return ru.rejected
				}
				continue
			}
			out, err := r.eval(ru)
			if pass, _ := out.(bool); err != nil || !pass {
				return ru.rejected
			}
		case ruleNormalize, ruleDerive:
			var out any
			if !ru.strict || !ruleReadsNull(ru.refs, row) {
				var err error
				if out, err = r.eval(ru); err != nil {
					if !ruleReadsNull(ru.refs, row) {
						return ru.id + ":" + ruleErrorClass(err)
					}
					out = nil
				}
			}
			v, err := ruleResultValue(ru.target, out)
			if err != nil {
				return ru.failed
			}
			row[ru.col] = v
			if r.inEnv[ru.col] {
				r.wrote(ru.col, exprValue(&ru.target, v, out))
			}
		case ruleLookup:
			r.lookup(ru, row)
		}
	}
	return ""
}

// eval is the rule's expression on the current row: evaluated directly when it can be
// (rules_direct.go), else by the VM, whose environment is filled when a row first needs it.
func (r *ruleSet) eval(ru *compiledRule) (any, error) {
	if ru.direct != nil {
		if out, ok := r.evalDirect(ru.direct); ok {
			return out, nil
		}
	}
	r.fillEnv(ru.types)
	return r.vm.Run(ru.prog, r.env)
}

// fillEnv puts this row's columns some expression reads into the VM's environment, each
// as read with its type in types (the columns past len(types) are a later rule's to
// write), unless the environment already holds this row.
func (r *ruleSet) fillEnv(types []Type) {
	if r.fresh {
		return
	}
	for i, t := range types {
		if r.inEnv[i] {
			r.env[r.cols[i].Name] = r.dc.value(i, t)
		}
	}
	r.fresh = true
}

// evalDirect runs a direct evaluator; ok is false when it gave way to the VM.
func (r *ruleSet) evalDirect(f directFn) (out any, ok bool) {
	defer func() {
		if recover() != nil {
			out, ok = nil, false
		}
	}()
	return f(&r.dc), true
}

// wrote shows column c, which some expression reads, with its new expression-side value
// to the rules after. (A column no expression reads is never looked up: not boxed.)
func (r *ruleSet) wrote(c int, v any) {
	r.dc.set(c, v)
	if r.fresh {
		r.env[r.cols[c].Name] = v
	}
}

// exprValue is a written cell as the next rules read it: the expression's own result when
// it is already that representation, else the stored (converted) value.
func exprValue(c *ColumnSpec, v Value, out any) any {
	switch out.(type) {
	case string:
		if c.Type.Kind == String {
			return out
		}
	case bool:
		if c.Type.Kind == Bool {
			return out
		}
	}
	return ruleEnvValue(c.Type, v)
}

func (r *ruleSet) lookup(ru *compiledRule, row []Value) {
	r.key = r.key[:0]
	var vals []string
	ok := true
	for j, ci := range ru.keys {
		v := row[ci]
		if v.Null { // NULL = x is never true
			ok = false
			break
		}
		if j > 0 {
			r.key = append(r.key, lookupKeySep)
		}
		r.key = appendLookupKey(r.key, ru.keyTypes[j], v)
	}
	if ok {
		vals, ok = ru.table[string(r.key)]
	}
	for j, oi := range ru.outs {
		v := Value{Null: true}
		if ok {
			v = Value{S: vals[j]}
		}
		row[oi] = v
		if r.inEnv[oi] {
			r.wrote(oi, ruleEnvValue(r.cols[oi].Type, v))
		}
	}
}

func ruleReadsNull(refs []int, row []Value) bool {
	for _, i := range refs {
		if row[i].Null {
			return true
		}
	}
	return false
}

// ruleErrorClass names a runtime failure with a short, low-cardinality class.
func ruleErrorClass(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "divide by zero"):
		return "division_by_zero"
	case strings.Contains(msg, "out of range"):
		return "out_of_range"
	case strings.Contains(msg, "memory budget"):
		return "memory_budget_exceeded"
	case strings.Contains(msg, "invalid operation"), strings.Contains(msg, "interface conversion"),
		strings.Contains(msg, "invalid argument"), strings.Contains(msg, "cannot"), strings.Contains(msg, "expected"):
		return "type_error"
	}
	return "eval_error"
}

// ruleEnvValue is the expression-side value of a cell (see the package notes above).
func ruleEnvValue(t Type, v Value) any {
	if v.Null {
		return nil
	}
	switch t.Kind {
	case String:
		return v.S
	case Int32, Int64:
		return int(v.I)
	case Float64:
		return v.F
	case Decimal:
		return v.D.ToFloat64(int32(t.Scale))
	case Bool:
		return v.B
	case Date:
		return time.Unix(v.I*86400, 0).UTC()
	case Timestamp:
		return time.UnixMicro(v.I).UTC()
	}
	return nil
}

// ruleResultValue converts an expression result to a cell of column c: nil is NULL;
// strings are typed like payload text (convertString); numbers are range-checked, a float
// fills an integer column only when integral and a decimal one rounded half away from zero
// to the scale; a time fills a date (its UTC day) or a timestamp.
func ruleResultValue(c ColumnSpec, out any) (Value, error) {
	switch x := out.(type) {
	case nil:
		return Value{Null: true}, nil
	case string:
		if c.Type.Kind == String {
			return Value{S: x}, nil
		}
		return convertString(&c, x)
	case bool:
		if c.Type.Kind == Bool {
			return Value{B: x}, nil
		}
	case time.Time:
		switch c.Type.Kind {
		case Date:
			s := x.Unix()
			d := s / 86400
			if s%86400 < 0 {
				d--
			}
			return Value{I: d}, nil
		case Timestamp:
			return Value{I: x.UnixMicro()}, nil
		}
	case int:
		return ruleIntResult(c, int64(x))
	case int8:
		return ruleIntResult(c, int64(x))
	case int16:
		return ruleIntResult(c, int64(x))
	case int32:
		return ruleIntResult(c, int64(x))
	case int64:
		return ruleIntResult(c, x)
	case uint:
		return ruleUintResult(c, uint64(x))
	case uint8:
		return ruleIntResult(c, int64(x))
	case uint16:
		return ruleIntResult(c, int64(x))
	case uint32:
		return ruleIntResult(c, int64(x))
	case uint64:
		return ruleUintResult(c, x)
	case float32:
		return ruleFloatResult(c, float64(x))
	case float64:
		return ruleFloatResult(c, x)
	}
	return Value{}, fmt.Errorf("%T result for a %s column", out, c.Type)
}

func ruleUintResult(c ColumnSpec, u uint64) (Value, error) {
	if u > math.MaxInt64 {
		return Value{}, fmt.Errorf("%d out of range", u)
	}
	return ruleIntResult(c, int64(u))
}

func ruleIntResult(c ColumnSpec, n int64) (Value, error) {
	switch c.Type.Kind {
	case Int32:
		if n < math.MinInt32 || n > math.MaxInt32 {
			return Value{}, fmt.Errorf("%d out of int32 range", n)
		}
		return Value{I: n}, nil
	case Int64:
		return Value{I: n}, nil
	case Float64:
		return Value{F: float64(n)}, nil
	case Decimal:
		u := uint64(n)
		if n < 0 {
			u = -u
		}
		digits := 0
		for ; u > 0; u /= 10 {
			digits++
		}
		if digits+c.Type.Scale > c.Type.Precision {
			return Value{}, fmt.Errorf("%d does not fit %s", n, c.Type)
		}
		return Value{D: decimal128.FromI64(n).Mul(decimal128.GetScaleMultiplier(c.Type.Scale))}, nil
	}
	return Value{}, fmt.Errorf("integer result for a %s column", c.Type)
}

func ruleFloatResult(c ColumnSpec, f float64) (Value, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return Value{}, fmt.Errorf("%v result", f)
	}
	switch c.Type.Kind {
	case Float64:
		return Value{F: f}, nil
	case Int32, Int64:
		if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return Value{}, fmt.Errorf("%v is not an integer", f)
		}
		return ruleIntResult(c, int64(f))
	case Decimal:
		// The shortest text of the float, so 0.1+0.2 rounds like 0.3 and 1.005 like 1.005.
		d, err := parseDecimal(strconv.FormatFloat(f, 'g', -1, 64), c.Type.Precision, c.Type.Scale)
		if err != nil {
			return Value{}, err
		}
		return Value{D: d}, nil
	}
	return Value{}, fmt.Errorf("number result for a %s column", c.Type)
}

// appendLookupKey renders a non-NULL cell as lookup key text: strings as they are, integers
// in decimal, floats in their shortest form, decimals with their scale ("10.50"), bools as
// true/false, dates as 2006-01-02 and timestamps as RFC 3339 in UTC.
func appendLookupKey(b []byte, t Type, v Value) []byte {
	switch t.Kind {
	case String:
		return append(b, v.S...)
	case Int32, Int64:
		return strconv.AppendInt(b, v.I, 10)
	case Float64:
		return strconv.AppendFloat(b, v.F, 'g', -1, 64)
	case Decimal:
		return appendLookupDecimal(b, v.D, t.Scale)
	case Bool:
		return strconv.AppendBool(b, v.B)
	case Date:
		return time.Unix(v.I*86400, 0).UTC().AppendFormat(b, time.DateOnly)
	case Timestamp:
		return time.UnixMicro(v.I).UTC().AppendFormat(b, time.RFC3339Nano)
	}
	return b
}

// appendLookupDecimal renders an unscaled decimal with scale digits after the point, without
// allocating when it fits an int64.
func appendLookupDecimal(b []byte, n decimal128.Num, scale int) []byte {
	hi, lo := n.HighBits(), n.LowBits()
	if !(hi == 0 && lo>>63 == 0 || hi == -1 && lo>>63 == 1) {
		return append(b, n.ToString(int32(scale))...)
	}
	x := int64(lo)
	u := uint64(x)
	if x < 0 {
		b = append(b, '-')
		u = -u
	}
	var buf [20]byte
	digits := strconv.AppendUint(buf[:0], u, 10)
	if scale <= 0 {
		return append(b, digits...)
	}
	if len(digits) <= scale {
		b = append(b, '0', '.')
		for range scale - len(digits) {
			b = append(b, '0')
		}
		return append(b, digits...)
	}
	at := len(digits) - scale
	b = append(b, digits[:at]...)
	b = append(b, '.')
	return append(b, digits[at:]...)
}

// violations evaluates every filter rule on a finished row (all columns, the rules' own
// included, as they will be stored) and calls fn with the id of each one it does not
// pass. It is the row level of the quality report.
func (r *ruleSet) violations(row []Value, fn func(id string)) {
	r.dc.newRow(row)
	r.fresh = false
	for k := range r.rules {
		ru := &r.rules[k]
		if ru.kind != ruleFilter {
			continue
		}
		if ru.cmp != nil {
			if !ru.cmp.pass(row) {
				fn(ru.id)
			}
			continue
		}
		if ru.direct != nil && ru.final {
			if out, ok := r.evalDirect(ru.direct); ok {
				if pass, _ := out.(bool); !pass {
					fn(ru.id)
				}
				continue
			}
		}
		r.fillEnv(r.types)
		out, err := r.vm.Run(ru.prog, r.env)
		if pass, _ := out.(bool); err != nil || !pass {
			fn(ru.id)
		}
	}
}
