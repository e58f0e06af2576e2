package silver

// Lookups from the lake: another entity's current Silver rows as an enrichment lookup,
// read at the snapshot the run sees, and the versions of every lookup an entity's rows
// were enriched with, recorded in each Silver commit.
//
// The promise: every row of a Silver table is enriched with the lookup versions recorded
// by the table's newest Silver commit. A run whose lookup changed since then checks the
// stored rows against the new version; when some would be enriched differently it
// rebuilds the table from Bronze (LookupReplay) or commits nothing (LookupFail), so a
// table never mixes two versions of a lookup.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
)

// PropLookupPrefix starts the snapshot-summary property recording the version of the
// lookup of one rule: goldbridge.lookup.<rule id> = "file <path> sha256:<hex>" or
// "entity <name> <table>@<snapshot id>".
const PropLookupPrefix = "goldbridge.lookup."

// ErrLookupChanged means a lookup changed since Silver's last commit and stored rows
// hold the old enrichment, with LookupFail: nothing was committed; `goldbridge replay`
// re-enriches them.
var ErrLookupChanged = errors.New("lookup changed")

// maxLakeLookupBytes bounds the text a lake lookup holds (keys and values), as
// maxLookupFileBytes bounds a CSV file.
const maxLakeLookupBytes = maxLookupFileBytes

// lakeLoader loads entity lookups from the lake with LoadLakeLookup.
func lakeLoader(ctx context.Context, lh *catalog.Lakehouse) LookupLoader {
	return func(spec LookupSpec) (LookupTable, string, error) { return LoadLakeLookup(ctx, lh, spec) }
}

// LoadLakeLookup reads the current rows of spec.Table (another entity's Silver table,
// soft-deleted rows left out) as a lookup keyed by its `on` columns, at the table's
// current snapshot, which the version names. A key that appears twice with different
// values is an error, as in a CSV lookup; a table not created yet is an empty lookup.
func LoadLakeLookup(ctx context.Context, lh *catalog.Lakehouse, spec LookupSpec) (LookupTable, string, error) {
	if spec.Table == "" {
		return nil, "", fmt.Errorf("lookup against entity %s: no table", spec.Entity)
	}
	fail := func(err error) (LookupTable, string, error) {
		return nil, "", fmt.Errorf("lookup %s (%s): %w", spec.Entity, spec.Table, err)
	}
	tbl, err := lh.LoadTable(ctx, spec.Table)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return LookupTable{}, lookupVersionOf(spec, 0), nil // run its entity first to fill it
	}
	if err != nil {
		return fail(err)
	}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return LookupTable{}, lookupVersionOf(spec, 0), nil
	}
	_, remote := lookupKeyColumns(spec)
	fields := slices.Concat(remote, spec.Columns)
	types := make([]Type, len(fields))
	for i, f := range fields {
		fld, ok := tbl.Schema().FindFieldByName(f)
		if !ok {
			return fail(fmt.Errorf("no column %q", f))
		}
		if types[i], ok = kindOfIceberg(fld.Type); !ok {
			return fail(fmt.Errorf("column %q is %s, not a type a lookup reads", f, fld.Type))
		}
	}
	deleted := hasColumn(tbl, ColIsDeleted)
	selected := slices.Clone(fields)
	if deleted {
		selected = append(selected, ColIsDeleted)
	}
	scan := tbl.Scan(table.WithSelectedFields(selected...), table.WithSnapshotID(snap.SnapshotID))
	_, recs, err := scan.ToArrowRecords(ctx)
	if err != nil {
		return fail(err)
	}
	t := LookupTable{}
	var size int
	var key []byte
	for rec, err := range recs {
		if err != nil {
			return fail(err)
		}
		cols := make([]arrow.Array, len(fields))
		for i, f := range fields {
			cols[i] = rec.Column(rec.Schema().FieldIndices(f)[0])
		}
		var del arrow.Array
		if deleted {
			del = rec.Column(rec.Schema().FieldIndices(ColIsDeleted)[0])
		}
		for r := range int(rec.NumRows()) {
			if del != nil && ValueAt(del, r, Type{Kind: Bool}).B {
				continue
			}
			key = key[:0]
			null := false
			for i := range remote {
				v := ValueAt(cols[i], r, types[i])
				if v.Null {
					null = true // NULL = x is never true: no row can match it
					break
				}
				if i > 0 {
					key = append(key, lookupKeySep)
				}
				key = appendLookupKey(key, types[i], v)
			}
			if null {
				continue
			}
			vals := make([]string, len(spec.Columns))
			for j := range spec.Columns {
				i := len(remote) + j
				if v := ValueAt(cols[i], r, types[i]); !v.Null {
					vals[j] = string(appendLookupKey(nil, types[i], v))
				}
				size += len(vals[j])
			}
			if prev, dup := t[string(key)]; dup {
				if !slices.Equal(prev, vals) {
					rec.Release()
					return fail(fmt.Errorf("key %s appears twice with different values", lookupKeyString(string(key))))
				}
				continue
			}
			if size += len(key); size > maxLakeLookupBytes {
				rec.Release()
				return fail(fmt.Errorf("larger than %d MiB of keys and values", maxLakeLookupBytes>>20))
			}
			t[string(key)] = vals
		}
		rec.Release()
	}
	return t, lookupVersionOf(spec, snap.SnapshotID), nil
}

