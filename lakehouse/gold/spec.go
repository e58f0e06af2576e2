// Package gold computes declared KPI marts from Silver into gold.<mart>: a time grain,
// dimensions, measures and ROLLUP/CUBE/grouping-set levels, recomputed only for the grain
// partitions that Silver changes touched, and published only through a data-quality
// gateway whose critical failure leaves Gold as it was and opens the mart's circuit.
// A run over more Silver rows than MartSpec.PassRows is computed in passes over groups
// of partitions, with the same one commit (its memory bounded by a group's).
//
// The table layout is the contract with serving; docs/gold.md describes it.
package gold

import (
	"fmt"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/mart"
	"goldbridge/lakehouse/silver"
)

// Dim is one dimension column of a mart.
type Dim struct {
	Name string
	Type silver.Type
}

// MeasureSpec is one aggregate of a mart.
type MeasureSpec struct {
	Name      string
	Agg       mart.Agg
	Column    string
	InputType silver.Type
	Quantiles []float64 // levels in (0, 1] for quantiles (mart.CheckQuantile), in output order
	// If is the boolean expression over the mart's row columns selecting the rows a
	// count_if or sum_if takes (mart.Agg.Cond); empty for the other aggregates.
	If string
	// By is the column whose largest (max_by) or smallest (min_by) value picks the row
	// whose Column is the value (mart.AggDesc.By), of type ByType; empty for the others.
	By     string
	ByType silver.Type
}

// JoinSpec joins another Silver entity's current rows into the mart's source rows
// (one-big-table marts). Joined rows with is_deleted = true are left out.
type JoinSpec struct {
	Entity string
	Table  string // silver.<entity>
	Type   string // left | inner
	// On pairs a column of the source (or of an earlier join) with a column of the
	// joined entity; keys of equal types match, NULL never matches.
	On []JoinOn
	// Columns are the joined entity's columns brought into the mart's rows.
	Columns []string
	// ColumnTypes are the joined entity's column types (at least On[].Joined and Columns).
	ColumnTypes map[string]silver.Type
	// HasDeleted: the joined table has is_deleted (an upsert entity).
	HasDeleted bool
}

// JoinOn is one equality of a join.
type JoinOn struct {
	Local  string // column of the mart's rows
	Joined string // column of the joined entity
}

// CheckSpec is one data-quality gateway check.
type CheckSpec struct {
	Name      string
	Type      string // expr | not_null | unique_grain | row_count_anomaly | consistency | null_grain
	Expr      string
	Columns   []string
	Severity  string // critical | warning
	Trailing  int
	Tolerance float64
}

// MartSpec is one mart as the gold package takes it.
type MartSpec struct {
	Name        string
	Table       string // gold.<mart>
	SourceTable string // silver.<entity>
	SourceKey   []string
	// SourceColumns are the Silver columns by name (the filter and grain may use any).
	SourceColumns map[string]silver.Type
	// Mode is incremental (recompute the partitions Silver changes touched) or snapshot
	// (each run writes the state of all rows as the partition of the run's grain).
	Mode         string
	Joins        []JoinSpec
	Filter       string
	GrainColumn  string // the source column of the grain (unused in snapshot mode)
	GrainUnit    string // hour | day | month
	GrainAs      string
	Dims         []Dim
	Grouping     string // none | rollup | cube | sets
	GroupingSets [][]string
	Measures     []MeasureSpec
	Checks       []CheckSpec
	// OnChange is what a run does when the mart's definition changed since its Gold
	// table was built: OnChangeRebuild (also when empty) or OnChangeFail.
	OnChange string
	// PassRows bounds the memory of a run: when the partitions it computes (all of them
	// in a full build, the touched ones otherwise) hold more Silver rows, they are
	// computed in passes over groups of consecutive partitions of at most that many
	// Silver rows each, all committed in one snapshot. 0 means DefaultPassRows; a
	// negative value, one pass.
	PassRows int64
	// Codec compresses the mart's data files (the zero value: catalog.DefaultCodec); a
	// table written with another is set to it before a run. Not part of Definition: a
	// change of codec rebuilds nothing.
	Codec catalog.Codec
}

// Summary keys and properties of Gold tables (the column names are package mart's).
const (
	PropSilverSnapshot = "goldbridge.silver-snapshot-id"
	PropPartitions     = "goldbridge.partitions"
	PropRunID          = "goldbridge.run-id"
	PropWarnings       = "goldbridge.dq.warnings"
	PropFull           = "goldbridge.full"
	PropJoinSnapshots  = "goldbridge.join-snapshot-ids" // JSON {table: snapshot id} of the joined Silver tables
	PropCircuit        = "goldbridge.circuit"
	PropCircuitReason  = "goldbridge.circuit.reason"
	PropCircuitSince   = "goldbridge.circuit.since"
)

