package silver

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
)

// pruneSchema is a table keyed by (k string, n long), bucketed on k like a Silver table.
func pruneSchema(t *testing.T, buckets int) (*iceberg.Schema, iceberg.PartitionSpec, []ColumnSpec) {
	t.Helper()
	cols := []ColumnSpec{{Name: "k", Type: Type{Kind: String}}, {Name: "n", Type: Type{Kind: Int64}}, {Name: "v", Type: Type{Kind: String}}}
	sch, err := icebergSchema(cols, []string{"k", "n"})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := bucketSpec(sch, []string{"k", "n"}, buckets)
	if err != nil {
		t.Fatal(err)
	}
	return sch, spec, cols[:2]
}

// testFile is a data file of the prune tests: its rows' keys, its bucket and bounds.
type testFile struct {
	rows   [][]Value
	bucket any // the partition value (nil: none recorded)
	lower  map[int][]byte
	upper  map[int][]byte
}

func (f testFile) dataFile(t *testing.T, spec iceberg.PartitionSpec, i int) iceberg.DataFile {
	t.Helper()
	part := map[int]any{}
	if f.bucket != nil {
		part[1000] = f.bucket
	}
	b, err := iceberg.NewDataFileBuilder(spec, iceberg.EntryContentData, fmt.Sprintf("f%d.parquet", i), iceberg.ParquetFile,
		part, nil, nil, int64(len(f.rows)), 1)
	if err != nil {
		t.Fatal(err)
	}
	return b.LowerBoundValues(f.lower).UpperBoundValues(f.upper).Build()
}

func long(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }

// bucketOf is Iceberg's bucket of a string, as iceberg-go's transform computes it.
func bucketOf(s string, n int) int32 {
	return iceberg.BucketTransform{NumBuckets: n}.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: iceberg.StringLiteral(s)}).Val.(iceberg.Int32Literal).Value()
}

// writerFile builds the file a writer would record for rows (all in one bucket): the
// exact min and max of each key column, the string bounds truncated to trunc bytes
// (0: not), the upper one incremented (as iceberg-go does) or not (inc false).
func writerFile(rows [][]Value, buckets, trunc int, inc bool) testFile {
	f := testFile{rows: rows, bucket: bucketOf(rows[0][0].S, buckets), lower: map[int][]byte{}, upper: map[int][]byte{}}
	ks := make([]string, len(rows))
	ns := make([]int64, len(rows))
	for i, r := range rows {
		ks[i], ns[i] = r[0].S, r[1].I
	}
	lo, hi := slices.Min(ks), slices.Max(ks)
	if trunc > 0 && len(lo) > trunc {
		lo = lo[:trunc]
	}
	if trunc > 0 && len(hi) > trunc {
		hi = hi[:trunc]
		if inc {
			b := []byte(hi)
			b[len(b)-1]++ // test strings are ASCII below 0x7f
			hi = string(b)
		}
	}
	f.lower[1], f.upper[1] = []byte(lo), []byte(hi)
	f.lower[2], f.upper[2] = long(slices.Min(ns)), long(slices.Max(ns))
	return f
}

func holds(rows [][]Value, key []Value) bool {
	return slices.ContainsFunc(rows, func(r []Value) bool { return r[0].S == key[0].S && r[1].I == key[1].I })
}

// TestKeyPrunerFiles: exact outcomes for one delta over files that differ in one way each.
func TestKeyPrunerFiles(t *testing.T) {
	const buckets = 4
	sch, spec, keyCols := pruneSchema(t, buckets)
	key := func(k string, n int64) []Value { return []Value{{S: k}, {I: n}} }
	delta := [][]Value{key("o-0500", 7), key("o-0900", 1)}
	b500, b900 := bucketOf("o-0500", buckets), bucketOf("o-0900", buckets)
	other := (max(b500, b900) + 1) % buckets
	for other == b500 || other == b900 {
		other = (other + 1) % buckets
	}
	for _, tc := range []struct {
		name string
		f    testFile
		keep bool
	}{
		{"holds a key", testFile{bucket: b500, lower: map[int][]byte{1: []byte("o-0400"), 2: long(0)}, upper: map[int][]byte{1: []byte("o-0600"), 2: long(9)}}, true},
		{"another bucket", testFile{bucket: other, lower: map[int][]byte{1: []byte("o-0000")}, upper: map[int][]byte{1: []byte("o-9999")}}, false},
		{"key range below", testFile{bucket: b500, lower: map[int][]byte{1: []byte("o-0100")}, upper: map[int][]byte{1: []byte("o-0499")}}, false},
		{"key range above", testFile{bucket: b500, lower: map[int][]byte{1: []byte("o-0501")}, upper: map[int][]byte{1: []byte("o-0899")}}, false},
		{"second column excludes", testFile{bucket: b500, lower: map[int][]byte{1: []byte("o-0400"), 2: long(8)}, upper: map[int][]byte{1: []byte("o-0600"), 2: long(9)}}, false},
		{"int bound of 4 bytes (written as int)", testFile{bucket: b500, lower: map[int][]byte{1: []byte("o-0400"), 2: {7, 0, 0, 0}}, upper: map[int][]byte{1: []byte("o-0600"), 2: {7, 0, 0, 0}}}, true},
		{"upper bound truncated, not incremented", testFile{bucket: b500, lower: map[int][]byte{1: []byte("o-04")}, upper: map[int][]byte{1: []byte("o-05")}}, true},
		{"upper bound a prefix, not of the key", testFile{bucket: b500, lower: map[int][]byte{1: []byte("o-04")}, upper: map[int][]byte{1: []byte("o-04")}}, false},
		{"no bounds", testFile{bucket: b500}, true},
		{"no partition value", testFile{lower: map[int][]byte{1: []byte("o-0500")}, upper: map[int][]byte{1: []byte("o-0500")}}, true},
		{"partition value of another type", testFile{bucket: "x", lower: map[int][]byte{1: []byte("o-0500")}, upper: map[int][]byte{1: []byte("o-0500")}}, true},
		{"bound of an unexpected width", testFile{bucket: b500, lower: map[int][]byte{1: []byte("o-0400"), 2: {8, 0}}, upper: map[int][]byte{1: []byte("o-0600"), 2: {9, 0}}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := newKeyPruner(sch, keyCols, slices.Clone(delta))
			if !ok {
				t.Fatal("no pruner")
			}
			_, keep := p.keepFile(&spec, tc.f.dataFile(t, spec, 0))
			if keep != tc.keep {
				t.Fatalf("keep = %v, want %v", keep, tc.keep)
			}
		})
	}
}

