package sync_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chlocal"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	"goldbridge/serving/push"
	gbsync "goldbridge/sync"
)

var crashNow = day0.AddDate(0, 0, 5)

// runPusher is the re-executed test binary: a forced sync of the mart, to be SIGKILLed.
func runPusher() int {
	ctx := context.Background()
	lh, err := catalog.Open(ctx, lakehousetest.Config(os.Getenv("GB_TEST_DIR")))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer lh.Close()
	tbl, err := lh.LoadTable(ctx, "gold.daily_revenue_kpi")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	db := os.Getenv("GB_TEST_DB")
	c, err := chconn.Open(ctx, chconn.Options{Addresses: []string{os.Getenv("GB_TEST_ADDR")}, User: os.Getenv("GB_TEST_USER"), Password: os.Getenv("GB_TEST_PASSWORD"), Database: db})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	batch, _ := strconv.Atoi(os.Getenv("GB_TEST_BATCH"))
	_, err = gbsync.Sync(ctx, chtarget.NewClickHouse(c), testMart(db, true), tbl, gbsync.Options{Now: func() time.Time { return crashNow }, Force: true, BatchRows: batch})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestSIGKILLTrials SIGKILLs a real pushing process at random points, 20 times; after
// each kill the next sync converges and check finds zero drift.
func TestSIGKILLTrials(t *testing.T) {
	ctx := context.Background()
	db := chtest.Database(t)
	c := client(t, db)
	srv := chtest.Server(t)
	addr := srv.TCPAddr()
	dir := t.TempDir()
	lh := lakehousetest.OpenDir(t, dir)
	m := testMart(db, true)
	days := daysFrom(day0, 5)
	clock := func() time.Time { return crashNow }
	r := rand.New(rand.NewPCG(7, 7))
	killedMidway, serverCrashes := 0, 0
	for trial := range 20 {
		orders := genOrders(uint64(100+trial), days, 3000)
		rows := goldRows(orders)
		tbl := writeGold(t, lh, rows, days)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "GB_TEST_PUSHER=1", "GB_TEST_DIR="+dir, "GB_TEST_DB="+db,
			"GB_TEST_ADDR="+addr, "GB_TEST_USER="+srv.User(), "GB_TEST_PASSWORD="+srv.Password(), "GB_TEST_BATCH=200")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(r.IntN(1500)) * time.Millisecond)
		_ = cmd.Process.Kill()
		if err := cmd.Wait(); err != nil {
			killedMidway++
		}
		// libchdb 26.7 sometimes aborts (SIGABRT) when a client dies mid-query; the
		// promise must hold across that too: restart it like an operator would.
		time.Sleep(500 * time.Millisecond) // the abort follows the client's death shortly
		if chlocal.Ping(ctx, srv.HTTPURL()) != nil {
			serverCrashes++
			if err := srv.Restart(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
			t.Fatalf("trial %d: converge: %v", trial, err)
		}
		drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock})
		if err != nil || len(drifts) > 0 {
			rows, _ := c.Conn().Query(ctx, "SELECT table, partition_id, sum(rows), groupArray(name) FROM system.parts WHERE database = currentDatabase() AND active GROUP BY ALL ORDER BY ALL")
			for rows.Next() {
				var tb, p string
				var n uint64
				var names []string
				_ = rows.Scan(&tb, &p, &n, &names)
				t.Logf("part %s %s %d %v", tb, p, n, names)
			}
			st, _ := push.States(ctx, c, m)
			t.Logf("states %v", st)
			t.Fatalf("trial %d: drift %v %v", trial, len(drifts), err)
		}
		if got := finalRows(t, c, m); !slices.Equal(got, goldStrings(rows, m, day0)) {
			t.Fatalf("trial %d: _final differs from Gold", trial)
		}
	}
	t.Logf("%d of 20 pushers killed before they finished; the ClickHouse server aborted %d times and was restarted", killedMidway, serverCrashes)
	if killedMidway == 0 {
		t.Fatal("no pusher was killed mid-push: the trial proves nothing")
	}
}

// TestServerKillMidPush kills the ClickHouse server during a push and restarts it;
// the next sync converges with zero drift.
func TestServerKillMidPush(t *testing.T) {
	ctx := context.Background()
	db := chtest.Database(t)
	c := client(t, db)
	lh := lakehousetest.Open(t)
	m := testMart(db, true)
	days := daysFrom(day0, 5)
	clock := func() time.Time { return crashNow }
	rows := goldRows(genOrders(5, days, 3000))
	tbl := writeGold(t, lh, rows, days)
	srv := chtest.Server(t)
	done := make(chan error, 1)
	go func() {
		_, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock, BatchRows: 200})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("sync during the kill: %v", <-done)
	if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
		t.Fatalf("converge: %v", err)
	}
	if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
		t.Fatalf("drift %v %v", drifts, err)
	}
	if got := finalRows(t, c, m); !slices.Equal(got, goldStrings(rows, m, day0)) {
		t.Fatal("_final differs from Gold")
	}
}
