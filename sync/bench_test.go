package sync_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	gosync "sync"
	"testing"
	"time"

	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	gbsync "goldbridge/sync"
)

// BenchmarkPush pushes 4 days × 250k Gold rows (SummingMergeTree mart) from Iceberg
// into the local ClickHouse, then measures ClickHouse's own bulk load of the same rows
// (Native-format bodies over HTTP, one stream per connection as the push uses) as the
// ceiling, and reports both and their ratio.
func BenchmarkPush(b *testing.B) {
	const perDay, nDays = 250_000, 4
	ctx := context.Background()
	db := chtest.Database(b)
	c := client(b, db)
	lh := lakehousetest.Open(b)
	m := testMart(db, false)
	days := daysFrom(day0, nDays)
	var rows []goldRow
	for _, d := range days {
		for i := range perDay {
			rows = append(rows, goldRow{day: d, country: strp(fmt.Sprintf("C%03d", i%200)), category: strp(fmt.Sprintf("k%d", i)),
				level: "detail", revenue: int64(i) * 7, orders: int64(i % 13)})
		}
	}
	tbl := writeGold(b, lh, rows, days)
	now := day0.AddDate(0, 0, nDays)
	clock := func() time.Time { return now }
	total := float64(perDay * nDays)

	var pushSec float64
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock, Force: true, Parallelism: 2, Log: benchLog(b)})
		if err != nil || res.Rows != int64(total) {
			b.Fatalf("push: %v rows %d", err, res.Rows)
		}
		pushSec += time.Since(start).Seconds()
	}
	b.StopTimer()
	pushRate := total * float64(b.N) / pushSec

	// Ceiling: the same rows as Native bodies, loaded by ClickHouse itself.
	ceil := ceilingRate(b, db, total)
	b.ReportMetric(pushRate, "push_rows/s")
	b.ReportMetric(ceil, "ch_bulk_rows/s")
	b.ReportMetric(pushRate/ceil, "ratio")

	// No-change sync time.
	start := time.Now()
	if res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(res.Pushed) != 0 {
		b.Fatalf("no-change sync: %v %v", res.Pushed, err)
	}
	b.ReportMetric(time.Since(start).Seconds()*1000, "nochange_sync_ms")
}

// BenchmarkPushDays pushes an AggregatingMergeTree mart shaped like the bench's orders
// mart: 120 day partitions, each a few detail rows carrying ~2000 distinct-key lists
// (forced sync, one batch; goldbridge builds the uniqExact states). The ceiling is
// ClickHouse's own load of exactly the rows the push wrote (two Native bodies over
// HTTP, one per half of the days, into a copy of <t>), as bench/run.sh measures it.
func BenchmarkPushDays(b *testing.B) {
	const nDays, perDay = 120, 2000
	ctx := context.Background()
	db := chtest.Database(b)
	c := client(b, db)
	lh := lakehousetest.Open(b)
	m := testMart(db, true)
	m.HotWindow = nDays * 24 * time.Hour
	days := daysFrom(day0, nDays)
	tbl := writeGold(b, lh, goldRows(genOrders(9, days, perDay)), days)
	now := day0.AddDate(0, 0, nDays)
	clock := func() time.Time { return now }

	var pushSec float64
	var rows int64
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock, Force: true, Parallelism: 2, Log: benchLog(b)})
		if err != nil || len(res.Pushed) != nDays {
			b.Fatalf("push: %v %d partitions", err, len(res.Pushed))
		}
		pushSec += time.Since(start).Seconds()
		rows = res.Rows
	}
	b.StopTimer()
	pushRate := float64(rows) * float64(b.N) / pushSec
	parts := scalar[uint64](b, c, fmt.Sprintf("SELECT count() FROM system.parts WHERE database = '%s' AND table = 'daily_revenue_kpi' AND active", db))

	ceil := ceilingRate(b, db, float64(rows))
	if n := scalar[uint64](b, c, fmt.Sprintf("SELECT count() FROM `%s`.ceiling", db)); n != uint64(rows) {
		b.Fatalf("ceiling loaded %d rows, the push streamed %d", n, rows)
	}
	b.ReportMetric(pushRate, "push_rows/s")
	b.ReportMetric(ceil, "ch_bulk_rows/s")
	b.ReportMetric(pushRate/ceil, "ratio")
	b.ReportMetric(float64(parts)/nDays, "parts/partition")
}

