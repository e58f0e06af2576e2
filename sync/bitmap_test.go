package sync_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	"goldbridge/serving/ddl"
	"goldbridge/serving/push"
	gbsync "goldbridge/sync"
)

// TestCheckBitmapStates: a mart whose distinct counts are bitmaps of dictionary ids
// (serving.DistinctBitmap) checks clean after a sync; a bitmap of other ids with the
// same count (<t>_final unchanged), and a dictionary entry naming another hash, are
// each drift in the partition holding them, repaired by a sync of the drifting
// partitions. A forget's purge then keeps in the dictionary only the ids some row holds.
func TestCheckBitmapStates(t *testing.T) {
	ctx := context.Background()
	end := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	lh, db, c := servedDemo(t, end)
	clock := func() time.Time { return end.AddDate(0, 0, 1) }
	spec := groupingMart("bitmap_check", "rollup", nil)
	if _, err := gold.Run(ctx, lh, spec, gold.Options{}); err != nil {
		t.Fatal(err)
	}
	tbl, err := lh.LoadTable(ctx, spec.Table)
	if err != nil {
		t.Fatal(err)
	}
	m := servedMart(db, spec, serving.DistinctBitmap)
	target, ids := ddl.Name(m, m.Table), ddl.Name(m, m.Table+ddl.IdsSuffix)
	syncAndCheck := func(only []string) {
		t.Helper()
		if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock, Only: only}); err != nil {
			t.Fatal(err)
		}
		if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
			t.Fatalf("check: %v %v", drifts, err)
		}
	}
	syncAndCheck(nil)
	final := func() string {
		return scalar[string](t, c, fmt.Sprintf("SELECT arrayStringConcat(groupArray(formatRow('TSV', *)), '') FROM (SELECT * FROM %s ORDER BY ALL)", ddl.Name(m, m.Table+ddl.ViewSuffix)))
	}
	want := final()
	p := scalar[string](t, c, fmt.Sprintf("SELECT _partition_id FROM %s GROUP BY 1 ORDER BY count() DESC, 1 LIMIT 1", target))
	row := fmt.Sprintf("_partition_id = '%s' AND grouping_level = 'by_country' AND country IS NOT NULL", p)
	held := scalar[uint64](t, c, fmt.Sprintf("SELECT bitmapMin(customers__state) FROM %s WHERE %s ORDER BY country LIMIT 1", target, row))
	maxID := scalar[uint32](t, c, "SELECT max(id) FROM "+ids)
	hash := scalar[string](t, c, fmt.Sprintf("SELECT toString(h) FROM %s WHERE id = %d", ids, held))
	for _, tc := range []struct {
		name string
		sql  []string
	}{
		// Every id of one row's bitmap past the dictionary's largest: as many keys, none
		// of them the row's.
		{"other_ids_same_count", []string{fmt.Sprintf("ALTER TABLE %s UPDATE customers__state = arrayReduce('groupBitmapState', arrayMap(i -> toUInt32(i + %d), bitmapToArray(customers__state))) WHERE %s SETTINGS mutations_sync = 2", target, maxID, row)}},
		// A held id standing for another hash.
		{"dictionary_entry", []string{
			fmt.Sprintf("ALTER TABLE %s DELETE WHERE id = %d SETTINGS mutations_sync = 2", ids, held),
			fmt.Sprintf("INSERT INTO %s VALUES (toUInt128('%s') + 1, %d)", ids, hash, held),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp := tamper{c: c, m: m, tbl: tbl, clock: clock, final: final, want: want}
			tp.foundAndRepaired(t, p, tc.sql, true)
		})
	}
	// The repair of the dictionary entry gave the key a new id and left the old one to
	// no row; a purge removes it, and the rows check clean against what remains.
	before := scalar[uint64](t, c, "SELECT count() FROM "+ids)
	res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock, Purge: true})
	if err != nil {
		t.Fatal(err)
	}
	// The ids the rows hold, and the dictionary's generation (id 0).
	heldIDs := 1 + scalar[uint64](t, c, fmt.Sprintf("SELECT length(bitmapToArray(groupBitmapMergeState(customers__state))) FROM %s", target))
	if after := scalar[uint64](t, c, "SELECT count() FROM "+ids); after != heldIDs || res.Purged.DictionaryKeys != int(before-after) || res.Purged.DictionaryKeys < 1 {
		t.Fatalf("purge: dictionary %d -> %d keys (reported %d removed), rows hold %d ids", before, after, res.Purged.DictionaryKeys, heldIDs)
	}
	syncAndCheck(nil)
	if final() != want {
		t.Fatal("_final after the purge differs from Gold's rows")
	}
}

