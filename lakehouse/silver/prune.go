package silver

import (
	"cmp"
	"encoding/binary"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// keyPruner tells which data files, and which row groups within them, of a table
// bucketed on its first key column can hold one of a set of keys (the run's), so that
// the lookup of stored versions reads what the delta can touch rather than the whole
// table.
//
// The planned file tasks are filtered here rather than by a row filter on the scan:
// iceberg-go's inclusive metrics evaluator stops using a file's bounds above 200 IN
// values (inPredicateLimit), so a delta of thousands of keys was pruned by bucket only;
// a key of several columns had no filter at all; and the row filter's residual costs a
// filter kernel per batch on the table scan. Here a file is checked with a binary
// search of the delta's keys of its bucket, whatever their number.
//
// It is exact in one direction: a file or row group is skipped only when it provably
// holds none of the keys. Anything it cannot decide is read: a file of a partition spec
// without a bucket on the first key column, a partition value or bound that is missing
// or of an unexpected type, a key column of a kind whose bounds are not compared
// (decimal, bool, float), Parquet statistics that are absent or not trusted. String
// bounds are compared as UTF-8 bytes (Iceberg's and Parquet's order), and an upper bound
// is also taken to cover every string it is a prefix of, in case a writer truncated it
// without incrementing it (iceberg-go increments; the spec allows either to be safe).
// Integer bounds are decoded by their width, so files written before an int→long
// promotion are read right. Delete files are irrelevant: a skipped data file holds no
// row of the keys, deleted or not.
type keyPruner struct {
	cols []pruneCol
	keys [][]Value // one entry per key: its key column values, sorted by the first
	// buckets maps a bucket count to the keys of each bucket (computed with iceberg-go's
	// bucket transform of the first key column's type), built on first use.
	buckets map[int][][]int
	all     []int // every key's index

	// Counts, for the debug log and the tests (row groups are counted concurrently).
	files, filesKept         int
	rowGroups, rowGroupsKept atomic.Int64
	rowsKept                 atomic.Int64 // the rows of the row groups kept
}

// pruneCol is one key column as the pruner sees it.
type pruneCol struct {
	name string
	id   int          // Iceberg field id
	typ  iceberg.Type // Iceberg type (the bucket transform's source type)
	kind Kind
}

// newKeyPruner builds the pruner of a table of schema sch for keys (each one value per
// key column, in key order; not null), or false when a key column is not in the schema
// with the type keyCols declare. The values are only read: the caller keeps them valid
// while the pruner is used.
func newKeyPruner(sch *iceberg.Schema, keyCols []ColumnSpec, keys [][]Value) (*keyPruner, bool) {
	p := &keyPruner{keys: keys, buckets: map[int][][]int{}}
	for _, c := range keyCols {
		f, ok := sch.FindFieldByName(c.Name)
		if !ok || !f.Type.Equals(icebergType(c.Type)) {
			return nil, false // the values would not be the column's: prune nothing
		}
		p.cols = append(p.cols, pruneCol{name: c.Name, id: f.ID, typ: f.Type, kind: c.Type.Kind})
	}
	if len(p.cols) == 0 {
		return nil, false
	}
	k0 := p.cols[0].kind
	slices.SortFunc(p.keys, func(a, b []Value) int { return compareKey(a[0], b[0], k0) })
	return p, true
}

// compareKey orders two non-null values of a key column of kind k (strings bytewise).
func compareKey(a, b Value, k Kind) int {
	if k == String {
		return strings.Compare(a.S, b.S)
	}
	return cmp.Compare(a.I, b.I)
}

// boundsKind tells whether the pruner compares bounds of a column of kind k.
func boundsKind(k Kind) bool {
	switch k {
	case String, Int32, Int64, Date, Timestamp:
		return true
	}
	return false
}

// bucketsOf returns, per bucket among n by the first key column, the indexes of the
// keys in it (ascending), or nil if the column's type has no bucket transform here.
func (p *keyPruner) bucketsOf(n int) [][]int {
	if b, ok := p.buckets[n]; ok {
		return b
	}
	c := p.cols[0]
	tf := iceberg.BucketTransform{NumBuckets: n}.Transformer(c.typ)
	out := make([][]int, n)
	for i, k := range p.keys {
		var v any
		switch c.typ.(type) {
		case iceberg.StringType:
			v = k[0].S
		case iceberg.Int32Type:
			v = int32(k[0].I)
		case iceberg.Int64Type:
			v = k[0].I
		case iceberg.DateType:
			v = iceberg.Date(k[0].I)
		case iceberg.TimestampType, iceberg.TimestampTzType:
			v = iceberg.Timestamp(k[0].I)
		}
		if v == nil {
			out = nil
			break
		}
		b := tf(v)
		if !b.Valid || b.Val < 0 || int(b.Val) >= n {
			out = nil
			break
		}
		out[b.Val] = append(out[b.Val], i)
	}
	p.buckets[n] = out
	return out
}

// fileKeys returns the indexes (into p.keys, ascending) of the keys whose bucket is
// the file's, or all keys when the file's partition does not decide it.
func (p *keyPruner) fileKeys(spec *iceberg.PartitionSpec, df iceberg.DataFile) []int {
	if spec != nil {
		for _, f := range spec.FieldsBySourceID(p.cols[0].id) {
			bt, ok := f.Transform.(iceberg.BucketTransform)
			if !ok {
				continue
			}
			var b int64
			switch v := df.Partition()[f.FieldID].(type) {
			case int32:
				b = int64(v)
			case int64:
				b = v
			case int:
				b = int64(v)
			default:
				continue // null or unexpected: not decided by this field
			}
			groups := p.bucketsOf(bt.NumBuckets)
			if groups == nil {
				continue
			}
			if b < 0 || b >= int64(len(groups)) {
				continue // not a bucket of the transform: undecided
			}
			return groups[b]
		}
	}
	if p.all == nil {
		p.all = make([]int, len(p.keys))
		for i := range p.all {
			p.all[i] = i
		}
	}
	return p.all
}

// bound is a decoded lower or upper bound of a key column.
type bound struct {
	ok bool
	v  Value
}

// anyInBounds reports whether one of the keys idx (ascending, so sorted by the first
// column) lies within lo[c]..hi[c] for every key column c (a bound that is not ok does
// not restrict).
func (p *keyPruner) anyInBounds(idx []int, lo, hi []bound) bool {
	k0 := p.cols[0].kind
	start := 0
	if lo[0].ok {
		start, _ = slices.BinarySearchFunc(idx, lo[0].v, func(i int, t Value) int { return compareKey(p.keys[i][0], t, k0) })
	}
	for _, i := range idx[start:] {
		key := p.keys[i]
		if hi[0].ok && !belowUpper(key[0], hi[0].v, k0) {
			return false // sorted: every later key is above the bound too
		}
		in := true
		for c := 1; c < len(p.cols) && in; c++ {
			k := p.cols[c].kind
			in = (!lo[c].ok || compareKey(key[c], lo[c].v, k) >= 0) && (!hi[c].ok || belowUpper(key[c], hi[c].v, k))
		}
		if in {
			return true
		}
	}
	return false
}

// belowUpper reports whether v may be at most the column's largest value, whose upper
// bound is hi: v <= hi, or, for a string, hi is a prefix of v (a truncated bound that
// was not incremented). The strings for which it holds are a prefix of the sorted
// order, which anyInBounds relies on.
func belowUpper(v, hi Value, k Kind) bool {
	if k == String {
		return v.S <= hi.S || strings.HasPrefix(v.S, hi.S)
	}
	return v.I <= hi.I
}

// decodeBound decodes an Iceberg single-value bound of a key column of kind k.
func decodeBound(b []byte, k Kind) bound {
	if b == nil {
		return bound{}
	}
	switch k {
	case String:
		return bound{ok: true, v: Value{S: string(b)}}
	case Int32, Int64, Date, Timestamp:
		switch len(b) {
		case 4:
			return bound{ok: true, v: Value{I: int64(int32(binary.LittleEndian.Uint32(b)))}}
		case 8:
			return bound{ok: true, v: Value{I: int64(binary.LittleEndian.Uint64(b))}}
		}
	}
	return bound{}
}

// keepFile reports whether data file df of partition spec spec may hold one of the
// keys; when it does, keys are the indexes of the keys it may hold (for keepRowGroup).
func (p *keyPruner) keepFile(spec *iceberg.PartitionSpec, df iceberg.DataFile) (keys []int, keep bool) {
	idx := p.fileKeys(spec, df)
	if len(idx) == 0 {
		return nil, false
	}
	lowers, uppers := df.LowerBoundValues(), df.UpperBoundValues()
	lo, hi := make([]bound, len(p.cols)), make([]bound, len(p.cols))
	for c, col := range p.cols {
		if boundsKind(col.kind) {
			lo[c], hi[c] = decodeBound(lowers[col.id], col.kind), decodeBound(uppers[col.id], col.kind)
		}
	}
	if !p.anyInBounds(idx, lo, hi) {
		return nil, false
	}
	return idx, true
}

// keepRowGroup reports whether a row group may hold one of the keys idx, from the
// Parquet statistics of the key columns (found by their written name, as filescan
// reads them).
func (p *keyPruner) keepRowGroup(rg *metadata.RowGroupMetaData, idx []int) bool {
	lo, hi := make([]bound, len(p.cols)), make([]bound, len(p.cols))
	for c, col := range p.cols {
		if boundsKind(col.kind) {
			lo[c], hi[c] = rowGroupBounds(rg, col)
		}
	}
	return p.anyInBounds(idx, lo, hi)
}

// rowGroupBounds returns the min and max of a key column in a row group, where its
// statistics are present and trusted.
func rowGroupBounds(rg *metadata.RowGroupMetaData, col pruneCol) (lo, hi bound) {
	i := rg.Schema.ColumnIndexByName(col.name)
	if i < 0 {
		return
	}
	cc, err := rg.ColumnChunk(i)
	if err != nil {
		return
	}
	if ok, err := cc.StatsSet(); !ok || err != nil {
		return
	}
	st, err := cc.Statistics()
	if err != nil || st == nil || !st.HasMinMax() {
		return
	}
	switch s := st.(type) {
	case *metadata.ByteArrayStatistics:
		if col.kind == String {
			return bound{ok: true, v: Value{S: string(s.Min())}}, bound{ok: true, v: Value{S: string(s.Max())}}
		}
	case *metadata.Int32Statistics:
		if col.kind != String {
			return bound{ok: true, v: Value{I: int64(s.Min())}}, bound{ok: true, v: Value{I: int64(s.Max())}}
		}
	case *metadata.Int64Statistics:
		if col.kind != String {
			return bound{ok: true, v: Value{I: s.Min()}}, bound{ok: true, v: Value{I: s.Max()}}
		}
	}
	return bound{}, bound{}
}

// prunedTask is a planned file task the pruner kept, with the keys it may hold.
type prunedTask struct {
	task table.FileScanTask
	keys []int
}

// prune keeps the tasks whose data files may hold one of the keys.
func (p *keyPruner) prune(md table.Metadata, tasks []table.FileScanTask) []prunedTask {
	out := make([]prunedTask, 0, len(tasks))
	for _, t := range tasks {
		p.files++
		if keys, ok := p.keepFile(md.PartitionSpecByID(int(t.File.SpecID())), t.File); ok {
			p.filesKept++
			out = append(out, prunedTask{task: t, keys: keys})
		}
	}
	return out
}

// rowGroupFilter returns the row-group test of one kept task (filescan's KeepRowGroup).
func (p *keyPruner) rowGroupFilter(t prunedTask) func(*metadata.RowGroupMetaData) bool {
	return func(rg *metadata.RowGroupMetaData) bool {
		p.rowGroups.Add(1)
		if p.keepRowGroup(rg, t.keys) {
			p.rowGroupsKept.Add(1)
			p.rowsKept.Add(rg.NumRows())
			return true
		}
		return false
	}
}
