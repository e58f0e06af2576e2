package parquetzstd

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// pageLike is n bytes of JSON-like text: repetitive, with random digits.
func pageLike(r *rand.Rand, n int) []byte {
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(`{"order_id":"o`)
		b.WriteString(string(rune('0' + r.IntN(10))))
		for range 6 {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		b.WriteString(`","amount":`)
		for range 4 {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		b.WriteString(`,"op":"u"}`)
	}
	return b.Bytes()[:n]
}

func TestRegistered(t *testing.T) {
	c, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*codec); !ok {
		t.Fatalf("the zstd codec is %T, want *parquetzstd.codec", c)
	}
}

// Every page round-trips, and a page up to the window compresses to exactly the bytes
// arrow-go's own encoder (default window) writes; a larger one still round-trips.
func TestEncodeDecode(t *testing.T) {
	c := newCodec()
	r := rand.New(rand.NewPCG(1, 2))
	for _, lvl := range []int{1, 3, compress.DefaultCompressionLevel} {
		ref, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(level(lvl)),
			zstd.WithEncoderConcurrency(1), zstd.WithAllLitEntropyCompression(true))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 100, 64 << 10, 700 << 10, window, 3 << 20} {
			for _, random := range []bool{false, true} {
				src := pageLike(r, n)
				if random {
					for i := range src {
						src[i] = byte(r.Uint32())
					}
				}
				enc := c.EncodeLevel(nil, src, lvl)
				if n <= window {
					if want := ref.EncodeAll(src, nil); !bytes.Equal(enc, want) {
						t.Errorf("level %d, %d bytes (random %v): %d compressed bytes differ from arrow-go's %d", lvl, n, random, len(enc), len(want))
					}
				}
				dec, err := c.DecodeWithError(make([]byte, 0, 16), enc)
				if err != nil {
					t.Fatalf("level %d, %d bytes: decode: %v", lvl, n, err)
				}
				if !bytes.Equal(dec, src) {
					t.Fatalf("level %d, %d bytes (random %v): round trip differs", lvl, n, random)
				}
			}
		}
	}
	if _, err := c.DecodeWithError(nil, []byte("not zstd")); err == nil {
		t.Error("decoding garbage: no error")
	}
}

// Encoders are kept for reuse, up to maxIdle per level.
func TestEncodersReused(t *testing.T) {
	c := newCodec()
	c.EncodeLevel(nil, []byte("abc"), 1)
	e := c.encoder(level(1))
	if c.release(level(1), e); len(c.free[level(1)]) != 1 {
		t.Fatalf("%d idle encoders, want 1", len(c.free[level(1)]))
	}
	if got := c.encoder(level(1)); got != e {
		t.Error("the idle encoder was not reused")
	}
	for range c.maxIdle + 3 {
		c.release(level(1), e)
	}
	if len(c.free[level(1)]) != c.maxIdle {
		t.Errorf("%d idle encoders, want at most %d", len(c.free[level(1)]), c.maxIdle)
	}
}
