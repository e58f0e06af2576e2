package sync_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	"goldbridge/serving/ddl"
	gbsync "goldbridge/sync"
)

// TestSortingKeyUpgrade: a mart served before the level came first in <t>'s sorting key
// (its <t> and staging table ordered by the grain first, rows in them) is rebuilt by the
// next sync, which leaves both with the level first, check clean and <t>_final equal to
// Gold; a partial push after that replaces a partition in place.
func TestSortingKeyUpgrade(t *testing.T) {
	ctx := context.Background()
	db := chtest.Database(t)
	c := client(t, db)
	lh := lakehousetest.Open(t)
	m := testMart(db, true)
	days := daysFrom(day0, 3)
	orders := genOrders(5, days, 150)
	tbl := writeGold(t, lh, goldRows(orders), days)
	clock := func() time.Time { return day0.AddDate(0, 0, 3) }
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	key := func(table string) string {
		return scalar[string](t, c, fmt.Sprintf("SELECT sorting_key FROM system.tables WHERE database = '%s' AND name = '%s'", db, table))
	}
	levelFirst := "grouping_level, report_date, country, category, grouping_country, grouping_category"
	if got := key(m.Table); got != levelFirst {
		t.Fatalf("sorting key of a new <t>: %q", got)
	}
	// The tables as an earlier goldbridge made them: the grain first.
	for _, table := range []string{m.Table, m.Table + ddl.StagingSuffix} {
		create := scalar[string](t, c, fmt.Sprintf("SELECT create_table_query FROM system.tables WHERE database = '%s' AND name = '%s'", db, table))
		old := strings.Replace(create, "ORDER BY (grouping_level, report_date,", "ORDER BY (report_date, grouping_level,", 1)
		if old == create {
			t.Fatalf("no level-first ORDER BY in %s", create)
		}
		name, tmp := ddl.Name(m, table), ddl.Name(m, table+"_old")
		old = strings.Replace(old, "CREATE TABLE "+db+"."+table+" ", "CREATE TABLE "+tmp+" ", 1)
		for _, q := range []string{old, "INSERT INTO " + tmp + " SELECT * FROM " + name, "EXCHANGE TABLES " + name + " AND " + tmp, "DROP TABLE " + tmp + " SYNC"} {
			if err := c.Conn().Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	if got := key(m.Table); !strings.HasPrefix(got, "report_date, grouping_level") {
		t.Fatalf("the old <t>'s sorting key: %q", got)
	}
	want := finalRows(t, c, m)
	res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
	if err != nil || len(res.Rebuilt) == 0 {
		t.Fatalf("the sync after the upgrade: want a rebuild: %s %v", res.Summary(m.Name), err)
	}
	for _, table := range []string{m.Table, m.Table + ddl.StagingSuffix} {
		if got := key(table); got != levelFirst {
			t.Fatalf("sorting key of %s after the rebuild: %q", table, got)
		}
	}
	if got := finalRows(t, c, m); !slices.Equal(got, want) {
		t.Fatal("<t>_final after the rebuild differs from before it")
	}
	// One day changed: replaced in place, from a batch table with <t>'s key.
	last := days[len(days)-1]
	for i := range 20 {
		orders = append(orders, order{last, strp("DE"), "books", 100, fmt.Sprintf("late-%d", i)})
	}
	rows := goldRows(orders)
	changed := rowsOfDay(rows, last)
	tbl = writeGold(t, lh, changed, []time.Time{last})
	if res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(res.Rebuilt) > 0 || len(res.Pushed) != 1 {
		t.Fatalf("a day changed: %s %v", res.Summary(m.Name), err)
	}
	if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
		t.Fatalf("check: %v %v", drifts, err)
	}
	if got := finalRows(t, c, m); !slices.Equal(got, goldStrings(rows, m, day0)) {
		t.Fatal("<t>_final differs from Gold")
	}
}
