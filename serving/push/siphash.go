package push

import (
	"encoding/binary"
	"math/bits"
)

// sipHash128 is ClickHouse's SipHash-2-4 with 128-bit output and zero keys, as
// uniqExact(String) keys its set and sipHash128(s) returns it: the bytes of the result
// are lo then hi, little-endian. It differs from the reference 128-bit SipHash in its
// finalization (v2 ^= 0xff, output v0^v1 and v2^v3).
func sipHash128(b []byte) (lo, hi uint64) {
	v0 := uint64(0x736f6d6570736575)
	v1 := uint64(0x646f72616e646f6d)
	v2 := uint64(0x6c7967656e657261)
	v3 := uint64(0x7465646279746573)
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(b)
	for len(b) >= 8 {
		m := binary.LittleEndian.Uint64(b)
		v3 ^= m
		round()
		round()
		v0 ^= m
		b = b[8:]
	}
	var last [8]byte
	copy(last[:], b)
	last[7] = byte(n)
	m := binary.LittleEndian.Uint64(last[:])
	v3 ^= m
	round()
	round()
	v0 ^= m
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1, v2 ^ v3
}

// SipHash64 is ClickHouse's sipHash64(b): the same SipHash-2-4 state as sipHash128,
// folded to 64 bits (v0^v1^v2^v3), used by check's row fingerprints.
func SipHash64(b []byte) uint64 {
	lo, hi := sipHash128(b)
	return lo ^ hi
}