// lookupVersionOf names an entity lookup's version: its table at a snapshot.
func lookupVersionOf(spec LookupSpec, snapshot int64) string {
	return "entity " + spec.Entity + " " + spec.Table + "@" + strconv.FormatInt(snapshot, 10)
}

// kindOfIceberg is the Type of a Silver column of Iceberg type t, as icebergType writes it.
func kindOfIceberg(t iceberg.Type) (Type, bool) {
	switch t := t.(type) {
	case iceberg.StringType:
		return Type{Kind: String}, true
	case iceberg.Int32Type:
		return Type{Kind: Int32}, true
	case iceberg.Int64Type:
		return Type{Kind: Int64}, true
	case iceberg.Float64Type:
		return Type{Kind: Float64}, true
	case iceberg.DecimalType:
		return Type{Kind: Decimal, Precision: t.Precision(), Scale: t.Scale()}, true
	case iceberg.BooleanType:
		return Type{Kind: Bool}, true
	case iceberg.DateType:
		return Type{Kind: Date}, true
	case iceberg.TimestampTzType, iceberg.TimestampType:
		return Type{Kind: Timestamp}, true
	}
	return Type{}, false
}

// lookupVersions are the versions of the lookups the engine's rules loaded, by rule id.
func (e *engine) lookupVersions() map[string]string {
	out := map[string]string{}
	for _, r := range e.rules.rules {
		if r.kind == ruleLookup {
			out[r.id] = r.version
		}
	}
	return out
}

// recordedLookups returns the lookup versions recorded by the newest Silver commit of
// tbl (the one that records a Bronze watermark: maintenance commits record none).
func recordedLookups(tbl *table.Table) map[string]string {
	s := catalog.NewestWith(tbl, PropBronzeSnapshot)
	if s == nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range s.Summary.Properties {
		if id, ok := strings.CutPrefix(k, PropLookupPrefix); ok {
			out[id] = v
		}
	}
	return out
}

// lookupProps are the snapshot-summary properties recording the engine's lookups.
func (e *engine) lookupProps(props iceberg.Properties) {
	for id, v := range e.lookupVersions() {
		props[PropLookupPrefix+id] = v
	}
}

// staleLookup is a lookup whose version changed since Silver's last commit.
type staleLookup struct {
	rule     *compiledRule
	recorded string // "" when none was recorded
	affected int64  // stored rows the new version enriches differently (-1: not known)
}

// staleLookups returns the lookups that changed since tbl's newest Silver commit and
// would enrich some stored row differently. A table with no rows has none.
func (e *engine) staleLookups(ctx context.Context, tbl *table.Table) ([]staleLookup, error) {
	if tbl.CurrentSnapshot() == nil {
		return nil, nil
	}
	recorded := recordedLookups(tbl)
	var out []staleLookup
	for i := range e.rules.rules {
		r := &e.rules.rules[i]
		if r.kind != ruleLookup || recorded[r.id] == r.version && r.version != "" {
			continue
		}
		n, err := e.lookupAffects(ctx, tbl, i)
		if err != nil {
			return nil, fmt.Errorf("check lookup %s against the stored rows: %w", r.id, err)
		}
		if n != 0 {
			out = append(out, staleLookup{rule: r, recorded: recorded[r.id], affected: n})
		}
	}
	return out, nil
}