// ModeSnapshot is the mode of marts that append a periodic snapshot.
const ModeSnapshot = "snapshot"

func (m MartSpec) snapshot() bool { return m.Mode == ModeSnapshot }

// rowColumns are the column types a mart's rows offer to the filter, dimensions and
// measures: the source's, then each join's columns.
func (m MartSpec) rowColumns() map[string]silver.Type {
	out := make(map[string]silver.Type, len(m.SourceColumns))
	for n, t := range m.SourceColumns {
		out[n] = t
	}
	for _, j := range m.Joins {
		for _, c := range j.Columns {
			out[c] = j.ColumnTypes[c]
		}
	}
	return out
}

// validate checks what the config cannot: join column clashes and key types.
func (m MartSpec) validate() error {
	cols := make(map[string]silver.Type, len(m.SourceColumns))
	for n, t := range m.SourceColumns {
		cols[n] = t
	}
	for _, j := range m.Joins {
		if j.Type != "left" && j.Type != "inner" {
			return fmt.Errorf("join %s: type must be left or inner, got %q", j.Entity, j.Type)
		}
		if len(j.On) == 0 {
			return fmt.Errorf("join %s: no join columns", j.Entity)
		}
		for _, on := range j.On {
			lt, ok := cols[on.Local]
			if !ok {
				return fmt.Errorf("join %s: unknown column %q", j.Entity, on.Local)
			}
			jt, ok := j.ColumnTypes[on.Joined]
			if !ok {
				return fmt.Errorf("join %s: entity has no column %q", j.Entity, on.Joined)
			}
			if !joinable(lt, jt) {
				return fmt.Errorf("join %s: %s (%s) and %s (%s) have different types", j.Entity, on.Local, lt, on.Joined, jt)
			}
		}
		for _, c := range j.Columns {
			t, ok := j.ColumnTypes[c]
			if !ok {
				return fmt.Errorf("join %s: entity has no column %q", j.Entity, c)
			}
			if _, clash := cols[c]; clash {
				return fmt.Errorf("join %s: column %q is already a column of the mart's rows", j.Entity, c)
			}
			cols[c] = t
		}
	}
	// A name the rows do not have would be read as NULL on every row.
	for _, d := range m.Dims {
		if _, ok := cols[d.Name]; !ok {
			return fmt.Errorf("dimension %q is not a column of the mart's rows", d.Name)
		}
	}
	for _, ms := range m.Measures {
		if _, ok := cols[ms.Column]; ms.Column != "" && !ok {
			return fmt.Errorf("measure %s: %q is not a column of the mart's rows", ms.Name, ms.Column)
		}
		if ms.Agg.By() != (ms.By != "") {
			return fmt.Errorf("measure %s: a by column is taken by max_by and min_by only, and required by them", ms.Name)
		}
		if _, ok := cols[ms.By]; ms.By != "" && !ok {
			return fmt.Errorf("measure %s: by %q is not a column of the mart's rows", ms.Name, ms.By)
		}
	}
	if _, err := m.levels(); err != nil {
		return err
	}
	for _, ms := range m.Measures {
		if ms.Agg.Cond() != (ms.If != "") {
			return fmt.Errorf("measure %s: an if expression is taken by count_if and sum_if only, and required by them", ms.Name)
		}
		if ms.Agg.Served() != mart.Quantiles {
			continue
		}
		if len(ms.Quantiles) == 0 {
			return fmt.Errorf("measure %s: no quantile levels", ms.Name)
		}
		for _, q := range ms.Quantiles {
			if err := mart.CheckQuantile(q); err != nil {
				return fmt.Errorf("measure %s: %w", ms.Name, err)
			}
		}
	}
	if !m.snapshot() {
		if _, ok := m.SourceColumns[m.GrainColumn]; !ok {
			return fmt.Errorf("grain column %q is not a column of %s", m.GrainColumn, m.SourceTable)
		}
	}
	return nil
}

// joinable reports whether join keys of these types can match: identical types, two
// integer types, or two decimals of the same scale (keys are compared as rendered text).
func joinable(a, b silver.Type) bool {
	isInt := func(t silver.Type) bool { return t.Kind == silver.Int32 || t.Kind == silver.Int64 }
	return a == b || isInt(a) && isInt(b) || a.Kind == silver.Decimal && b.Kind == silver.Decimal && a.Scale == b.Scale
}

// dimNames are the names of the mart's dimensions, in order.
func (m MartSpec) dimNames() []string {
	out := make([]string, len(m.Dims))
	for i, d := range m.Dims {
		out[i] = d.Name
	}
	return out
}

// levels are the mart's grouping levels (mart.Levels), finest first.
func (m MartSpec) levels() ([]mart.Level, error) {
	return mart.Levels(m.Grouping, m.dimNames(), m.GroupingSets)
}