// TestBitmapDictionaryLost: a mart switched from uniqExact states to bitmaps is rebuilt.
// Then its key dictionary is dropped by hand: it is made anew, and would
// give its first ids again to other keys than the ones <t>'s bitmaps hold. The next
// sync rebuilds <t> (its comment names the old dictionary); a rebuild that fails before
// publishing, or after publishing and before naming the new dictionary in the comment,
// leaves it so named, so the sync after it rebuilds again. After that, check is clean
// and distinct counts merged across days equal the orders' own.
func TestBitmapDictionaryLost(t *testing.T) {
	for _, step := range []string{push.StepReplace, push.StepMark} {
		t.Run(step, func(t *testing.T) { dictionaryLost(t, step) })
	}
}

func dictionaryLost(t *testing.T, failAt string) {
	ctx := context.Background()
	db := chtest.Database(t)
	c := client(t, db)
	lh := lakehousetest.Open(t)
	m := testMart(db, true)
	days := daysFrom(day0, 4)
	orders := genOrders(3, days, 200)
	tbl := writeGold(t, lh, goldRows(orders), days)
	clock := func() time.Time { return day0.AddDate(0, 0, 4) }
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	// A mart served with uniqExact states switched to bitmaps: the next sync rebuilds it.
	m.Distinct = serving.DistinctBitmap
	if res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(res.Rebuilt) == 0 {
		t.Fatalf("switched to bitmaps: want a rebuild: %s %v", res.Summary(m.Name), err)
	}
	if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
		t.Fatalf("check after the switch: %v %v", drifts, err)
	}
	if err := c.Conn().Exec(ctx, "DROP TABLE "+ddl.Name(m, m.Table+ddl.IdsSuffix)+" SYNC"); err != nil {
		t.Fatal(err)
	}
	faulty := chtarget.WithFault(chtarget.NewClickHouse(c), func(_, step string) error {
		if step == failAt {
			return push.ErrFault
		}
		return nil
	})
	if _, err := gbsync.Sync(ctx, faulty, m, tbl, gbsync.Options{Now: clock}); !errors.Is(err, push.ErrFault) {
		t.Fatalf("the sync after the dictionary was dropped: want a rebuild that fails at %s, got %v", failAt, err)
	}
	// New keys on the last day: with the dictionary's first ids given again, they would
	// count as keys of the other days.
	last := days[len(days)-1]
	for i := range 50 {
		orders = append(orders, order{last, strp("DE"), "books", 100, fmt.Sprintf("new-customer-%d", i)})
	}
	tbl = writeGold(t, lh, goldRows(orders), days)
	res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
	if err != nil || len(res.Rebuilt) == 0 {
		t.Fatalf("want a rebuild: %s %v", res.Summary(m.Name), err)
	}
	if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
		t.Fatalf("check: %v %v", drifts, err)
	}
	set := map[string]bool{}
	for _, o := range orders {
		set[o.customer] = true
	}
	got := scalar[int64](t, c, fmt.Sprintf("SELECT %s FROM %s WHERE grouping_level = 'total'", ddl.FinalExpr(m, m.Measures[2]), ddl.Name(m, m.Table)))
	if got != int64(len(set)) {
		t.Fatalf("customers over %d days: clickhouse %d, orders %d", len(days), got, len(set))
	}
	if res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(res.Rebuilt) > 0 || len(res.Pushed) > 0 {
		t.Fatalf("the sync after: %s %v", res.Summary(m.Name), err)
	}
}