// BenchmarkNoChangeSync times a sync that has nothing to do over 180 hot day partitions
// (plan: Gold's partitions, the state rows and the live parts; ensure the DDL).
func BenchmarkNoChangeSync(b *testing.B) {
	const nDays = 180
	ctx := context.Background()
	db := chtest.Database(b)
	c := client(b, db)
	lh := lakehousetest.Open(b)
	m := testMart(db, true)
	m.HotWindow = nDays * 24 * time.Hour
	days := daysFrom(day0, nDays)
	tbl := writeGold(b, lh, goldRows(genOrders(11, days, 50)), days)
	now := day0.AddDate(0, 0, nDays)
	clock := func() time.Time { return now }
	if res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(res.Pushed) != nDays {
		b.Fatalf("first sync: %v %d", err, len(res.Pushed))
	}
	b.ResetTimer()
	for range b.N {
		res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
		if err != nil || len(res.Pushed) != 0 || res.Unchanged != nDays {
			b.Fatalf("no-change sync: %v %s", err, res.Summary(m.Name))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/sync")
}

// poster posts one statement (and its data) to the test server over HTTP.
func poster(b *testing.B) func(q string, body io.Reader) []byte {
	srv := chtest.Server(b)
	return func(q string, body io.Reader) []byte {
		req, err := http.NewRequest(http.MethodPost, srv.HTTPURL()+"/?"+url.Values{"query": {q}, "async_insert": {"0"}}.Encode(), body)
		if err != nil {
			b.Fatal(err)
		}
		req.SetBasicAuth(srv.User(), srv.Password())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			b.Fatalf("%s: %s", q, out)
		}
		return out
	}
}

// ceilingRate is ClickHouse's own load of the rows of <db>.daily_revenue_kpi, in
// rows/s: exported as two Native bodies (one per half of the days) and inserted over
// HTTP in parallel into a copy of the table, <db>.ceiling.
func ceilingRate(b *testing.B, db string, rows float64) float64 {
	post := poster(b)
	post(fmt.Sprintf("CREATE TABLE `%s`.ceiling AS `%s`.daily_revenue_kpi__staging", db, db), nil)
	var bodies [2][]byte
	for i := range bodies {
		bodies[i] = post(fmt.Sprintf("SELECT * FROM `%s`.daily_revenue_kpi WHERE toRelativeDayNum(report_date) %% 2 = %d ORDER BY report_date FORMAT Native", db, i), nil)
	}
	start := time.Now()
	var wg gosync.WaitGroup
	for i := range bodies {
		wg.Go(func() { post(fmt.Sprintf("INSERT INTO `%s`.ceiling FORMAT Native", db), bytes.NewReader(bodies[i])) })
	}
	wg.Wait()
	return rows / time.Since(start).Seconds()
}

// benchLog logs the push's step timings to stderr when BENCH_VERBOSE is set.
func benchLog(b *testing.B) *slog.Logger {
	if os.Getenv("BENCH_VERBOSE") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// BenchmarkCheckAndIncremental serves 120 days of an AggregatingMergeTree mart, then
// measures an incremental sync of 8 changed days (one exchange, 112 partitions carried
// over) and a row-exact check over the 120 partitions.
func BenchmarkCheckAndIncremental(b *testing.B) {
	const nDays, perDay = 120, 400
	ctx := context.Background()
	db := chtest.Database(b)
	c := client(b, db)
	lh := lakehousetest.Open(b)
	m := testMart(db, true)
	m.HotWindow = 200 * 24 * time.Hour
	days := daysFrom(day0, nDays)
	orders := genOrders(21, days, perDay)
	rows := goldRows(orders)
	tbl := writeGold(b, lh, rows, days)
	clock := func() time.Time { return day0.AddDate(0, 0, nDays) }
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
		b.Fatal(err)
	}
	var syncSec, checkSec float64
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		changed := days[i%10*8 : i%10*8+8]
		more := genOrders(uint64(100+i), changed, perDay)
		var next []goldRow
		for _, r := range goldRows(append(slices.Clone(orders), more...)) {
			if slices.ContainsFunc(changed, r.day.Equal) {
				next = append(next, r)
			}
		}
		tbl = writeGold(b, lh, next, changed)
		b.StartTimer()
		start := time.Now()
		res, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
		if err != nil || len(res.Pushed) != 8 {
			b.Fatalf("incremental: %s %v", res.Summary(m.Name), err)
		}
		syncSec += time.Since(start).Seconds()
		start = time.Now()
		drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
		if err != nil || len(drifts) > 0 {
			b.Fatalf("check: %v %v", drifts, err)
		}
		checkSec += time.Since(start).Seconds()
	}
	b.ReportMetric(syncSec/float64(b.N), "sync_8of120_s")
	b.ReportMetric(checkSec/float64(b.N), "check_120_s")
	b.ReportMetric(float64(len(rows)), "gold_rows")
}
