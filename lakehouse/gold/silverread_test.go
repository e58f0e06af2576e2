package gold

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/lakehousetest"
)

// The direct Silver read must yield exactly the live rows iceberg-go's scan yields for
// the same day ranges: row groups pruned by their statistics, rows outside the ranges
// cut, and the rows replaced by later upserts and deletes (equality deletes) dropped.
func TestDirectSilverReadEqualsScan(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing := t.TempDir()
	day := func(d int) time.Time { return time.Date(2026, 1, 1+d%40, d%24, 0, 0, 0, time.UTC) }
	var lines []string
	for i := range 3000 {
		lines = append(lines, fmt.Sprintf(`{"order_id":"o%d","user_id":"u%d","amount":%d.25,"country":"C%d","category":"k%d","created_at":"%s","updated_at":"2026-03-01T00:00:00Z","op":"c"}`,
			i, i%700, i%50, i%7, i%3, day(i).Format(time.RFC3339)))
	}
	os.WriteFile(filepath.Join(landing, "1.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	loadAndSilver(t, lh, landing, "created_at")
	// Upserts (some moved to another day) and deletes of every 7th order: equality deletes.
	lines = lines[:0]
	for i := 0; i < 3000; i += 7 {
		op := "u"
		if i%2 == 0 {
			op = "d"
		}
		lines = append(lines, fmt.Sprintf(`{"order_id":"o%d","user_id":"u%d","amount":9.75,"country":"C%d","category":"k%d","created_at":"%s","updated_at":"2026-03-02T00:00:00Z","op":"%s"}`,
			i, i%700, i%7, i%3, day(i+i%3).Format(time.RFC3339), op))
	}
	os.WriteFile(filepath.Join(landing, "2.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	loadAndSilver(t, lh, landing, "created_at")

	tbl, err := lh.LoadTable(ctx, "silver.orders")
	if err != nil {
		t.Fatal(err)
	}
	fields := []string{"created_at", "country", "amount", "user_id", "is_deleted"}
	render := func(recs func(func(arrow.RecordBatch, error) bool)) []string {
		var out []string
		for rec, err := range recs {
			if err != nil {
				t.Fatal(err)
			}
			for r := range int(rec.NumRows()) {
				var b strings.Builder
				for c := range fields {
					b.WriteString(rec.Column(rec.Schema().FieldIndices(fields[c])[0]).ValueStr(r) + "|")
				}
				out = append(out, b.String())
			}
			rec.Release()
		}
		slices.Sort(out)
		return out
	}
	for _, days := range [][]int{{3}, {0, 1, 2, 17, 39}, nil} {
		var ranges [][2]int64
		var f iceberg.BooleanExpression = iceberg.AlwaysTrue{}
		if days != nil {
			f = iceberg.AlwaysFalse{}
			for _, d := range days {
				lo := time.Date(2026, 1, 1+d, 0, 0, 0, 0, time.UTC)
				ranges = append(ranges, [2]int64{lo.UnixMicro(), lo.AddDate(0, 0, 1).UnixMicro()})
				f = iceberg.NewOr(f, iceberg.NewAnd(iceberg.GreaterThanEqual(iceberg.Reference("created_at"), iceberg.Timestamp(lo.UnixMicro())),
					iceberg.LessThan(iceberg.Reference("created_at"), iceberg.Timestamp(lo.AddDate(0, 0, 1).UnixMicro()))))
			}
		}
		scan := tbl.Scan(table.WithSelectedFields(fields...), table.WithRowFilter(f))
		tasks, err := scan.PlanFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		eq := 0
		for _, task := range tasks {
			eq += len(task.EqualityDeleteFiles)
		}
		direct, ok := readSilverDirect(ctx, tbl, tasks, fields, "created_at", ranges, false)
		if !ok || eq == 0 {
			t.Fatalf("days %v: direct read possible %v, %d equality delete files (want both)", days, ok, eq)
		}
		got := render(direct)
		_, recs, err := scan.ReadTasks(ctx, tasks)
		if err != nil {
			t.Fatal(err)
		}
		want := render(recs)
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Fatalf("days %v: direct read %d rows, scan %d rows", days, len(got), len(want))
		}
	}
}