// TestBitmapDictionaryCompacts: when the hot window moves past days whose keys no other
// day has, the sync that drops them compacts the key dictionary to the ids the rows
// hold once it is sparse (it would otherwise keep every key ever served, and every push
// reads it), not before. New
// keys after that take new ids: check is clean, the distinct count over the served days
// exact.
func TestBitmapDictionaryCompacts(t *testing.T) {
	// A Memory database can neither EXCHANGE nor RENAME a table (what a non-Atomic
	// database does without): the dictionary is compacted by a mutation there.
	for _, engine := range []string{"", "Memory"} {
		t.Run("engine="+engine, func(t *testing.T) { testBitmapDictionaryCompacts(t, engine) })
	}
}

func testBitmapDictionaryCompacts(t *testing.T, engine string) {
	ctx := context.Background()
	chtest.Require(t)
	db := chtest.DatabaseOf(t, engine)
	c := client(t, db)
	lh := lakehousetest.Open(t)
	m := testMart(db, true) // a hot window of 10 days
	m.Distinct = serving.DistinctBitmap
	days := daysFrom(day0, 10)
	var orders []order
	for i, d := range days {
		for j := range 3000 { // keys of this day only
			orders = append(orders, order{d, strp("DE"), "books", 100, fmt.Sprintf("d%d-%d", i, j)})
		}
	}
	tbl := writeGold(t, lh, goldRows(orders), days)
	now := day0.AddDate(0, 0, 10)
	clock := func() time.Time { return now }
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	ids := ddl.Name(m, m.Table+ddl.IdsSuffix)
	// What the metrics report of the dictionary (goldbridge_clickhouse_dictionary_*):
	// its entries, and the bytes of its active parts.
	reported := func(want uint64) {
		t.Helper()
		s, err := chtarget.NewClickHouse(c).Storage(ctx, m)
		bytes := scalar[uint64](t, c, fmt.Sprintf("SELECT sum(bytes_on_disk) FROM system.parts WHERE database = '%s' AND table = '%s' AND active", db, m.Table+ddl.IdsSuffix))
		if err != nil || s.DictionaryKeys != int64(want) || s.DictionaryBytes != int64(bytes) || bytes == 0 {
			t.Fatalf("storage reported %+v %v; want %d dictionary keys in %d bytes", s, err, want, bytes)
		}
	}
	if n := scalar[uint64](t, c, "SELECT count() FROM "+ids); n != 30001 {
		t.Fatalf("dictionary: %d entries, want 30,000 keys and the generation", n)
	}
	reported(30001)
	// One day out: 27,000 ids held, 30,000 entries is not sparse (more than twice the
	// held ids plus 10,000); nothing removed.
	now = now.AddDate(0, 0, 1)
	res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
	if err != nil || len(res.Dropped) != 1 || res.Purged.DictionaryKeys != 0 {
		t.Fatalf("window move by a day: %s %v; want 1 day dropped and the dictionary kept", res.Summary(m.Name), err)
	}
	now = now.AddDate(0, 0, 7) // days 8 and 9 stay hot
	res, err = gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
	if err != nil || len(res.Dropped) != 7 || res.Purged.DictionaryKeys != 24000 {
		t.Fatalf("window move: %s %v; want 7 more days dropped and 24,000 hashes removed", res.Summary(m.Name), err)
	}
	if n := scalar[uint64](t, c, "SELECT count() FROM "+ids); n != 6001 {
		t.Fatalf("dictionary after the move: %d entries, want 6,001", n)
	}
	reported(6001)
	// A new day: 100 new customers and 100 of day 9's.
	day := day0.AddDate(0, 0, 10)
	var next []order
	for j := range 100 {
		next = append(next, order{day, strp("FR"), "games", 200, fmt.Sprintf("new-%d", j)}, order{day, strp("FR"), "games", 200, fmt.Sprintf("d9-%d", j)})
	}
	tbl = writeGold(t, lh, goldRows(next), []time.Time{day}) // in the window: days 8 to 17
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatal(err)
	}
	if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
		t.Fatalf("check: %v %v", drifts, err)
	}
	got := scalar[int64](t, c, fmt.Sprintf("SELECT %s FROM %s WHERE grouping_level = 'total'", ddl.FinalExpr(m, m.Measures[2]), ddl.Name(m, m.Table)))
	if got != 6100 { // days 8 and 9's 6,000 and the 100 new
		t.Fatalf("customers over the served days: %d, want 6,100", got)
	}
}
