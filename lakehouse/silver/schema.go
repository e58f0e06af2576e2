package silver

import (
	"context"
	"fmt"
	"slices"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
)

// Schema evolution. The entity spec is the source of truth for the Silver table's
// columns; at the start of every run the table is brought to it, in a schema-only
// commit before any data is written:
//
//   - a declared column the table lacks is added, optional, in declaration order (old
//     rows read NULL);
//   - a declared type that widens the table's is applied: int32 → int64, and
//     decimal(p,s) → decimal(p',s) with p' > p (Iceberg's type promotions; float32 does
//     not exist here);
//   - any other type change — a narrowing (int64 → int32, a smaller precision), a scale
//     change, or a different kind — is refused with an error naming the column: the
//     table keeps its data, and a new table (or a replay into one) is the way out;
//   - a new key column is refused (the key is the table's identity);
//   - a column the spec no longer declares stays in the table (new rows read NULL) and
//     is listed as a note in the quality report.

// schemaChange is one change evolveSchema applies.
type schemaChange struct {
	col   ColumnSpec
	after string // add: the column it follows ("" = first)
	add   bool   // add, else widen
}

// planSchema compares the table schema with the declared columns.
func planSchema(cur *iceberg.Schema, cols []ColumnSpec, key []string) ([]schemaChange, error) {
	var out []schemaChange
	for i, c := range cols {
		want := icebergType(c.Type)
		f, ok := cur.FindFieldByName(c.Name)
		if !ok {
			if slices.Contains(key, c.Name) {
				return nil, fmt.Errorf("column %s: key column missing from the table; changing the key needs a new table", c.Name)
			}
			ch := schemaChange{col: c, add: true}
			if i > 0 {
				ch.after = cols[i-1].Name
			}
			out = append(out, ch)
			continue
		}
		if f.Type.Equals(want) {
			continue
		}
		if !widens(f.Type, want) {
			return nil, fmt.Errorf("column %s: cannot change type %s to %s: only widening is applied (int32 to int64, "+
				"decimal to a larger precision with the same scale); write to a new table to narrow or change a type", c.Name, f.Type, c.Type)
		}
		out = append(out, schemaChange{col: c})
	}
	return out, nil
}

// widens reports whether Iceberg promotes from to to without rewriting data.
func widens(from, to iceberg.Type) bool {
	switch f := from.(type) {
	case iceberg.Int32Type:
		_, ok := to.(iceberg.Int64Type)
		return ok
	case iceberg.DecimalType:
		t, ok := to.(iceberg.DecimalType)
		return ok && t.Scale() == f.Scale() && t.Precision() > f.Precision()
	}
	return false
}

// evolveSchema applies planSchema's changes to the table in one schema-only commit (no
// snapshot, so watermarks are untouched) and returns the table, reloaded.
func evolveSchema(ctx context.Context, lh *catalog.Lakehouse, ident string, tbl *table.Table, cols []ColumnSpec, key []string) (*table.Table, error) {
	changes, err := planSchema(tbl.Schema(), cols, key)
	if err != nil || len(changes) == 0 {
		return tbl, err
	}
	return lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		changes, err := planSchema(tbl.Schema(), cols, key)
		if err != nil {
			return nil, err
		}
		if len(changes) == 0 {
			return nil, nil
		}
		tx := tbl.NewTransaction()
		us := tx.UpdateSchema(true, false)
		for _, ch := range changes {
			path := []string{ch.col.Name}
			t := icebergType(ch.col.Type)
			if !ch.add {
				us.UpdateColumn(path, table.ColumnUpdate{FieldType: iceberg.Optional[iceberg.Type]{Val: t, Valid: true}})
				continue
			}
			us.AddColumn(path, t, "", false, nil)
			if ch.after == "" {
				us.MoveFirst(path)
			} else {
				us.MoveAfter(path, []string{ch.after})
			}
		}
		if err := us.Commit(); err != nil {
			return nil, fmt.Errorf("evolve schema: %w", err)
		}
		return tx.Commit(ctx)
	})
}

// schemaIssues is the schema level of the quality report: declared columns missing from
// the table or typed differently (issues), and table columns no longer declared (notes).
func schemaIssues(sch *iceberg.Schema, cols []ColumnSpec) (issues, notes []string) {
	for _, c := range cols {
		f, ok := sch.FindFieldByName(c.Name)
		switch {
		case !ok:
			issues = append(issues, fmt.Sprintf("column %s is declared but not in the table", c.Name))
		case !f.Type.Equals(icebergType(c.Type)):
			issues = append(issues, fmt.Sprintf("column %s is %s in the table, declared %s", c.Name, f.Type, c.Type))
		}
	}
	for _, f := range sch.Fields() {
		if !slices.ContainsFunc(cols, func(c ColumnSpec) bool { return c.Name == f.Name }) {
			notes = append(notes, fmt.Sprintf("column %s is in the table but no longer declared (new rows read NULL)", f.Name))
		}
	}
	return issues, notes
}