// TestKeyPrunerNeverSkipsAKey is the property: over random tables of files (one bucket
// each, bounds as writers record them, truncated or not) and random deltas, every file
// holding a delta key is kept, and files are skipped.
func TestKeyPrunerNeverSkipsAKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	skipped, total := 0, 0
	for trial := range 300 {
		buckets := 1 + rng.IntN(8)
		sch, spec, keyCols := pruneSchema(t, buckets)
		keySpace := 20 + rng.IntN(2000)
		mk := func() []Value {
			// Keys of varied length, so truncation cuts some of them.
			id := rng.IntN(keySpace)
			return []Value{{S: "o-" + strconv.Itoa(id) + string(rune('a'+id%7))}, {I: int64(rng.IntN(5) - 2)}}
		}
		// Files: rows grouped by bucket, each bucket's rows in a few runs of
		// consecutive-ish keys (as sorted writes give) or scattered.
		byBucket := map[int32][][]Value{}
		for range 50 + rng.IntN(500) {
			k := mk()
			b := bucketOf(k[0].S, buckets)
			byBucket[b] = append(byBucket[b], k)
		}
		var files []testFile
		for _, rows := range byBucket {
			if rng.IntN(2) == 0 {
				slices.SortFunc(rows, func(a, b []Value) int { return compareKey(a[0], b[0], String) })
			}
			for len(rows) > 0 {
				n := min(len(rows), 1+rng.IntN(40))
				trunc := []int{0, 3, 4, 6}[rng.IntN(4)]
				files = append(files, writerFile(rows[:n], buckets, trunc, rng.IntN(2) == 0))
				rows = rows[n:]
			}
		}
		delta := make([][]Value, 1+rng.IntN(30))
		for i := range delta {
			if i%2 == 0 && len(files) > 0 { // half of them stored keys
				f := files[rng.IntN(len(files))]
				delta[i] = f.rows[rng.IntN(len(f.rows))]
			} else {
				delta[i] = mk()
			}
		}
		p, ok := newKeyPruner(sch, keyCols, slices.Clone(delta))
		if !ok {
			t.Fatal("no pruner")
		}
		for i, f := range files {
			total++
			idx, keep := p.keepFile(&spec, f.dataFile(t, spec, i))
			if !keep {
				skipped++
			}
			for _, k := range delta {
				if !holds(f.rows, k) {
					continue
				}
				if !keep {
					t.Fatalf("trial %d: file %d (bounds %q..%q) holds delta key %v but was skipped", trial, i, f.lower[1], f.upper[1], k)
				}
				if !slices.ContainsFunc(idx, func(j int) bool { return p.keys[j][0] == k[0] && p.keys[j][1] == k[1] }) {
					t.Fatalf("trial %d: file %d holds delta key %v, not among the keys it was kept for", trial, i, k)
				}
			}
		}
	}
	if skipped < total/4 { // 1526 of 5025 at this seed
		t.Fatalf("%d of %d files skipped: the pruning proves little", skipped, total)
	}
}

