package catalog

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Table properties naming how a table's Parquet data files are compressed. Every
// writer of a table (its stage, compaction, forget's rewrite) reads them from the
// table, so a file is always written with the table's codec at the time.
const (
	PropCodec      = "write.parquet.compression-codec"
	PropCodecLevel = "write.parquet.compression-level"
)

// Codec is how one layer's data files are compressed (lakehouse.compression in the
// configuration). The zero value is DefaultCodec.
type Codec struct {
	Name  string // zstd | snappy | lz4raw | uncompressed
	Level int    // zstd only: 1 to 22 (0: 1); 0 for the others
}

// DefaultCodec is zstd level 1: on JSON payloads within 2% of level 3's size for ~40%
// less compression CPU (docs/bronze.md).
func DefaultCodec() Codec { return Codec{Name: "zstd", Level: 1} }

// ParseCodec reads "zstd", "zstd:<level>", "snappy", "lz4raw" or "uncompressed"; ""
// is DefaultCodec.
func ParseCodec(s string) (Codec, error) {
	if s == "" {
		return DefaultCodec(), nil
	}
	name, lv, hasLevel := strings.Cut(s, ":")
	switch {
	case name == "zstd" && !hasLevel:
		return DefaultCodec(), nil
	case name == "zstd":
		n, err := strconv.Atoi(lv)
		if err != nil || n < 1 || n > 22 {
			return Codec{}, fmt.Errorf("zstd level %q: want 1 to 22", lv)
		}
		return Codec{Name: name, Level: n}, nil
	case hasLevel:
		return Codec{}, fmt.Errorf("codec %q: only zstd takes a level", s)
	}
	// The codecs a layer may choose, named as Iceberg's property spells them.
	names := []string{"zstd", "snappy", "lz4raw", "uncompressed"}
	if !slices.Contains(names, name) {
		return Codec{}, fmt.Errorf("unknown codec %q: want one of %s (zstd:<level> for a zstd level)", s, strings.Join(names, ", "))
	}
	return Codec{Name: name}, nil
}

// String is the codec as ParseCodec reads it.
func (c Codec) String() string {
	c = c.orDefault()
	if c.Name == "zstd" {
		return "zstd:" + strconv.Itoa(c.Level)
	}
	return c.Name
}

func (c Codec) orDefault() Codec {
	if c.Name == "" || c.Name == "zstd" && c.Level == 0 {
		return DefaultCodec()
	}
	return c
}

// Properties are the table properties that select the codec; a level of -1 is
// Iceberg's "the codec's default", which the codecs without levels ignore.
func (c Codec) Properties() iceberg.Properties {
	c = c.orDefault()
	level := "-1"
	if c.Name == "zstd" {
		level = strconv.Itoa(c.Level)
	}
	return iceberg.Properties{PropCodec: c.Name, PropCodecLevel: level}
}

// codecOf is the codec props select, if they name one (a level that is not a number
// reads as the codec's default).
func codecOf(props iceberg.Properties) (Codec, bool) {
	name, ok := props[PropCodec]
	if !ok {
		return Codec{}, false
	}
	c := Codec{Name: name}
	if name == "zstd" {
		c.Level, _ = strconv.Atoi(props[PropCodecLevel])
	}
	return c, true
}

// matches reports whether props already select c.
func (c Codec) matches(props iceberg.Properties) bool {
	for k, v := range c.Properties() {
		if props[k] != v {
			return false
		}
	}
	return true
}

// EnsureCodec sets c on the table ident when its properties name another codec, in a
// metadata-only commit (no snapshot: data, watermarks and history are unchanged), and
// returns the table as it then is. Files already written keep their codec, which every
// reader decodes; compaction rewrites them with c.
func (l *Lakehouse) EnsureCodec(ctx context.Context, ident string, tbl *table.Table, c Codec) (*table.Table, error) {
	if c.matches(tbl.Properties()) {
		return tbl, nil
	}
	out, err := l.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		if c.matches(tbl.Properties()) {
			return nil, nil // set meanwhile by another run
		}
		tx := tbl.NewTransaction()
		if err := tx.SetProperties(c.Properties()); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("set codec %s: %w", c, err)
	}
	return out, nil
}
