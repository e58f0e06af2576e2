package silver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
)

// Schema evolution. The entity spec is the source of truth for the Silver table's
// columns; at the start of every run the table is brought to it, in a schema-only
// commit before any data is written:
//
//   - a declared column the table lacks is added, optional, in declaration order (old
//     rows read NULL), unless the table has the column's RenamedFrom: then that column
//     is renamed (by field id, so old rows keep their values under the new name);
//   - a declared type that widens the table's is applied: int32 → int64, and
//     decimal(p,s) → decimal(p',s) with p' > p (Iceberg's type promotions; float32 does
//     not exist here);
//   - any other type change — a narrowing (int64 → int32, a smaller precision), a scale
//     change, or a different kind (int → decimal) — cannot be applied in place: a run
//     refuses it with an error naming the column and `goldbridge replay ENTITY`, and a
//     replay applies it in the commit that replaces the table's files (retype: the old
//     column is dropped and a new one of the same name added, with a new field id, so
//     no old data file is read as the new type; readers see the old snapshot with the
//     old type or the new one with the new type, and time travel keeps the old);
//     a key, partition or sort_by column keeps its type (it is in the table's layout);
//   - a new key column is refused (the key is the table's identity);
//   - a column the spec no longer declares stays in the table (new rows read NULL) and
//     is listed as a note in the quality report.

// schemaChange is one change evolveSchema applies.
type schemaChange struct {
	col    ColumnSpec
	after  string // add, retype: the column it follows ("" = first)
	add    bool   // add, else widen (or retype, or rename)
	rename string // rename: the column's name in the table (col.RenamedFrom)
	retype bool   // a type Iceberg cannot promote: drop and add again (replay only)
	from   iceberg.Type
}

// planSchema compares the table schema with the declared columns. layout are the
// columns the table's partitioning or sort order use: their type cannot change.
func planSchema(cur *iceberg.Schema, cols []ColumnSpec, key, layout []string) ([]schemaChange, error) {
	var out []schemaChange
	for i, c := range cols {
		want := icebergType(c.Type)
		f, ok := cur.FindFieldByName(c.Name)
		if !ok && c.RenamedFrom != "" {
			if _, found := cur.FindFieldByName(c.RenamedFrom); found && !declared(cols, c.RenamedFrom) {
				if slices.Contains(key, c.Name) || slices.Contains(key, c.RenamedFrom) {
					return nil, fmt.Errorf("column %s: a key column cannot be renamed (the key is the table's identity)", c.Name)
				}
				// Alone: within one update the new name does not resolve yet. Its type is
				// planned on the renamed table (evolveSchema plans again after a commit).
				out = append(out, schemaChange{col: c, rename: c.RenamedFrom})
				continue
			}
		}
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
			if slices.Contains(key, c.Name) || slices.Contains(layout, c.Name) {
				return nil, fmt.Errorf("column %s: cannot change type %s to %s: it is a key, partition or sort_by column, "+
					"part of the table's layout; write to a new table", c.Name, f.Type, c.Type)
			}
			ch := schemaChange{col: c, retype: true, from: f.Type}
			if i > 0 {
				ch.after = cols[i-1].Name
			}
			out = append(out, ch)
			continue
		}
		out = append(out, schemaChange{col: c})
	}
	return out, nil
}

