package gold

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/silver"
)

// joined is one join loaded into memory: the joined entity's current (not deleted) rows,
// the values of JoinSpec.Columns, by the text of their join key.
type joined struct {
	spec JoinSpec
	rows map[string][][]silver.Value
}

// joinSnapshots returns the current snapshot id of every joined Silver table (0 when a
// table has no snapshot yet). A change in any of them makes the next run a full rebuild.
func joinSnapshots(ctx context.Context, lh *catalog.Lakehouse, m MartSpec) (map[string]int64, error) {
	out := make(map[string]int64, len(m.Joins))
	for _, j := range m.Joins {
		tbl, err := lh.LoadTable(ctx, j.Table)
		if err != nil {
			return nil, fmt.Errorf("joined silver table %s: %w (run silver for %s first)", j.Table, err, j.Entity)
		}
		if err := silver.CheckTypes(tbl.Schema(), j.ColumnTypes); err != nil {
			return nil, fmt.Errorf("joined silver table %s: %w", j.Table, err)
		}
		var id int64
		if s := tbl.CurrentSnapshot(); s != nil {
			id = s.SnapshotID
		}
		out[j.Table] = id
	}
	return out, nil
}

// joinWatermarks are the joined tables' snapshot ids recorded by the Gold commit that
// holds the Silver watermark (nil when none was recorded).
func joinWatermarks(gt *table.Table) map[string]int64 {
	raw := lastSummary(gt)[PropJoinSnapshots]
	if raw == "" {
		return nil
	}
	var ids map[string]string
	if err := json.Unmarshal([]byte(raw), &ids); err != nil {
		return nil
	}
	out := make(map[string]int64, len(ids))
	for t, v := range ids {
		out[t], _ = strconv.ParseInt(v, 10, 64)
	}
	return out
}

// joinSnapshotsJSON renders the snapshot ids for the summary (ids as strings: JSON
// numbers would lose precision above 2^53 in other readers).
func joinSnapshotsJSON(ids map[string]int64) string {
	s := make(map[string]string, len(ids))
	for t, v := range ids {
		s[t] = strconv.FormatInt(v, 10)
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func sameSnapshots(a, b map[string]int64) bool { return maps.Equal(a, b) }

// loadJoin reads the joined table at snapshot into a hash map keyed by the join columns.
// Rows with a NULL key column are left out (NULL never matches), as are deleted rows.
func loadJoin(ctx context.Context, lh *catalog.Lakehouse, j JoinSpec, snapshot int64) (*joined, error) {
	out := &joined{spec: j, rows: map[string][][]silver.Value{}}
	if snapshot == 0 {
		return out, nil
	}
	tbl, err := lh.LoadTable(ctx, j.Table)
	if err != nil {
		return nil, err
	}
	var fields []string
	add := func(n string) {
		for _, f := range fields {
			if f == n {
				return
			}
		}
		fields = append(fields, n)
	}
	for _, on := range j.On {
		add(on.Joined)
	}
	for _, c := range j.Columns {
		add(c)
	}
	if j.HasDeleted {
		add(silver.ColIsDeleted)
	}
	_, recs, err := tbl.Scan(table.WithSnapshotID(snapshot), table.WithSelectedFields(fields...)).ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", j.Table, err)
	}
	var key []byte
	for rec, err := range recs {
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", j.Table, err)
		}
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		keyA := make([]arrow.Array, len(j.On))
		for i, on := range j.On {
			keyA[i] = col(on.Joined)
		}
		valA := make([]arrow.Array, len(j.Columns))
		for i, c := range j.Columns {
			valA[i] = col(c)
		}
		var del *array.Boolean
		if j.HasDeleted {
			del, _ = col(silver.ColIsDeleted).(*array.Boolean)
		}
	rows:
		for r := range int(rec.NumRows()) {
			if del != nil && del.IsValid(r) && del.Value(r) {
				continue
			}
			key = key[:0]
			for i, on := range j.On {
				v := silver.ValueAt(keyA[i], r, j.ColumnTypes[on.Joined])
				if v.Null {
					continue rows
				}
				key = appendJoinKey(key, v, j.ColumnTypes[on.Joined])
			}
			vals := make([]silver.Value, len(j.Columns))
			for i, c := range j.Columns {
				vals[i] = silver.ValueAt(valA[i], r, j.ColumnTypes[c])
			}
			out.rows[string(key)] = append(out.rows[string(key)], vals)
		}
		rec.Release()
	}
	return out, nil
}

// appendJoinKey appends one key column's text and a separator.
func appendJoinKey(b []byte, v silver.Value, t silver.Type) []byte {
	return append(append(b, keyText(v, t)...), 0x1f)
}
