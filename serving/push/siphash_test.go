package push

import (
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
)

// Values of hex(sipHash128(s)) from ClickHouse 26.7 (also the key uniqExactState(s)
// stores: hex(uniqExactState('abc')) = 01 B6B415A2...).
func TestSipHash128MatchesClickHouse(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "32B5C1DB56A683E9E5B5B6A8CBED11F7"},
		{"abc", "B6B415A2DA966B6C685A65E54C12A353"},
		{"de", "A04E11E7C3514B936B103CD8F42E7A81"},
		{"12345678", "D13EE228FBDFEF7449D763923F330829"},
		{"123456789abcdef", "D8638A2E57E3F5AA18ADE3C257AF010E"},
	} {
		lo, hi := sipHash128([]byte(tc.in))
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:8], lo)
		binary.LittleEndian.PutUint64(b[8:], hi)
		if got := strings.ToUpper(hex.EncodeToString(b[:])); got != tc.want {
			t.Errorf("sipHash128(%q) = %s, ClickHouse says %s", tc.in, got, tc.want)
		}
	}
}
