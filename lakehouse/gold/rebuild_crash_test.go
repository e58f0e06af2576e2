package gold

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
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chtest"
	gbsync "goldbridge/sync"
)

// Where TestRebuildCrash interrupts a rebuild: after the old table is dropped (before
// the new one is created), or in the first commit of the new one (its rows written).
const (
	crashAfterDrop    = "after_drop"
	crashBeforeCommit = "before_commit"
)

// crashOld and crashNew are the definitions of TestRebuildCrash's mart before and
// after the change: one more dimension, a narrower filter, one more measure.
func crashOld(table string) MartSpec {
	m := kpiMart(table)
	m.Checks = m.Checks[1:3] // unique_grain, consistency
	return m
}

func crashNew(table string) MartSpec {
	m := crashOld(table)
	m.Dims = append(slices.Clone(m.Dims), Dim{Name: "status", Type: typ("string")})
	m.Filter = `not is_deleted and status != "created"`
	m.Measures = append(slices.Clone(m.Measures), MeasureSpec{Name: "paid", Agg: "count_if", If: `status == "paid"`})
	return m
}

// crashHooks are the options that interrupt a rebuild at point: with an error, or, in a
// child process (kill), with SIGKILL.
func crashHooks(point string, kill bool, cancel context.CancelFunc) Options {
	stop := func() {
		if kill {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		cancel()
	}
	if point == crashAfterDrop {
		return Options{afterDrop: func() error {
			stop()
			return errInjected
		}}
	}
	return Options{beforeCommit: func(int) { stop() }}
}

var errInjected = errors.New("injected fault")

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
	loadAndSilver(t, lh, landing)
	db := chtest.Database(t)
	srv := chtest.Server(t)
	c, err := chconn.Open(ctx, chconn.Options{Addresses: []string{srv.TCPAddr()}, User: srv.User(), Password: srv.Password(), Database: db})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// sync pushes the Gold table of spec to the ClickHouse table served (checked clean).
	sync := func(spec MartSpec, served string) (*serving.Mart, error) {
		tbl, err := lh.LoadTable(ctx, spec.Table)
		if err != nil {
			return nil, err
		}
		m := &serving.Mart{Name: spec.Name, Database: db, Table: served, Grain: serving.Grain{As: spec.GrainAs, Unit: spec.GrainUnit},
			Grouping: spec.Grouping, PartitionBy: "day", HotWindow: 30 * 24 * time.Hour, Distinct: "uniqExact"}
		for _, d := range spec.Dims {
			m.Dimensions = append(m.Dimensions, serving.Dim{Name: d.Name})
		}
		for _, ms := range spec.Measures {
			m.Measures = append(m.Measures, serving.Measure{Name: ms.Name, Agg: ms.Agg.Served()})
		}
		if err := gbsync.FillTypes(m, tbl.Schema()); err != nil {
			return nil, err
		}
		if _, err := gbsync.Sync(ctx, c, m, tbl, gbsync.Options{Now: clock}); err != nil {
			return nil, err
		}
		if drifts, err := gbsync.Check(ctx, c, m, tbl, gbsync.Options{Now: clock}); err != nil || len(drifts) > 0 {
			t.Fatalf("check %s: %v %v", served, drifts, err)
		}
		return m, nil
	}
	fresh := crashNew("gold.crash_fresh")
	freshRes, err := Run(ctx, lh, fresh, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := goldRows(t, lh, fresh.Table)
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
	}{{crashAfterDrop, false}, {crashBeforeCommit, false}, {crashAfterDrop, true}, {crashBeforeCommit, true}} {
		name := fmt.Sprintf("%s_kill=%v", tc.point, tc.kill)
		t.Run(name, func(t *testing.T) {
			table, served := "gold.crash_"+tc.point+fmt.Sprint(tc.kill), "crash_"+tc.point+fmt.Sprint(tc.kill)
			if _, err := Run(ctx, lh, crashOld(table), Options{}); err != nil {
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
				_, err := Run(cctx, lh, crashNew(table), crashHooks(tc.point, false, cancel))
				cancel()
				if err == nil {
					t.Fatal("the interrupted rebuild returned nil")
				}
			}
			// The crashed state: no table, or an empty one built for the new definition.
			gt, err := lh.LoadTable(ctx, table)
			switch {
			case tc.point == crashAfterDrop:
				if !errors.Is(err, icecat.ErrNoSuchTable) {
					t.Fatalf("after the drop: load %s: %v, want no such table", table, err)
				}
				if _, err := sync(crashNew(table), served); !errors.Is(err, icecat.ErrNoSuchTable) {
					t.Fatalf("sync of the dropped table: %v, want no such table", err)
				}
			case err != nil:
				t.Fatal(err)
			default:
				if gt.CurrentSnapshot() != nil || Watermark(gt) != 0 || gt.Properties()[PropSpec] != crashNew(table).specJSON() {
					t.Fatalf("before the first commit: snapshot %v, watermark %d, spec %s", gt.CurrentSnapshot(), Watermark(gt), gt.Properties()[PropSpec])
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

			res, err := Run(ctx, lh, crashNew(table), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Full || !slices.Equal(res.Partitions, freshRes.Partitions) {
				t.Fatalf("rerun: full %v, partitions %v, want every one of %v", res.Full, res.Partitions, freshRes.Partitions)
			}
			if got := goldRows(t, lh, table); !slices.Equal(got, want) {
				t.Fatalf("gold after the rerun (%d rows) != fresh build (%d rows)\n%v\n%v", len(got), len(want), first(got, 3), first(want, 3))
			}
			m, err := sync(crashNew(table), served)
			if err != nil {
				t.Fatal(err)
			}
			if got := servedText(t, c, m); !slices.Equal(got, wantServed) {
				t.Fatalf("served after the rerun (%d rows) != fresh push (%d rows)\n%v\n%v", len(got), len(wantServed), first(got, 3), first(wantServed, 3))
			}
			if res, err := Run(ctx, lh, crashNew(table), Options{}); err != nil || res.SnapshotID != 0 {
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
	_, err = Run(context.Background(), lh, crashNew(os.Getenv("GOLD_CRASH_TABLE")), crashHooks(os.Getenv("GOLD_CRASH_POINT"), true, func() {}))
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
