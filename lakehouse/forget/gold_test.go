package forget

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/mart"
	"goldbridge/lakehouse/silver"
)

// dailyEvents is a mart over the events entity: per day, events, amount and users.
func dailyEvents(tg Target) gold.MartSpec {
	cols := map[string]silver.Type{}
	for _, c := range tg.Silver.Columns {
		cols[c.Name] = c.Type
	}
	return gold.MartSpec{
		Name: "daily_events", Table: "gold.daily_events", SourceTable: tg.Silver.Table, SourceKey: tg.Silver.Key,
		SourceColumns: cols, GrainColumn: "event_ts", GrainUnit: "day", GrainAs: "event_date", Grouping: "none",
		Measures: []gold.MeasureSpec{
			{Name: "events", Agg: "count"},
			{Name: "total", Agg: "sum", Column: "amount", InputType: cols["amount"]},
			{Name: "users", Agg: "count_distinct", Column: "user_id", InputType: cols["user_id"]},
		},
	}
}

// goldFiles maps each Gold partition (event_date) to its data file paths.
func goldFiles(t *testing.T, lh *catalog.Lakehouse, ident string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, task := range tasks {
		p := fmt.Sprint(task.File.Partition())
		out[p] = append(out[p], task.File.FilePath())
	}
	for p := range out {
		slices.Sort(out[p])
	}
	return out
}

// expectedDays is the oracle of dailyEvents computed here from the landing lines, as
// Silver's rules define the rows (amount >= 0, one row per event_id): per day
// "events|total|users".
func expectedDays(t *testing.T, lines []string) map[string]string {
	t.Helper()
	type ev struct {
		EventID string          `json:"event_id"`
		UserID  string          `json:"user_id"`
		Amount  json.Number     `json:"amount"`
		TS      time.Time       `json:"event_ts"`
		_       json.RawMessage // none
	}
	seen := map[string]bool{}
	type day struct {
		n     int
		cents int64
		users map[string]bool
	}
	days := map[string]*day{}
	for _, l := range lines {
		var e ev
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(e.Amount.String(), "-") || seen[e.EventID] {
			continue
		}
		seen[e.EventID] = true
		var whole, frac int64
		fmt.Sscanf(e.Amount.String(), "%d.%d", &whole, &frac)
		k := e.TS.UTC().Format(time.DateOnly)
		if days[k] == nil {
			days[k] = &day{users: map[string]bool{}}
		}
		d := days[k]
		d.n++
		d.cents += whole*100 + frac
		d.users[e.UserID] = true
	}
	out := map[string]string{}
	for k, d := range days {
		out[k] = fmt.Sprintf("%d|%d|%d", d.n, d.cents, len(d.users))
	}
	return out
}

// goldDays reads dailyEvents' Gold rows as expectedDays renders them.
func goldDays(t *testing.T, lh *catalog.Lakehouse, ident string) map[string]string {
	t.Helper()
	ctx := context.Background()
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan(table.WithSelectedFields("event_date", "events", "total", "users")).ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			total, err := strconv.ParseFloat(rec.Column(2).ValueStr(i), 64)
			if err != nil {
				t.Fatal(err)
			}
			out[rec.Column(0).ValueStr(i)] = fmt.Sprintf("%s|%d|%s", rec.Column(1).ValueStr(i), int64(math.Round(total*100)), rec.Column(3).ValueStr(i))
		}
		rec.Release()
	}
	return out
}

// TestForgetRecomputesOnlyFedPartitions: a forget recomputes exactly the Gold
// partitions the subject's Silver rows fed (days 6 and 16: its other events were
// quarantined; day 6 keeps another user's event, day 16 is left empty), leaves every other partition's data files as they were, and Gold then
// equals both a fresh build without the subject and the per-day values computed here
// from the input without the subject. A rerun after a crash between Silver's seal and
// Gold recomputes the same partitions.
func TestForgetRecomputesOnlyFedPartitions(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			ctx := context.Background()
			tg := eventsTarget()
			m := dailyEvents(tg)
			tg.Marts = []gold.MartSpec{m}
			other := `{"event_id":"e-800","user_id":"u-01","amount":7.10,"event_ts":"2026-11-06T08:00:00Z"}`
			input := append(events(true), other)
			kept := append(events(false), other)
			lh, _ := build(t, tg, input)
			oracle, _ := build(t, tg, kept)
			for _, l := range []*catalog.Lakehouse{lh, oracle} {
				if _, err := gold.Run(ctx, l, m, gold.Options{}); err != nil {
					t.Fatal(err)
				}
			}
			before := goldFiles(t, lh, m.Table)
			if crash {
				tg.fault = func(s string) error {
					if s == "seal "+tg.Silver.KeysTable {
						return fmt.Errorf("crash")
					}
					return nil
				}
				if _, err := Run(ctx, lh, tg, req); err == nil {
					t.Fatal("no crash")
				}
				tg.fault = nil
			}
			res, err := Run(ctx, lh, tg, req)
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, r := range res.Tables {
				if r.Layer == LayerGold {
					parts = r.Partitions
				}
			}
			if want := []string{"2026-11-06", "2026-11-16"}; !slices.Equal(parts, want) {
				t.Errorf("recomputed partitions %v, want %v", parts, want)
			}
			after := goldFiles(t, lh, m.Table)
			changed := 0
			for p, files := range before {
				if !slices.Equal(after[p], files) {
					changed++
					if !strings.Contains(p, ":20763]") && !strings.Contains(p, ":20773]") { // 2026-11-06, 2026-11-16 in days
						t.Errorf("partition %s was rewritten: %v -> %v", p, files, after[p])
					}
				}
			}
			if changed != 2 {
				t.Errorf("%d partitions rewritten, want 2 (of %d: %v)", changed, len(before), slices.Sorted(maps.Keys(before)))
			}
			skip := []string{mart.ColCalculatedAt, mart.ColRunID}
			got, fresh := rows(t, lh, m.Table, 0), rows(t, oracle, m.Table, 0)
			got, fresh = dropCols(got, skip), dropCols(fresh, skip)
			if !slices.Equal(got, fresh) {
				t.Errorf("gold differs from the fresh build without the subject:\n got %q\nwant %q", got, fresh)
			}
			if got, want := goldDays(t, lh, m.Table), expectedDays(t, kept); !maps.Equal(got, want) {
				t.Errorf("gold per day:\n got %v\nwant %v", got, want)
			}
			checkForgotten(t, lh, oracle, tg)
		})
	}
}

// dropCols removes name=value| cells of the named columns from rendered rows.
func dropCols(rows []string, names []string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		var kept []string
		for _, cell := range strings.Split(r, "|") {
			name, _, _ := strings.Cut(cell, "=")
			if !slices.Contains(names, name) {
				kept = append(kept, cell)
			}
		}
		out[i] = strings.Join(kept, "|")
	}
	slices.Sort(out)
	return out
}
