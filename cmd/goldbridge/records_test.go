package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoChangeRunLeavesClickHouseAlone: a run or sync with nothing new is answered by
// the push record and does not start the embedded ClickHouse; new data, a changed Gold,
// --force, a missing record (a crash between the push and the record) and a stale one
// all reach ClickHouse again, and Gold and ClickHouse end equal (issue 21).
func TestNoChangeRunLeavesClickHouseAlone(t *testing.T) {
	e := newForgetEnv(t)
	const started, answered = "started embedded clickhouse", "ClickHouse not reached"
	record := filepath.Join(e.state, "pushed", "daily_revenue_kpi.json")
	e.run("demo", "generate", "--events", "3000", "--seed", "5")
	if out := e.run("run"); !strings.Contains(out, started) || strings.Contains(out, answered) {
		t.Fatalf("first run did not start and push:\n%s", tail(out, 3000))
	}
	first, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(record); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record %v %v", fi, err)
	}
	answeredOnly := func(args ...string) {
		t.Helper()
		if out := e.run(args...); strings.Contains(out, started) || !strings.Contains(out, answered) {
			t.Fatalf("%s with nothing new reached ClickHouse:\n%s", strings.Join(args, " "), tail(out, 3000))
		}
	}
	reached := func(why string, args ...string) {
		t.Helper()
		if out := e.run(args...); !strings.Contains(out, started) || strings.Contains(out, answered) {
			t.Fatalf("%s: %s did not reach ClickHouse:\n%s", why, strings.Join(args, " "), tail(out, 3000))
		}
	}
	answeredOnly("run")
	answeredOnly("sync")
	reached("--force", "sync", "--force")
	answeredOnly("run")

	// New events: the run opens ClickHouse and pushes; the record moves on.
	gen := t.TempDir()
	e.run("demo", "generate", "--events", "500", "--seed", "6", "--out", gen)
	if err := os.Rename(filepath.Join(gen, "orders-00001.jsonl"), filepath.Join(e.landing(), "orders-later.jsonl")); err != nil {
		t.Fatal(err)
	}
	out := e.run("run")
	if !strings.Contains(out, started) || strings.Contains(out, answered) || strings.Contains(out, "pushed 0 partitions") {
		t.Fatalf("run with new events did not push:\n%s", tail(out, 3000))
	}
	answeredOnly("run")

	// A crash after the push and before the record: Begin had removed the record, or
	// (older layouts) the record of the state before stayed. Neither is trusted.
	if err := os.Remove(record); err != nil {
		t.Fatal(err)
	}
	reached("no record", "run")
	writeFile(t, record, string(first))
	reached("stale record", "sync")
	answeredOnly("sync")

	// Gold rebuilt (a new Gold commit): planned against ClickHouse again.
	e.run("gold", "--rebuild", "daily_revenue_kpi")
	reached("gold rebuilt", "sync")
	if out := e.run("check"); !strings.Contains(out, "check daily_revenue_kpi: no drift") {
		t.Fatalf("check:\n%s", tail(out, 3000))
	}
}

// TestColdRunLeavesClickHouseAlone: a clock-anchored mart whose Gold is all older than
// its hot window serves nothing, and the run fails saying so; the next runs with nothing
// new fail the same way from the push record, without starting the embedded ClickHouse,
// until --force plans against ClickHouse again (issue 21 goal 2).
func TestColdRunLeavesClickHouseAlone(t *testing.T) {
	e := newForgetEnv(t)
	const started, answered, cold = "started embedded clickhouse", "ClickHouse not reached", "nothing served"
	e.run("demo", "generate", "--events", "2000", "--seed", "5", "--end", "2020-06-30")
	fails := func(why string, reach bool, args ...string) {
		t.Helper()
		out, err := e.exec(args...)
		if err == nil || !strings.Contains(out, cold) || strings.Contains(out, started) != reach || strings.Contains(out, answered) == reach {
			t.Fatalf("%s: %s (reached ClickHouse: want %v): err %v\n%s", why, strings.Join(args, " "), reach, err, tail(out, 3000))
		}
	}
	fails("the first run", true, "run")
	fails("a run with nothing new", false, "run")
	fails("a sync with nothing new", false, "sync")
	fails("--force", true, "sync", "--force")
	fails("a sync after --force", false, "sync")
}
