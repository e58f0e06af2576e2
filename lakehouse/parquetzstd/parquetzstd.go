// Package parquetzstd replaces arrow-go's zstd Parquet codec (registered for every
// Parquet file this process reads or writes; import it for the side effect) with one
// whose encoders are sized for Parquet pages and kept across garbage collections.
//
// arrow-go compresses each page with EncodeAll on an encoder from a sync.Pool, and
// klauspost/compress gives an encoder a history buffer of twice its window (4-8 MB),
// allocated and zeroed on first use. The pool is emptied by every collection, so a run
// kept allocating 8-16 MB per encoder; in the 10M incremental run that was ~40 ms of
// zeroing and page faults. A page is compressed on its own, and the pages Parquet
// writes hold up to ~1 MB: a 1 MB window finds the same matches in them (identical
// output), with a history of 1.1 MB.
package parquetzstd

import (
	"io"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// window is the encoders' window: the size of the largest page compressed as a whole.
const window = 1 << 20

func init() { compress.RegisterCodec(compress.Codecs.Zstd, newCodec()) }

// codec implements compress.Codec, compress.ErrorCodec and compress.StreamingCodec.
type codec struct {
	mu      sync.Mutex
	free    map[zstd.EncoderLevel][]*zstd.Encoder // idle encoders per level
	maxIdle int

	decOnce sync.Once
	dec     *zstd.Decoder // DecodeAll is safe for concurrent use
}

func newCodec() *codec {
	return &codec{free: map[zstd.EncoderLevel][]*zstd.Encoder{}, maxIdle: 2 * runtime.GOMAXPROCS(0)}
}

// level maps a Parquet compression level to the encoder's (arrow-go's mapping).
func level(l int) zstd.EncoderLevel {
	if l == compress.DefaultCompressionLevel {
		return zstd.SpeedDefault
	}
	return zstd.EncoderLevelFromZstd(l)
}

func (c *codec) encoder(l zstd.EncoderLevel) *zstd.Encoder {
	c.mu.Lock()
	if f := c.free[l]; len(f) > 0 {
		e := f[len(f)-1]
		c.free[l] = f[:len(f)-1]
		c.mu.Unlock()
		return e
	}
	c.mu.Unlock()
	e, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(l),
		zstd.WithEncoderConcurrency(1), zstd.WithAllLitEntropyCompression(true),
		zstd.WithWindowSize(window), zstd.WithLowerEncoderMem(true))
	if err != nil {
		panic("parquetzstd: " + err.Error()) // constant, valid options
	}
	return e
}

func (c *codec) release(l zstd.EncoderLevel, e *zstd.Encoder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.free[l]) < c.maxIdle {
		c.free[l] = append(c.free[l], e)
	}
}

func (c *codec) Encode(dst, src []byte) []byte {
	return c.EncodeLevel(dst, src, compress.DefaultCompressionLevel)
}

func (c *codec) EncodeLevel(dst, src []byte, l int) []byte {
	lv := level(l)
	e := c.encoder(lv)
	defer c.release(lv, e)
	return e.EncodeAll(src, dst[:0])
}

// CompressBound is ZSTD_COMPRESSBOUND from zstd.h.
func (c *codec) CompressBound(n int64) int64 {
	extra := ((128 << 10) - n) >> 11
	if n >= 128<<10 {
		extra = 0
	}
	return n + (n >> 8) + extra
}

func (c *codec) decoder() *zstd.Decoder {
	c.decOnce.Do(func() {
		var err error
		if c.dec, err = zstd.NewReader(nil); err != nil {
			panic("parquetzstd: " + err.Error()) // no options: cannot fail
		}
	})
	return c.dec
}

func (c *codec) Decode(dst, src []byte) []byte {
	out, err := c.DecodeWithError(dst, src)
	if err != nil {
		panic(err) // compress.Decode calls DecodeWithError; this is the old interface
	}
	return out
}

func (c *codec) DecodeWithError(dst, src []byte) ([]byte, error) {
	return c.decoder().DecodeAll(src, dst[:0])
}

// readCloser returns its decoder's resources on Close.
type readCloser struct{ *zstd.Decoder }

func (r readCloser) Close() error {
	r.Decoder.Close()
	return nil
}

func (c *codec) NewReader(r io.Reader) io.ReadCloser {
	d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return io.NopCloser(errReader{err})
	}
	return readCloser{d}
}

func (c *codec) NewWriter(w io.Writer) io.WriteCloser {
	e, _ := zstd.NewWriter(w) // default options cannot fail
	return e
}

func (c *codec) NewWriterLevel(w io.Writer, l int) (io.WriteCloser, error) {
	return zstd.NewWriter(w, zstd.WithEncoderLevel(level(l)))
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