// lookupAffects counts the stored rows whose columns from lookup rule k differ from what
// the loaded version gives them. When a later rule reads or writes those columns, or
// writes the rule's key columns, a stored row no longer shows what the lookup gave it
// (and a filter may have quarantined rows by it): then -1, unless the table is empty.
func (e *engine) lookupAffects(ctx context.Context, tbl *table.Table, k int) (int64, error) {
	r := &e.rules.rules[k]
	cols := e.rules.cols
	watch := map[int]bool{}
	for _, o := range r.outs {
		watch[o] = true
	}
	verifiable := true
	for _, later := range e.rules.rules[k+1:] {
		if later.col >= 0 && (watch[later.col] || slices.Contains(r.keys, later.col)) ||
			slices.ContainsFunc(later.refs, func(c int) bool { return watch[c] }) ||
			slices.ContainsFunc(later.outs, func(c int) bool { return watch[c] || slices.Contains(r.keys, c) }) {
			verifiable = false
		}
	}
	fields := make([]string, 0, len(r.keys)+len(r.outs))
	for _, c := range slices.Concat(r.keys, r.outs) {
		if !hasColumn(tbl, cols[c].Name) {
			verifiable = false // added since: the stored rows hold no enrichment yet
			break
		}
		fields = append(fields, cols[c].Name)
	}
	if !verifiable {
		fields = []string{ColRunID}
	}
	_, recs, err := tbl.Scan(table.WithSelectedFields(fields...)).ToArrowRecords(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	var key []byte
	for rec, err := range recs {
		if err != nil {
			return 0, err
		}
		if !verifiable {
			n = min(n, -1) // rows exist: their enrichment cannot be checked
			rec.Release()
			continue
		}
		col := func(c int) arrow.Array { return rec.Column(rec.Schema().FieldIndices(cols[c].Name)[0]) } // the scan's order is the table's
		keyCols, outCols := make([]arrow.Array, len(r.keys)), make([]arrow.Array, len(r.outs))
		for j, c := range r.keys {
			keyCols[j] = col(c)
		}
		for j, c := range r.outs {
			outCols[j] = col(c)
		}
		for row := range int(rec.NumRows()) {
			key = key[:0]
			var vals []string
			found := true
			for j := range r.keys {
				v := ValueAt(keyCols[j], row, r.keyTypes[j])
				if v.Null {
					found = false
					break
				}
				if j > 0 {
					key = append(key, lookupKeySep)
				}
				key = appendLookupKey(key, r.keyTypes[j], v)
			}
			if found {
				vals, found = r.table[string(key)]
			}
			for j := range r.outs {
				v := ValueAt(outCols[j], row, Type{Kind: String})
				if v.Null == found || found && v.S != vals[j] {
					n++
					break
				}
			}
		}
		rec.Release()
	}
	return n, nil
}

// describeStale names the stale lookups for a log line or an error.
func describeStale(stale []staleLookup) string {
	parts := make([]string, 0, len(stale))
	for _, s := range stale {
		rows := strconv.FormatInt(s.affected, 10) + " stored rows enriched differently"
		if s.affected < 0 {
			rows = "stored rows whose enrichment later rules use or change"
		}
		from := s.recorded
		if from == "" {
			from = "none recorded"
		}
		parts = append(parts, fmt.Sprintf("rule %s: %s (was %s), %s", s.rule.id, s.rule.version, from, rows))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// restale handles a run whose lookups changed with stored rows enriched by the old
// versions: it replays the entity when every stale lookup allows it, and otherwise
// fails with ErrLookupChanged, committing nothing.
func (e *engine) restale(ctx context.Context, lh *catalog.Lakehouse, spec EntitySpec, bronzeIdent string, opt Options, stale []staleLookup) (Result, error) {
	what := describeStale(stale)
	if slices.ContainsFunc(stale, func(s staleLookup) bool { return s.rule.onChange == LookupFail }) {
		return Result{Entity: spec.Name}, fmt.Errorf("silver %s: %w: %s; nothing committed: run `goldbridge replay %s` to enrich every row with the current version",
			spec.Name, ErrLookupChanged, what, spec.Name)
	}
	opt.Log.Info("lookup changed: silver is rebuilt from bronze with the current version", "entity", spec.Name, "lookups", what)
	return runWrite(ctx, lh, spec, bronzeIdent, opt, true)
}
