package sync_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving"
	"goldbridge/serving/hot"
	"goldbridge/serving/hot/hotfake"
	gbsync "goldbridge/sync"
)

// ids lists the partition ids of planned pushes, sorted.
func ids(ps []gbsync.Planned) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.ID+":"+p.Reason)
	}
	slices.Sort(out)
	return out
}

func dayIDs(from time.Time, n int, reason string) []string {
	var out []string
	for _, d := range daysFrom(from, n) {
		id := d.Format("20060102")
		if reason != "" {
			id += ":" + reason
		}
		out = append(out, id)
	}
	return out
}

// TestSyncPlansAgainstTheFake drives Sync's planning and publication against the
// in-memory target (no server; it runs under -short): the first sync pushes the hot
// window, the next pushes nothing, a changed Gold day, a lost partition, a failed
// publication, a forced and a repair push, a rebuild the target asks for, the window
// moving on and a window left cold are each what Sync promises, and the recorded
// states always say what is served.
func TestSyncPlansAgainstTheFake(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	m := testMart("marts", false)
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	days := daysFrom(day0, 14)
	orders := genOrders(1, days, 400)
	tbl := writeGold(t, lh, goldRows(orders), days)
	now := day0.AddDate(0, 0, 14).Add(5 * time.Hour) // hot: May 5..14 (10 days)
	opt := gbsync.Options{Now: func() time.Time { return now }}
	fake := &hotfake.Target{}
	sync := func(step string, o gbsync.Options, tbl *table.Table) gbsync.Result {
		t.Helper()
		res, err := gbsync.Sync(ctx, fake, m, tbl, o)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return res
	}
	served := func(step string, want []string) {
		t.Helper()
		if got := fake.Memory.Served(m.Name); !slices.Equal(got, want) {
			t.Fatalf("%s: served %v, want %v", step, got, want)
		}
		st := fake.Memory.Partitions(m).States
		gold, err := gbsync.GoldPartitions(ctx, m, tbl)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gold {
			s, ok := st[g.ID]
			if ok != slices.Contains(want, g.ID) || ok && (s.SnapshotID != g.SnapshotID || s.Checksum != g.Checksum) {
				t.Fatalf("%s: partition %s recorded %+v (%v), gold %+v", step, g.ID, s, ok, g)
			}
		}
	}

	res := sync("first", opt, tbl)
	if got := ids(res.Pushed); !slices.Equal(got, dayIDs(day0.AddDate(0, 0, 4), 10, "new")) {
		t.Fatalf("first sync pushed %v", got)
	}
	served("first", dayIDs(day0.AddDate(0, 0, 4), 10, ""))

	if res = sync("again", opt, tbl); len(res.Pushed)+len(res.Dropped) != 0 || res.Unchanged != 10 {
		t.Fatalf("a sync with nothing new: %s", res.Summary(m.Name))
	}

	late := day0.AddDate(0, 0, 6)
	lateRows := rowsOfDay(goldRows(append(slices.Clone(orders), order{late, strp("DE"), "books", 12345, "late-customer"})), late)
	tbl = writeGold(t, lh, lateRows, []time.Time{late})
	if res = sync("late change", opt, tbl); !slices.Equal(ids(res.Pushed), []string{"20260507:changed"}) {
		t.Fatalf("a changed day: %v", ids(res.Pushed))
	}
	served("late change", dayIDs(day0.AddDate(0, 0, 4), 10, ""))

	fake.Memory.Lose(m.Name, "20260510")
	if res = sync("lost", opt, tbl); !slices.Equal(ids(res.Pushed), []string{"20260510:missing"}) {
		t.Fatalf("a lost partition: %v", ids(res.Pushed))
	}

	// A publication that fails leaves the recorded states as they were; the next sync
	// plans the same push again.
	fake.Memory.Lose(m.Name, "20260511")
	fail := errors.New("server gone")
	fake.PublishFunc = func(context.Context, *serving.Mart, *table.Table, hot.Batch) (hot.Published, error) {
		return hot.Published{}, fail
	}
	if _, err := gbsync.Sync(ctx, fake, m, tbl, opt); !errors.Is(err, fail) {
		t.Fatalf("a failed publication: %v", err)
	}
	fake.PublishFunc = nil
	if res = sync("after the failure", opt, tbl); !slices.Equal(ids(res.Pushed), []string{"20260511:missing"}) {
		t.Fatalf("after a failed publication: %v", ids(res.Pushed))
	}

	o := opt
	o.Only = []string{"20260508"}
	if res = sync("repair", o, tbl); !slices.Equal(ids(res.Pushed), []string{"20260508:repair"}) {
		t.Fatalf("repair: %v", ids(res.Pushed))
	}
	o = opt
	o.Force = true
	if res = sync("forced", o, tbl); len(res.Pushed) != 10 || res.Pushed[0].Reason != "forced" {
		t.Fatalf("forced: %v", ids(res.Pushed))
	}

	// The target finds its table differs from the definition: every hot partition is
	// pushed into a rebuilt table, and the result names the difference.
	change := hot.Change{Table: "daily_revenue_kpi", Column: "orders", Want: "SimpleAggregateFunction(sum, Int64)", Have: "Int32"}
	fake.EnsureFunc = func(context.Context, *serving.Mart, *table.Table, bool) (hot.Outcome, error) {
		return hot.Outcome{Changes: []hot.Change{change}, Rebuild: true}, nil
	}
	res = sync("rebuild", opt, tbl)
	fake.EnsureFunc = nil
	last := fake.Memory.Batches[len(fake.Memory.Batches)-1]
	if len(res.Pushed) != 10 || !last.Rebuild || !slices.Equal(res.Rebuilt, []hot.Change{change}) {
		t.Fatalf("rebuild: pushed %d, batch rebuild %v, rebuilt %v", len(res.Pushed), last.Rebuild, res.Rebuilt)
	}

	// Two days later the two oldest days leave the window: dropped, nothing pushed.
	now = now.AddDate(0, 0, 2)
	if res = sync("window moved", opt, tbl); len(res.Pushed) != 0 || !slices.Equal(res.Dropped, []string{"20260505", "20260506"}) {
		t.Fatalf("window moved: %s", res.Summary(m.Name))
	}
	served("window moved", dayIDs(day0.AddDate(0, 0, 6), 8, ""))

	// A month later nothing is hot: everything is dropped and Sync says why.
	now = now.AddDate(0, 1, 0)
	_, err := gbsync.Sync(ctx, fake, m, tbl, opt)
	var cold *gbsync.ColdError
	if !errors.As(err, &cold) || cold.Partitions != 14 || len(fake.Memory.Served(m.Name)) != 0 {
		t.Fatalf("cold: %v, served %v", err, fake.Memory.Served(m.Name))
	}
}

