package silver

import (
	"encoding/binary"
	"math"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"github.com/twmb/murmur3"
	"github.com/zeebo/xxh3"
)

// Grouping and sharding: which pass a key belongs to (its Iceberg bucket), which
// merge shard keeps it, and the winners tables of the merge.

// otherGroup marks a row, in chunk.shard, whose key belongs to another pass's group.
const otherGroup = math.MaxUint8

// maxGroups is the most key groups a run can be split into so that each holds whole
// Iceberg buckets (and each shard a share of each group's), or 0 when the key is not
// bucketed by value (any number then).
func (e *engine) maxGroups() int {
	if _, ok := icebergBucket("0", e.cols[e.keyIdx[0]].Type.Kind, max(e.spec.Buckets, 1)); !ok {
		return 0
	}
	b := max(e.spec.Buckets, 1)
	if e.bucketShards {
		b /= len(e.ws)
	}
	return max(b, 1)
}

// groupOf returns the key group of a rendered key whose hash is h: a function of the
// key's Iceberg bucket (so each group writes whole buckets; with bucket shards, of the
// bucket divided by the shard count, so each group spreads over every shard), or of
// the hash's high bits.
func (e *engine) groupOf(key string, h xxh3.Uint128) int {
	if e.groups == 1 {
		return 0
	}
	first, _, _ := strings.Cut(key, "\x1f")
	if b, ok := icebergBucket(first, e.cols[e.keyIdx[0]].Type.Kind, max(e.spec.Buckets, 1)); ok {
		if e.bucketShards {
			b /= len(e.ws)
		}
		return b % e.groups
	}
	return int(h.Hi % uint64(e.groups))
}

// mergeShards is the number of winners shards: one per core, up to maxMergeShards.
func mergeShards() int { return max(1, min(runtime.GOMAXPROCS(0), maxMergeShards)) }

const maxMergeShards = 4

// shardOfKey returns the index of the winners shard that owns a rendered key, the low
// 64 bits of whose hash are h. On a bucket-partitioned table a shard owns whole Iceberg
// buckets, so every data file is written from one shard (in the shard's sort order).
func (e *engine) shardOfKey(key string, h uint64) int {
	n := len(e.ws)
	if n == 1 {
		return 0
	}
	if e.bucketShards {
		first, _, _ := strings.Cut(key, "\x1f")
		if b, ok := icebergBucket(first, e.cols[e.keyIdx[0]].Type.Kind, e.spec.Buckets); ok {
			return b % n
		}
	}
	return int((h >> 32) % uint64(n))
}

// icebergBucket is Iceberg's bucket transform of a key value rendered as text (see
// appendKeyText): murmur3 of the UTF-8 bytes of a string, of the 8 little-endian bytes
// of an integer, date or timestamp.
func icebergBucket(v string, k Kind, buckets int) (int, bool) {
	var h uint32
	switch k {
	case String:
		h = murmur3.Sum32(unsafe.Slice(unsafe.StringData(v), len(v)))
	case Int32, Int64, Date, Timestamp:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false
		}
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(n))
		h = murmur3.Sum32(b[:])
	default:
		return 0, false
	}
	return int(h&math.MaxInt32) % buckets, true
}

// lookupKey finds a key among the winners.
func (e *engine) lookupKey(key string) (*winners, int, bool) {
	h := keyHash(key)
	w := e.ws[e.shardOfKey(key, h.Lo)]
	slot, ok := w.lookup(h)
	return w, slot, ok
}

// lookupHash finds the key whose hash (keyHash) is h among the winners.
func (e *engine) lookupHash(h xxh3.Uint128) (*winners, int, bool) {
	for _, w := range e.ws { // a key is in one shard; which one takes its text to know
		if slot, ok := w.lookup(h); ok {
			return w, slot, true
		}
	}
	return nil, 0, false
}

// winnerCount is the number of keys the run holds.
func (e *engine) winnerCount() int {
	n := 0
	for _, w := range e.ws {
		n += w.len()
	}
	return n
}
