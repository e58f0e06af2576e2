package sync_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	gbsync "goldbridge/sync"
)

// The states goldbridge builds (push.ClientStates) must be ClickHouse's own: the same
// Gold pushed once with client-built and once with server-built states gives, for
// every row, the same finished values, and merging the two rows' uniqExact states
// counts no key twice (every key hashed to the same 128 bits).
func TestClientStatesMatchServerStates(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	days := daysFrom(day0, 6)
	rows := goldRows(genOrders(5, days, 500))
	tbl := writeGold(t, lh, rows, days)
	now := day0.AddDate(0, 0, 6)
	clock := func() time.Time { return now }

	dbs := [2]string{chtest.Database(t), chtest.Database(t)}
	for i, server := range []bool{false, true} {
		m := testMart(dbs[i], true)
		res, err := gbsync.Sync(ctx, chtarget.WithServerStates(chtarget.NewClickHouse(client(t, dbs[i])), server), m, tbl, gbsync.Options{Now: clock})
		if err != nil || len(res.Pushed) != 6 {
			t.Fatalf("sync (server states %v): %v %s", server, err, res.Summary(m.Name))
		}
	}
	c := client(t, dbs[0])
	keys := "report_date, grouping_level, country, category, grouping_country, grouping_category"
	// Per row: same simple values, same distinct count, and the union of both states
	// has exactly that many keys.
	q := fmt.Sprintf(`SELECT count(), countIf(va != vb), countIf(na != nb), countIf(na != toUInt64(u))
		FROM (
			SELECT %[1]s, any(va) AS va, any(vb) AS vb, any(na) AS na, any(nb) AS nb, uniqExactMerge(s) AS u
			FROM (
				SELECT %[1]s, (revenue, orders, avg_order__sum, avg_order__count) AS va, NULL AS vb, finalizeAggregation(customers__state) AS na, NULL AS nb, customers__state AS s FROM %[2]s.daily_revenue_kpi
				UNION ALL
				SELECT %[1]s, NULL, (revenue, orders, avg_order__sum, avg_order__count), NULL, finalizeAggregation(customers__state), customers__state FROM %[3]s.daily_revenue_kpi
			)
			GROUP BY %[1]s
		)`, keys, "`"+dbs[0]+"`", "`"+dbs[1]+"`")
	var n, dv, dn, du uint64
	if err := c.Conn().QueryRow(ctx, q).Scan(&n, &dv, &dn, &du); err != nil {
		t.Fatal(err)
	}
	if n != uint64(len(rows)) || dv != 0 || dn != 0 || du != 0 {
		t.Fatalf("%d rows (Gold has %d): %d differ in sums, %d in distinct counts, %d states hold different keys", n, len(rows), dv, dn, du)
	}
}
