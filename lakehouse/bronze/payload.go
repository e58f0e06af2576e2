package bronze

import (
	"bytes"
	"encoding/base64"
	"unicode/utf8"
)

// BinaryPrefix marks a raw_payload that holds base64 of the delivered bytes because they
// were not valid UTF-8 (Iceberg strings must be UTF-8). A payload that happens to start
// with the prefix itself is encoded the same way, so decoding is always unambiguous.
const BinaryPrefix = "\x00b64:"

// EncodePayload returns the raw_payload string for delivered bytes: the bytes as-is when
// they are valid UTF-8, otherwise BinaryPrefix + base64. It never loses a byte.
func EncodePayload(b []byte) string {
	if utf8.Valid(b) && !bytes.HasPrefix(b, []byte(BinaryPrefix)) {
		return string(b)
	}
	return BinaryPrefix + base64.StdEncoding.EncodeToString(b)
}

// appendPayload is EncodePayload appending to dst (the hot path, without a string copy).
func appendPayload(dst, b []byte) ([]byte, bool) {
	if utf8.Valid(b) && !bytes.HasPrefix(b, []byte(BinaryPrefix)) {
		return append(dst, b...), false
	}
	dst = append(dst, BinaryPrefix...)
	return base64.StdEncoding.AppendEncode(dst, b), true
}

// DecodePayload returns the bytes that were delivered for a raw_payload value.
func DecodePayload(s string) ([]byte, error) {
	if rest, ok := bytes.CutPrefix([]byte(s), []byte(BinaryPrefix)); ok {
		return base64.StdEncoding.DecodeString(string(rest))
	}
	return []byte(s), nil
}
