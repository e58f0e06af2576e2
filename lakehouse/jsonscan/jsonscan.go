// Package jsonscan finds where JSON tokens end without decoding them: the one scanner
// that forget's payload matcher (lakehouse/bronze) and crypto-shredding's field
// rewriter (lakehouse/pii) share. It works on a string or a []byte without copying or
// allocating, never recurses, and reads each byte at most once per call.
//
// Bounds: SkipValue follows at most MaxDepth levels of nested objects and arrays;
// deeper input is malformed to it (-1), as Silver's parser refuses it. The scanner
// checks structure only (where a value ends), not validity: callers that need a valid
// document check it with encoding/json (json.Valid) as well.
package jsonscan

// MaxDepth is the deepest nesting of objects and arrays SkipValue follows: the bound
// of Silver's payload parser (fastjson.MaxDepth).
const MaxDepth = 300

// Text is what the scanner reads.
type Text interface{ ~string | ~[]byte }

// SkipWS returns the index of the first byte at or after i that is not JSON
// whitespace (len(doc) when there is none).
func SkipWS[T Text](doc T, i int) int {
	for i < len(doc) {
		switch doc[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// SkipString returns the index just after the JSON string starting at doc[i] (which
// must be '"'), or -1 when there is no string there or it is not closed.
func SkipString[T Text](doc T, i int) int {
	if i < 0 || i >= len(doc) || doc[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(doc); j++ {
		switch doc[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// SkipValue returns the index just after the JSON value starting at doc[i] (a string,
// an object or array with balanced brackets, or a scalar token running to the next
// delimiter), or -1 when there is none, it is not closed, or it nests deeper than
// MaxDepth.
func SkipValue[T Text](doc T, i int) int {
	if i < 0 || i >= len(doc) {
		return -1
	}
	switch doc[i] {
	case '"':
		return SkipString(doc, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(doc); j++ {
			switch doc[j] {
			case '"':
				e := SkipString(doc, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				if depth++; depth > MaxDepth {
					return -1
				}
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default: // number, true, false, null
		j := i
		for j < len(doc) && !delimiter(doc[j]) {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

func delimiter(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', ',', '}', ']':
		return true
	}
	return false
}
