package silver

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"goldbridge/lakehouse/timetext"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
)

// The hash(a, b, …) function of rule expressions: a stable key for rows that have none
// (docs/expressions.md). Each argument is written as canonical text — a string as it is,
// an integer in decimal, a float (and a decimal, which expressions see as float64) in its
// shortest round-trip form, a bool as true/false, a date or timestamp in UTC RFC 3339 with
// nine fraction digits — framed as "<byte length>:<text>", and NULL as "-"; the frames are
// joined by ","; the result is the first 16 bytes of the SHA-256 of that, in lower-case hex
// (32 characters). NULL and "" differ ("-" and "0:"), as do ("ab","c") and ("a","bc").

// hashName is the function's name in expressions.
const hashName = "hash"

// maxHashArgs bounds the arguments of one hash call.
const maxHashArgs = 64

var hashOption = expr.Function(hashName, ruleHash, new(func(...any) string))

// ruleHash is hash(args…): see above.
func ruleHash(args ...any) (any, error) {
	if len(args) == 0 {
		return nil, errors.New("hash: expected at least one argument")
	}
	if len(args) > maxHashArgs {
		return nil, fmt.Errorf("hash: more than %d arguments", maxHashArgs)
	}
	// One buffer for the frames: a row's key text (~150 bytes for 7 arguments) fits.
	var arr [256]byte
	buf := arr[:0]
	for i, a := range args {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = appendHashArg(buf, a); err != nil {
			return nil, err
		}
	}
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:16]), nil
}

// hashTimeLayout is RFC 3339 in UTC with nine fraction digits, always.
const hashTimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// appendHashArg appends a's frame to b. The text of a number, a bool or a time is made
// in a buffer on the stack, not as a string: hash() runs per row (E0 of the taxi
// example: 9% of Silver's CPU, half of it in time.Format and the strings).
func appendHashArg(b []byte, a any) ([]byte, error) {
	var tmp [48]byte
	var text []byte
	switch x := a.(type) {
	case nil:
		return append(b, '-'), nil
	case string:
		b = strconv.AppendInt(b, int64(len(x)), 10)
		b = append(b, ':')
		return append(b, x...), nil
	case int:
		text = strconv.AppendInt(tmp[:0], int64(x), 10)
	case int64:
		text = strconv.AppendInt(tmp[:0], x, 10)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("hash: cannot hash %v", x)
		}
		text = strconv.AppendFloat(tmp[:0], x, 'g', -1, 64)
	case bool:
		text = strconv.AppendBool(tmp[:0], x)
	case time.Time:
		text = appendHashTime(tmp[:0], x)
	default:
		return nil, fmt.Errorf("hash: cannot hash a %T", a)
	}
	b = strconv.AppendInt(b, int64(len(text)), 10)
	b = append(b, ':')
	return append(b, text...), nil
}

// appendHashTime appends t as hashTimeLayout formats it, by hand for years 0-9999 (a
// typed Silver timestamp always is: inTimeRange), else with time.Format; the two agree
// (TestHashTimeMatchesFormat).
func appendHashTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	b, ok := timetext.AppendDateTime(b, t)
	if !ok {
		return t.AppendFormat(b, hashTimeLayout)
	}
	b = append(b, '.')
	b = timetext.AppendDigits(b, t.Nanosecond(), 9)
	return append(b, 'Z')
}

// callsHash reports whether node calls hash(), which reads NULL arguments itself.
func callsHash(n *ast.CallNode) bool {
	id, ok := n.Callee.(*ast.IdentifierNode)
	return ok && id.Value == hashName
}
