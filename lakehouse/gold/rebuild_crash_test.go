package gold_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	icecat "github.com/apache/iceberg-go/catalog"

	"goldbridge/demo"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chtarget"
	"goldbridge/serving/chtest"
	gbsync "goldbridge/sync"
)

// crashOld and crashNew are the definitions of TestRebuildCrash's mart before and
// after the change: one more dimension, a narrower filter, one more measure.
func crashOld(table string) gold.MartSpec {
	m := gold.KPIMart(table)
	m.Checks = m.Checks[1:3] // unique_grain, consistency
	return m
}

func crashNew(table string) gold.MartSpec {
	m := crashOld(table)
	m.Dims = append(slices.Clone(m.Dims), gold.Dim{Name: "status", Type: gold.Typ("string")})
	m.Filter = `not is_deleted and status != "created"`
	m.Measures = append(slices.Clone(m.Measures), gold.MeasureSpec{Name: "paid", Agg: "count_if", If: `status == "paid"`})
	return m
}

// TestRebuildCrash: a rebuild for a changed definition interrupted between dropping
// the Gold table and creating it again, or between the create and its first commit,
// by an error or by SIGKILL, leaves no table or an empty one for the new definition,
// and no watermark: the next run computes every partition (not "0 partitions" over an
// empty table) and equals a fresh build of the new definition; a sync of the crashed
// state serves it as it is, and the sync after the rerun equals a fresh push of the
// new definition, with check clean.
func TestRebuildCrash(t *testing.T) {
	chtest.Require(t)
	ctx := context.Background()
	state, landing := t.TempDir(), t.TempDir()
	end := time.Date(2026, 5, 31, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return end.AddDate(0, 0, 1) }
	if _, err := demo.Generate(ctx, demo.Options{OutDir: landing, Events: 3000, Seed: 21, End: end, Days: 5}); err != nil {
		t.Fatal(err)
	}
	lh := lakehousetest.OpenDir(t, state)
	gold.LoadAndSilver(t, lh, landing)
	db := chtest.Database(t)
	srv := chtest.Server(t)
	c, err := chconn.Open(ctx, chconn.Options{Addresses: []string{srv.TCPAddr()}, User: srv.User(), Password: srv.Password(), Database: db})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// sync pushes the Gold table of spec to the ClickHouse table served (checked clean).
	sync := func(spec gold.MartSpec, served string) (*serving.Mart, error) {
		tbl, err := lh.LoadTable(ctx, spec.Table)
		if err != nil {
			return nil, err
		}
		m, err := serving.NewMart(spec, serving.Target{Database: db, Table: served, PartitionBy: "day", HotWindow: 30 * 24 * time.Hour, Distinct: "uniqExact"})
		if err != nil {
			return nil, err
		}
		if _, err := gbsync.Sync(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil {
			return nil, err
		}
		if drifts, err := gbsync.Check(ctx, chtarget.NewClickHouse(c), m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
			t.Fatalf("check %s: %v %v", served, drifts, err)
		}
		return m, nil
	}
	fresh := crashNew("gold.crash_fresh")
	freshRes, err := gold.Run(ctx, lh, fresh, gold.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := gold.GoldRows(t, lh, fresh.Table)
	freshServed, err := sync(fresh, "crash_fresh")
	if err != nil {
		t.Fatal(err)
	}
	wantServed := servedText(t, c, freshServed)
	if len(want) == 0 || len(wantServed) == 0 {
		t.Fatal("the fresh build is empty: the test would prove nothing")
	}

	for _, tc := range []struct {
		point string
		kill  bool
	}{{gold.CrashAfterDrop, false}, {gold.CrashBeforeCommit, false}, {gold.CrashAfterDrop, true}, {gold.CrashBeforeCommit, true}} {
		name := fmt.Sprintf("%s_kill=%v", tc.point, tc.kill)
		t.Run(name, func(t *testing.T) {
			table, served := "gold.crash_"+tc.point+fmt.Sprint(tc.kill), "crash_"+tc.point+fmt.Sprint(tc.kill)
			if _, err := gold.Run(ctx, lh, crashOld(table), gold.Options{}); err != nil {
				t.Fatal(err)
			}
			if _, err := sync(crashOld(table), served); err != nil {
				t.Fatal(err)
			}
			if tc.kill {
				cmd := exec.Command(os.Args[0], "-test.run=^TestRebuildCrashChild$")
				cmd.Env = append(os.Environ(), "GOLD_CRASH_STATE="+state, "GOLD_CRASH_TABLE="+table, "GOLD_CRASH_POINT="+tc.point)
				out, err := cmd.CombinedOutput()
				ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
				if err == nil || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
					t.Fatalf("child should die by SIGKILL, got %v\n%s", err, out)
				}
			} else {
				cctx, cancel := context.WithCancel(ctx)
				_, err := gold.Run(cctx, lh, crashNew(table), gold.CrashHooks(tc.point, false, cancel))
				cancel()
				if err == nil {
					t.Fatal("the interrupted rebuild returned nil")
				}
			}
			// The crashed state: no table, or an empty one built for the new definition.
			gt, err := lh.LoadTable(ctx, table)
			switch {
			case tc.point == gold.CrashAfterDrop:
				if !errors.Is(err, icecat.ErrNoSuchTable) {
					t.Fatalf("after the drop: load %s: %v, want no such table", table, err)
				}
				if _, err := sync(crashNew(table), served); !errors.Is(err, icecat.ErrNoSuchTable) {
					t.Fatalf("sync of the dropped table: %v, want no such table", err)
				}
			case err != nil:
				t.Fatal(err)
			default:
				if gt.CurrentSnapshot() != nil || gold.Watermark(gt) != 0 || gt.Properties()[gold.PropSpec] != crashNew(table).Definition() {
					t.Fatalf("before the first commit: snapshot %v, watermark %d, spec %s", gt.CurrentSnapshot(), gold.Watermark(gt), gt.Properties()[gold.PropSpec])
				}
				// A sync of the empty table serves it as it is: nothing, check clean.
				m, err := sync(crashNew(table), served)
				if err != nil {
					t.Fatalf("sync of the empty table: %v", err)
				}
				if got := servedText(t, c, m); len(got) != 0 {
					t.Fatalf("the empty Gold table serves %d rows", len(got))
				}
			}

			res, err := gold.Run(ctx, lh, crashNew(table), gold.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Full || !slices.Equal(res.Partitions, freshRes.Partitions) {
				t.Fatalf("rerun: full %v, partitions %v, want every one of %v", res.Full, res.Partitions, freshRes.Partitions)
			}
			if got := gold.GoldRows(t, lh, table); !slices.Equal(got, want) {
				t.Fatalf("gold after the rerun (%d rows) != fresh build (%d rows)\n%v\n%v", len(got), len(want), gold.First(got, 3), gold.First(want, 3))
			}
			m, err := sync(crashNew(table), served)
			if err != nil {
				t.Fatal(err)
			}
			if got := servedText(t, c, m); !slices.Equal(got, wantServed) {
				t.Fatalf("served after the rerun (%d rows) != fresh push (%d rows)\n%v\n%v", len(got), len(wantServed), gold.First(got, 3), gold.First(wantServed, 3))
			}
			if res, err := gold.Run(ctx, lh, crashNew(table), gold.Options{}); err != nil || res.SnapshotID != 0 {
				t.Fatalf("converged run: %+v %v", res, err)
			}
		})
	}
}

// TestRebuildCrashChild is the process TestRebuildCrash SIGKILLs in a rebuild.
func TestRebuildCrashChild(t *testing.T) {
	state := os.Getenv("GOLD_CRASH_STATE")
	if state == "" {
		t.Skip("helper process of TestRebuildCrash")
	}
	lh, err := catalog.Open(context.Background(), lakehousetest.Config(state))
	if err != nil {
		t.Fatal(err)
	}
	_, err = gold.Run(context.Background(), lh, crashNew(os.Getenv("GOLD_CRASH_TABLE")), gold.CrashHooks(os.Getenv("GOLD_CRASH_POINT"), true, func() {}))
	t.Fatalf("not killed: %v", err)
}

// servedText reads <t>_final without _calculated_at (the Gold tables' differ), one
// tab-separated line per row, sorted.
func servedText(t *testing.T, c *chconn.Client, m *serving.Mart) []string {
	t.Helper()
	out := chtest.Strings(t, c.Conn(), fmt.Sprintf("SELECT formatRow('TabSeparated', * EXCEPT (%s)) FROM %s.%s",
		"_calculated_at", serving.Q(m.Database), serving.Q(m.Table+"_final")))
	slices.Sort(out)
	return out
}
