package silver

import (
	"fmt"
	"slices"
	"strings"
)

// Quality is the three-level check of one run, returned in Result and recorded as JSON
// in the Silver snapshot summary (goldbridge.quality).
//
//   - Rows: every row the run writes to Silver is checked again after the merge: no
//     filter rule of the registry fails on it (evaluated on the final row, after every
//     normalisation and enrichment), and no required, key, updated_at or event_time
//     column is NULL.
//   - Schema: the Silver table's Iceberg schema has every declared column with the
//     declared type.
//   - Aggregates: the Bronze rows of the run against what became of them; the shares
//     quarantined and duplicated, with a warning above the entity's thresholds.
type Quality struct {
	RowsChecked      int64            `json:"rows_checked"`
	FilterViolations map[string]int64 `json:"filter_violations,omitempty"` // rule id -> rows written that fail it
	NullViolations   map[string]int64 `json:"null_violations,omitempty"`   // column -> rows written with NULL in it

	SchemaIssues []string `json:"schema_issues,omitempty"` // declared columns missing or typed differently
	SchemaNotes  []string `json:"schema_notes,omitempty"`  // table columns no longer declared (kept, read NULL for new rows)

	BronzeRows    int64    `json:"bronze_rows"`
	SilverRows    int64    `json:"silver_rows"` // Current: rows merged or appended
	Balanced      bool     `json:"balanced"`    // current + superseded + duplicates + quarantined + skipped == bronze rows
	QuarantinePct float64  `json:"quarantine_pct"`
	DuplicatePct  float64  `json:"duplicate_pct"`
	Warnings      []string `json:"warnings,omitempty"`
}

// Passed reports whether the row, schema and accounting checks hold. Warnings about
// thresholds do not fail it.
func (q Quality) Passed() bool {
	return len(q.FilterViolations) == 0 && len(q.NullViolations) == 0 && len(q.SchemaIssues) == 0 && q.Balanced
}

// Lines renders the report for people, one line per level and one per warning.
func (q Quality) Lines() []string {
	rows := "ok"
	var bad []string
	for _, id := range sortedKeys(q.FilterViolations) {
		bad = append(bad, fmt.Sprintf("%d rows fail %s", q.FilterViolations[id], id))
	}
	for _, c := range sortedKeys(q.NullViolations) {
		bad = append(bad, fmt.Sprintf("%d rows with NULL %s", q.NullViolations[c], c))
	}
	if len(bad) > 0 {
		rows = "FAIL: " + strings.Join(bad, "; ")
	}
	schema := "ok"
	if len(q.SchemaIssues) > 0 {
		schema = "FAIL: " + strings.Join(q.SchemaIssues, "; ")
	}
	balanced := "counts add up"
	if !q.Balanced {
		balanced = "FAIL: counts do not add up"
	}
	out := []string{
		fmt.Sprintf("quality rows: %d written rows checked, %s", q.RowsChecked, rows),
		"quality schema: " + schema,
		fmt.Sprintf("quality aggregates: %d bronze rows -> %d silver rows, %.2f%% quarantined, %.2f%% duplicates, %s",
			q.BronzeRows, q.SilverRows, q.QuarantinePct, q.DuplicatePct, balanced),
	}
	for _, n := range q.SchemaNotes {
		out = append(out, "note: "+n)
	}
	for _, w := range q.Warnings {
		out = append(out, "WARN: "+w)
	}
	return out
}

func sortedKeys(m map[string]int64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// aggregate fills the aggregate level from the run's counts.
func (q *Quality) aggregate(c Counts, spec EntitySpec) {
	q.BronzeRows, q.SilverRows = c.Read, c.Current
	q.Balanced = c.Current+c.Superseded+c.Duplicates+c.Quarantined+c.Skipped == c.Read
	q.QuarantinePct, q.DuplicatePct, q.Warnings = 0, 0, nil
	read := c.Read - c.Skipped // Debezium tombstones are no part of the shares
	if read <= 0 {
		return
	}
	q.QuarantinePct = pct(c.Quarantined, read)
	q.DuplicatePct = pct(c.Duplicates, read)
	if q.QuarantinePct > spec.WarnQuarantinePct {
		q.Warnings = append(q.Warnings, fmt.Sprintf("%.2f%% of the bronze rows were quarantined (threshold %g%%)", q.QuarantinePct, spec.WarnQuarantinePct))
	}
	if q.DuplicatePct > spec.WarnDuplicatePct {
		q.Warnings = append(q.Warnings, fmt.Sprintf("%.2f%% of the bronze rows were duplicates (threshold %g%%)", q.DuplicatePct, spec.WarnDuplicatePct))
	}
}

// pct is 100·n/d rounded to 2 decimals.
func pct(n, d int64) float64 {
	return float64(int64(10000*float64(n)/float64(d)+0.5)) / 100
}

// checkRows runs the row level over the rows this pass writes, adding to the run's counts.
func (e *engine) checkRows() {
	q := &e.quality
	var notNull []int
	for i, c := range e.cols {
		if c.Required || slices.Contains(e.keyIdx, i) || i == e.uaIdx || i == e.etIdx {
			notNull = append(notNull, i)
		}
	}
	row := make([]Value, len(e.cols))
	for _, w := range e.ws {
		for slot, f := range w.fate {
			if f != fateInsert && f != fateUpdate {
				continue
			}
			q.RowsChecked++
			for i := range w.kinds {
				row[i] = w.get(i, slot)
			}
			if e.spec.Debezium != nil && w.op(slot) == 'd' {
				e.checkDelete(row)
				continue
			}
			e.checkRow(row, notNull)
		}
	}
}

// checkRow counts the row-level violations of one written row.
func (e *engine) checkRow(row []Value, notNull []int) {
	q := &e.quality
	for _, i := range notNull {
		if row[i].Null {
			if q.NullViolations == nil {
				q.NullViolations = map[string]int64{}
			}
			q.NullViolations[e.cols[i].Name]++
		}
	}
	if e.rules != nil {
		e.rules.violations(row, func(id string) {
			if q.FilterViolations == nil {
				q.FilterViolations = map[string]int64{}
			}
			q.FilterViolations[id]++
		})
	}
}