// declared tells whether cols declares a column name.
func declared(cols []ColumnSpec, name string) bool {
	return slices.ContainsFunc(cols, func(c ColumnSpec) bool { return c.Name == name })
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

// retypeError is the refusal of a type change outside a replay.
func retypeError(entity string, ch schemaChange) error {
	return fmt.Errorf("column %s: cannot change type %s to %s in place: Iceberg promotes only int32 to int64 and "+
		"decimal to a larger precision with the same scale; run `goldbridge replay %s`, which rebuilds the table from "+
		"Bronze with the new type in one commit (Gold then recomputes)", ch.col.Name, ch.from, ch.col.Type, entity)
}

// evolveSchema applies planSchema's adds and widenings to the table in one schema-only
// commit (no snapshot, so watermarks are untouched) and returns the table, reloaded,
// with the retypes left for the replay's commit (applyRetypes). Outside a replay a
// retype is refused (retypeError).
func evolveSchema(ctx context.Context, lh *catalog.Lakehouse, spec EntitySpec, tbl *table.Table, cols []ColumnSpec,
	layout []string, replay bool) (*table.Table, []schemaChange, error) {
	plan := func(sch *iceberg.Schema) (inPlace, retypes []schemaChange, err error) {
		changes, err := planSchema(sch, cols, spec.Key, layout)
		for _, ch := range changes {
			if !ch.retype {
				inPlace = append(inPlace, ch)
			} else if !replay {
				return nil, nil, retypeError(spec.Name, ch)
			} else {
				retypes = append(retypes, ch)
			}
		}
		return inPlace, retypes, err
	}
	for range 2 { // a rename, then the type of the renamed column
		changes, retypes, err := plan(tbl.Schema())
		if err != nil || len(changes) == 0 {
			return tbl, retypes, err
		}
		if tbl, err = commitSchema(ctx, lh, spec.Table, plan); err != nil {
			return nil, nil, err
		}
	}
	_, retypes, err := plan(tbl.Schema())
	return tbl, retypes, err
}

// commitSchema commits the in-place changes plan gives on the table's current schema in
// one schema-only commit.
func commitSchema(ctx context.Context, lh *catalog.Lakehouse, ident string,
	plan func(*iceberg.Schema) ([]schemaChange, []schemaChange, error)) (*table.Table, error) {
	return lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		changes, _, err := plan(tbl.Schema())
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
			if ch.rename != "" {
				us.RenameColumn([]string{ch.rename}, ch.col.Name)
				continue
			}
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

// applyRetypes stages the retypes in tx: each column dropped and added again with its
// new type (a new field id) where it was. The staged schema must equal want, the schema
// the replay's files were written with (nil: not checked), else the table changed
// meanwhile and the replay must run again.
func applyRetypes(tx *table.Transaction, retypes []schemaChange, want *iceberg.Schema) error {
	if len(retypes) == 0 {
		return nil
	}
	// One update (a second one in the same transaction would require a schema id the
	// catalog does not have yet); moving a column added in place of a dropped one of the
	// same name needs the carried patch 0002 (third_party/README.md).
	us := tx.UpdateSchema(true, true)
	for _, ch := range retypes {
		us.DeleteColumn([]string{ch.col.Name})
		us.AddColumn([]string{ch.col.Name}, icebergType(ch.col.Type), "", false, nil)
	}
	for _, ch := range retypes {
		if ch.after == "" {
			us.MoveFirst([]string{ch.col.Name})
		} else {
			us.MoveAfter([]string{ch.col.Name}, []string{ch.after})
		}
	}
	if err := us.Commit(); err != nil {
		return fmt.Errorf("retype columns: %w", err)
	}
	if want == nil {
		return nil
	}
	staged, err := tx.StagedTable()
	if err != nil {
		return err
	}
	if !staged.Schema().Equals(want) {
		return errors.New("retype columns: the table's schema changed during the replay; run it again")
	}
	return nil
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

// CheckTypes reports the columns of a Silver table's schema whose type differs from the
// one a reader expects (cols), other than by a promotion the next Silver run applies
// (columns the table lacks read as NULL and are not reported): a reader of the wrong
// type would read wrong values, so it must stop. The
// usual cause is a type changed in the config that a replay has not applied yet.
func CheckTypes(sch *iceberg.Schema, cols map[string]Type) error {
	var bad []string
	for _, name := range slices.Sorted(maps.Keys(cols)) {
		f, ok := sch.FindFieldByName(name)
		if want := icebergType(cols[name]); ok && !f.Type.Equals(want) && !widens(f.Type, want) { // a promotion reads right
			bad = append(bad, fmt.Sprintf("%s is %s in the table, %s in the config", name, f.Type, cols[name]))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("column %s (the entity's new types take effect with `goldbridge replay ENTITY`)", strings.Join(bad, ", column "))
	}
	return nil
}