// TestCheckAgainstTheFake: Check compares Gold with what the target reads back. A
// target that reads back Gold's own statistics shows no drift; one whose rows of a
// level differ, or whose table's columns differ, or that serves a partition outside
// the window, shows exactly that drift.
func TestCheckAgainstTheFake(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	m := testMart("marts", false)
	days := daysFrom(day0, 14)
	tbl := writeGold(t, lh, goldRows(genOrders(2, days, 300)), days)
	now := day0.AddDate(0, 0, 14).Add(5 * time.Hour)
	opt := gbsync.Options{Now: func() time.Time { return now }}
	var tamper func(rb *hot.ReadBack)
	fake := &hotfake.Target{ReadBackFunc: func(ctx context.Context, m *serving.Mart, parts []hot.Partition) (hot.ReadBack, error) {
		stats, err := gbsync.GoldStats(ctx, m, tbl, parts)
		rb := hot.ReadBack{Stats: stats}
		if tamper != nil {
			tamper(&rb)
		}
		return rb, err
	}}
	if _, err := gbsync.Sync(ctx, fake, m, tbl, opt); err != nil {
		t.Fatal(err)
	}
	check := func() string {
		t.Helper()
		drifts, err := gbsync.Check(ctx, fake, m, tbl, opt)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range drifts {
			out = append(out, d.Partition+" "+d.Level+" "+d.Metric)
		}
		return strings.Join(out, "; ")
	}
	if got := check(); got != "" {
		t.Fatalf("check of an exact copy: %s", got)
	}
	tamper = func(rb *hot.ReadBack) { rb.Stats["20260509"]["total"].Rows++ }
	if got := check(); got != "20260509 total rows" {
		t.Fatalf("a level with one row more: %q", got)
	}
	tamper = func(rb *hot.ReadBack) {
		rb.Columns = []hot.Change{{Table: m.Table, Column: "orders", Want: "SimpleAggregateFunction(sum, Int64)", Have: "Int32"}}
	}
	if got := check(); strings.Count(got, "column orders") != 10 {
		t.Fatalf("a served column of another type: %q", got)
	}
	tamper = nil
	fake.Memory.Publish(m, hot.Batch{Push: []hot.Partition{{ID: "20260401", Rows: 3}}})
	if got := check(); got != "20260401  partition" {
		t.Fatalf("a partition outside the window: %q", got)
	}
}