// TestKeyPrunerRowGroups: over real Parquet files of random keys in small row groups,
// every row group holding a delta key is kept, and sorted files have row groups skipped.
func TestKeyPrunerRowGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 2))
	sch, _, keyCols := pruneSchema(t, 1)
	asch := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.BinaryTypes.String}, {Name: "n", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.BinaryTypes.String}}, nil)
	skipped, total := 0, 0
	for trial := range 40 {
		rows := make([][]Value, 200+rng.IntN(800))
		for i := range rows {
			id := rng.IntN(5000)
			rows[i] = []Value{{S: "o-" + strconv.Itoa(id)}, {I: int64(rng.IntN(4))}}
		}
		if trial%4 != 0 {
			slices.SortFunc(rows, func(a, b []Value) int { return compareKey(a[0], b[0], String) })
		}
		bld := array.NewRecordBuilder(memory.DefaultAllocator, asch)
		for _, r := range rows {
			bld.Field(0).(*array.StringBuilder).Append(r[0].S)
			bld.Field(1).(*array.Int64Builder).Append(r[1].I)
			bld.Field(2).(*array.StringBuilder).Append("x")
		}
		rec := bld.NewRecordBatch()
		bld.Release()
		var buf bytes.Buffer
		rgRows := int64(10 + rng.IntN(60))
		props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(rgRows))
		if err := pqarrow.WriteTable(array.NewTableFromRecords(asch, []arrow.RecordBatch{rec}), &buf, rgRows, props, pqarrow.DefaultWriterProps()); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		pr, err := file.NewParquetReader(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		delta := make([][]Value, 1+rng.IntN(20))
		for i := range delta {
			if i%2 == 0 {
				delta[i] = rows[rng.IntN(len(rows))]
			} else {
				delta[i] = []Value{{S: "o-" + strconv.Itoa(rng.IntN(6000))}, {I: int64(rng.IntN(4))}}
			}
		}
		p, _ := newKeyPruner(sch, keyCols, slices.Clone(delta))
		all := make([]int, len(p.keys))
		for i := range all {
			all[i] = i
		}
		start := 0
		for g := range pr.NumRowGroups() {
			md := pr.MetaData().RowGroup(g)
			n := int(md.NumRows())
			group := rows[start : start+n]
			start += n
			keep := p.keepRowGroup(md, all)
			total++
			if !keep {
				skipped++
			}
			for _, k := range delta {
				if holds(group, k) && !keep {
					t.Fatalf("trial %d: row group %d holds delta key %v but was skipped", trial, g, k)
				}
			}
		}
		pr.Close()
	}
	if skipped < total/2 {
		t.Fatalf("%d of %d row groups skipped: the pruning proves little", skipped, total)
	}
}

// The bucket the pruner computes is the one Silver's writers partition by.
func TestKeyPrunerBucketsMatchShards(t *testing.T) {
	for _, tc := range []struct {
		kind Kind
		typ  iceberg.Type
		vals []Value
	}{
		{String, iceberg.PrimitiveTypes.String, []Value{{S: "o-000000001"}, {S: ""}, {S: "zürich"}}},
		{Int32, iceberg.PrimitiveTypes.Int32, []Value{{I: 0}, {I: -1}, {I: 1 << 30}}},
		{Int64, iceberg.PrimitiveTypes.Int64, []Value{{I: 0}, {I: -1}, {I: 1 << 40}}},
		{Date, iceberg.PrimitiveTypes.Date, []Value{{I: 20000}, {I: -3}}},
		{Timestamp, iceberg.PrimitiveTypes.TimestampTz, []Value{{I: 1_780_000_000_000_000}, {I: -1}}},
	} {
		sch := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "k", Type: tc.typ, Required: true})
		keys := make([][]Value, len(tc.vals))
		for i, v := range tc.vals {
			keys[i] = []Value{v}
		}
		p, ok := newKeyPruner(sch, []ColumnSpec{{Name: "k", Type: Type{Kind: tc.kind}}}, keys)
		if !ok {
			t.Fatal("no pruner")
		}
		groups := p.bucketsOf(16)
		for b, idx := range groups {
			for _, i := range idx {
				text := string(appendKeyText(nil, p.keys[i][0], Type{Kind: tc.kind}))
				want, ok := icebergBucket(text, tc.kind, 16)
				if !ok || want != b {
					t.Errorf("%v %q: pruner bucket %d, Silver's shard bucket %d (%v)", tc.kind, text, b, want, ok)
				}
			}
		}
	}
}

// A key column the table holds with another type (or not at all) is not pruned by.
func TestKeyPrunerRefusesOtherTypes(t *testing.T) {
	sch := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "k", Type: iceberg.PrimitiveTypes.Int32, Required: true})
	for _, tc := range []struct {
		col  ColumnSpec
		want bool
	}{
		{ColumnSpec{Name: "k", Type: Type{Kind: Int32}}, true},
		{ColumnSpec{Name: "k", Type: Type{Kind: Int64}}, false},
		{ColumnSpec{Name: "k", Type: Type{Kind: String}}, false},
		{ColumnSpec{Name: "other", Type: Type{Kind: Int32}}, false},
	} {
		if _, ok := newKeyPruner(sch, []ColumnSpec{tc.col}, [][]Value{{{I: 1}}}); ok != tc.want {
			t.Errorf("%s %v: pruner %v, want %v", tc.col.Name, tc.col.Type.Kind, ok, tc.want)
		}
	}
}
