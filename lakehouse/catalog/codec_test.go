package catalog_test

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/iceberg-go"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

func TestParseCodec(t *testing.T) {
	tests := []struct {
		in, want, err string
	}{
		{"", "zstd:1", ""},
		{"zstd", "zstd:1", ""},
		{"zstd:1", "zstd:1", ""},
		{"zstd:22", "zstd:22", ""},
		{"snappy", "snappy", ""},
		{"lz4raw", "lz4raw", ""},
		{"uncompressed", "uncompressed", ""},
		{"zstd:0", "", "want 1 to 22"},
		{"zstd:23", "", "want 1 to 22"},
		{"zstd:x", "", "want 1 to 22"},
		{"snappy:3", "", "only zstd takes a level"},
		{"lz4", "", "unknown codec"},
		{"gzip", "", "unknown codec"},
		{"ZSTD", "", "unknown codec"},
	}
	for _, tc := range tests {
		c, err := catalog.ParseCodec(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseCodec(%q) = %v, %v; want an error with %q", tc.in, c, err, tc.err)
			}
			continue
		}
		if err != nil || c.String() != tc.want {
			t.Errorf("ParseCodec(%q) = %v, %v; want %s", tc.in, c, err, tc.want)
			continue
		}
		// String reads back as the same codec.
		if back, err := catalog.ParseCodec(c.String()); err != nil || back != c {
			t.Errorf("ParseCodec(%q) = %v, %v; want %v", c.String(), back, err, c)
		}
	}
}

// TestEnsureCodec: a table loaded with props naming another codec is set to it in a
// commit without a snapshot; files written after are in the new codec, those before
// keep theirs, and every row reads back; loading it again commits nothing.
func TestEnsureCodec(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	const ident = "silver.codec"
	props := func(c string) iceberg.Properties {
		codec, err := catalog.ParseCodec(c)
		if err != nil {
			t.Fatal(err)
		}
		return codec.Properties()
	}
	tbl, created, err := lh.LoadOrCreateTable(ctx, ident, testSchema(), testSpec(), props("zstd"))
	if err != nil || !created {
		t.Fatalf("create: %v, created %v", err, created)
	}
	first := genRows(0, 40)
	if tbl, err = lh.Commit(ctx, ident, addFiles(writeFiles(t, tbl, first), nil)); err != nil {
		t.Fatal(err)
	}
	snap := tbl.CurrentSnapshot().SnapshotID

	for _, c := range []struct {
		codec string
		want  compress.Compression
	}{{"lz4raw", compress.Codecs.Lz4Raw}, {"snappy", compress.Codecs.Snappy}, {"uncompressed", compress.Codecs.Uncompressed}, {"zstd:3", compress.Codecs.Zstd}} {
		before := tbl.MetadataLocation()
		tbl, _, err = lh.LoadOrCreateTable(ctx, ident, testSchema(), testSpec(), props(c.codec))
		if err != nil {
			t.Fatalf("%s: %v", c.codec, err)
		}
		if tbl.MetadataLocation() == before {
			t.Fatalf("%s: nothing committed", c.codec)
		}
		if got := tbl.CurrentSnapshot().SnapshotID; got != snap {
			t.Fatalf("%s: the codec's commit made snapshot %d (was %d)", c.codec, got, snap)
		}
		for k, v := range props(c.codec) { // the codec's two properties
			if tbl.Properties()[k] != v {
				t.Fatalf("%s: property %s = %q, want %q", c.codec, k, tbl.Properties()[k], v)
			}
		}
		again, _, err := lh.LoadOrCreateTable(ctx, ident, testSchema(), testSpec(), props(c.codec))
		if err != nil || again.MetadataLocation() != tbl.MetadataLocation() {
			t.Fatalf("%s: loading again committed (%s -> %s) or failed: %v", c.codec, tbl.MetadataLocation(), again.MetadataLocation(), err)
		}

		// The next write is in the new codec; the older files keep theirs.
		had := lakehousetest.FileCodecs(t, tbl)
		rows := genRows(100*len(had)+100, 30)
		if tbl, err = lh.Commit(ctx, ident, addFiles(writeFiles(t, tbl, rows), nil)); err != nil {
			t.Fatal(err)
		}
		snap = tbl.CurrentSnapshot().SnapshotID
		got := lakehousetest.FileCodecs(t, tbl)
		if got[c.want] <= had[c.want] {
			t.Fatalf("%s: column chunks by codec %v after the write, %v before: none more in %s", c.codec, got, had, c.want)
		}
		for k, n := range had {
			if got[k] < n {
				t.Fatalf("%s: the older files changed codec: %v -> %v", c.codec, had, got)
			}
		}
		first = append(first, rows...)
		assertRows(t, scanRows(t, tbl), first)
	}
	if got := slices.Collect(maps.Keys(lakehousetest.FileCodecs(t, tbl))); len(got) != 4 {
		t.Fatalf("codecs in the table's files: %v, want 4", got)
	}
}

// FuzzParseCodec: any text is refused or read as a codec whose String reads back as
// itself and whose properties name a codec of the list (a zstd level 1 to 22).
func FuzzParseCodec(f *testing.F) {
	for _, s := range []string{"", "zstd", "zstd:3", "zstd:22", "zstd:023", "zstd:+3", "lz4raw", "snappy", "uncompressed", "zstd:", ":3", "snappy:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := catalog.ParseCodec(s)
		if err != nil {
			return
		}
		if back, err := catalog.ParseCodec(c.String()); err != nil || back != c {
			t.Fatalf("ParseCodec(%q) = %v; its String %q reads as %v, %v", s, c, c.String(), back, err)
		}
		p := c.Properties()
		switch name, level := p[catalog.PropCodec], p[catalog.PropCodecLevel]; name {
		case "zstd":
			if c.Level < 1 || c.Level > 22 || level != strconv.Itoa(c.Level) {
				t.Fatalf("ParseCodec(%q) = %v: properties %v", s, c, p)
			}
		case "snappy", "lz4raw", "uncompressed":
			if level != "-1" {
				t.Fatalf("ParseCodec(%q) = %v: properties %v", s, c, p)
			}
		default:
			t.Fatalf("ParseCodec(%q) = %v: codec %q", s, c, name)
		}
	})
}
