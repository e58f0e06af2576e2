package gold

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/mart"
)

// PropSpec is the Gold table property holding the definition of the mart the table was
// built for (specJSON): when the mart's definition changes, the table is rebuilt.
const PropSpec = "goldbridge.mart-spec"

// What a changed mart definition does (MartSpec.OnChange).
const (
	OnChangeRebuild = "rebuild" // drop the Gold table and compute it again for the new definition
	OnChangeFail    = "fail"    // stop, naming the command that rebuilds it
)

// ErrSpecChanged means the mart's definition changed since its Gold table was built and
// the mart's on_change is fail.
var ErrSpecChanged = fmt.Errorf("mart definition changed since its gold table was built")

// Definition is the canonical text of everything that defines a Gold table's content
// (source, mode, filter, grain, dimensions, grouping, measures and joins): the value
// of the table's PropSpec.
func (m MartSpec) Definition() string {
	type dim struct{ Name, Type string }
	type measure struct {
		Name      string
		Agg       mart.Agg
		Column    string    `json:",omitempty"`
		Input     string    `json:",omitempty"`
		Quantiles []float64 `json:",omitempty"`
		If        string    `json:",omitempty"`
		By        string    `json:",omitempty"`
		ByInput   string    `json:",omitempty"`
	}
	type join struct {
		Entity, Table, Type string
		On                  []JoinOn
		Columns             []string
	}
	v := struct {
		Source     string
		Mode       string `json:",omitempty"`
		Filter     string `json:",omitempty"`
		Grain      [3]string
		Dimensions []dim
		Grouping   string     `json:",omitempty"`
		Sets       [][]string `json:",omitempty"`
		Measures   []measure
		Joins      []join `json:",omitempty"`
	}{Source: m.SourceTable, Mode: m.Mode, Filter: m.Filter, Grain: [3]string{m.GrainColumn, m.GrainUnit, m.GrainAs},
		Grouping: m.Grouping, Sets: m.GroupingSets}
	for _, d := range m.Dims {
		v.Dimensions = append(v.Dimensions, dim{d.Name, d.Type.String()})
	}
	for _, ms := range m.Measures {
		in := ""
		if ms.Column != "" {
			in = ms.InputType.String()
		}
		by := ""
		if ms.By != "" {
			by = ms.ByType.String()
		}
		v.Measures = append(v.Measures, measure{ms.Name, ms.Agg, ms.Column, in, ms.Quantiles, ms.If, ms.By, by})
	}
	for _, j := range m.Joins {
		v.Joins = append(v.Joins, join{j.Entity, j.Table, j.Type, j.On, j.Columns})
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// DefinitionChanges names what differs between def and the definition gt was built for
// ("" when nothing does); known is false for a table from before PropSpec.
func DefinitionChanges(gt *table.Table, def string) (what string, known bool) {
	old, recorded := gt.Properties()[PropSpec]
	if !recorded {
		return "", false
	}
	if old == def {
		return "", true
	}
	return specChanges(old, def), true
}

// specChanges names the parts of two specJSON texts that differ.
func specChanges(old, cur string) string {
	var a, b map[string]json.RawMessage
	if json.Unmarshal([]byte(old), &a) != nil || json.Unmarshal([]byte(cur), &b) != nil {
		return "definition"
	}
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if string(a[k]) != string(b[k]) {
			out = append(out, strings.ToLower(k))
		}
	}
	return strings.Join(out, ", ")
}

// sameColumns reports whether two schemas have the same columns (names, types,
// nullability) in the same order, whatever their field ids.
func sameColumns(a, b *iceberg.Schema) bool {
	fa, fb := a.Fields(), b.Fields()
	return slices.EqualFunc(fa, fb, func(x, y iceberg.NestedField) bool {
		return x.Name == y.Name && x.Required == y.Required && x.Type.String() == y.Type.String()
	})
}

// evolve returns the Gold table for the mart's current definition. A table built for
// another definition (PropSpec differs; for a table from before PropSpec, its columns
// differ) is dropped and created again empty, so the run computes it in full: with one
// log line saying what changed, or, with OnChange fail or none requested, an error
// naming the command to run. opt.Rebuild forces it.
//
// A crash after the drop leaves no table or an empty one for the new definition: the
// Silver watermark lives in the Gold snapshots' summaries (Watermark), so the next run
// finds none and computes every partition.
func (m MartSpec) evolve(ctx context.Context, lh *catalog.Lakehouse, gt *table.Table, opt Options) (*table.Table, error) {
	rebuild := opt.Rebuild
	changed, recorded := DefinitionChanges(gt, m.Definition())
	var what string
	switch {
	case rebuild:
		what = "rebuild requested"
	case recorded && changed == "":
		return gt, nil
	case !recorded && sameColumns(gt.Schema(), m.Schema()):
		return gt, nil // built before PropSpec for this layout: adopted at its next commit
	case recorded:
		what = changed
	default:
		what = "columns"
	}
	if !rebuild && m.OnChange == OnChangeFail {
		return nil, fmt.Errorf("%w (%s): run `goldbridge gold --rebuild %s` to rebuild %s, or set marts.%s.on_change: rebuild",
			ErrSpecChanged, what, m.Name, m.Table, m.Name)
	}
	opt.Log.Info("mart definition changed: rebuilding the gold table", "mart", m.Name, "table", m.Table, "changed", what)
	id, err := catalog.ParseIdent(m.Table)
	if err != nil {
		return nil, err
	}
	if err := lh.Catalog().DropTable(ctx, id); err != nil {
		return nil, fmt.Errorf("drop %s: %w", m.Table, err)
	}
	if opt.afterDrop != nil {
		if err := opt.afterDrop(); err != nil {
			return nil, err
		}
	}
	gt, _, err = lh.LoadOrCreateTable(ctx, m.Table, m.Schema(), m.partitionSpec(), m.tableProperties())
	if err != nil {
		return nil, err
	}
	return gt, nil
}
