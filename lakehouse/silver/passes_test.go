package silver

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"goldbridge/demo"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// oracleFullBuild is the oracle's accounting of a first run over every line of dir
// (nothing stored yet): each valid line is the key's newest version, an older version
// (superseded) or a payload the key already had (a duplicate).
func oracleFullBuild(t *testing.T, dir string) Counts {
	t.Helper()
	var c Counts
	payloads := map[string]map[string]bool{} // key -> distinct valid payloads
	oracleLines(t, dir, func(line []byte, v oracleVersion, ok bool) {
		c.Read++
		if !ok {
			c.Quarantined++
			return
		}
		if payloads[v.id] == nil {
			payloads[v.id] = map[string]bool{}
		}
		if payloads[v.id][string(line)] {
			c.Duplicates++
		}
		payloads[v.id][string(line)] = true
	})
	rows, _ := oracle(t, dir)
	c.Current, c.Inserted = int64(len(rows)), int64(len(rows))
	for _, r := range rows {
		if strings.HasSuffix(r, "|true") {
			c.Deleted++
		}
	}
	for _, ps := range payloads {
		c.Superseded += int64(len(ps)) - 1
	}
	return c
}

// TestPassesEqualOracle builds Silver in several passes over key groups (a PassRows far
// below the runs' Bronze rows): a full build, then incremental runs with updates, late
// events and duplicates against the stored versions. Silver, the quarantine and the
// counts must be the oracle's, each run one Silver commit.
func TestPassesEqualOracle(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opt      Options
		restarts [3]int // of each run
	}{
		{"pass_rows", Options{PassRows: 3000}, [3]int{}},
		// A byte bound below what any pass holds: every run stops in its first pass
		// and starts again at the groups' cap, where it is never stopped.
		{"pass_bytes", Options{PassRows: -1, PassBytes: 1}, [3]int{1, 1, 1}},
		// A run in three passes whose second pass holds too much: it stops after the
		// first pass wrote its files (which must be deleted) and starts again in more.
		{"pass_bytes in the second pass", Options{PassRows: 3400, PassBytes: 1 << 40, overPass: overOnce(1)}, [3]int{1, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) { testPassesEqualOracle(t, tc.opt, tc.restarts) })
	}
}

// overOnce is an Options.overPass that makes the first pass of group g it sees hold
// too much, and no other.
func overOnce(g int) func(int) bool {
	done := false
	return func(group int) bool {
		if group != g || done {
			return false
		}
		done = true
		return true
	}
}

func testPassesEqualOracle(t *testing.T, opt Options, restarts [3]int) {
	ctx := context.Background()
	all := t.TempDir()
	if _, err := demo.Generate(ctx, demo.Options{OutDir: all, Events: 30000, Seed: 11, Files: 3, End: time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(all, "*.jsonl"))
	sort.Strings(files)
	spec := ordersSpec()
	spec.Buckets = 16 // room for several groups of whole buckets
	dir := t.TempDir()
	lh := lakehousetest.OpenDir(t, dir)
	landing := t.TempDir()
	var total Counts
	for i, f := range files {
		if err := os.Rename(f, filepath.Join(landing, filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
		ingest(t, lh, landing)
		res, err := Run(ctx, lh, spec, "bronze.orders", opt)
		if err != nil {
			t.Fatal(err)
		}
		if res.Passes < 3 {
			t.Fatalf("run %d built Silver in %d passes (%d restarts), want at least 3", i, res.Passes, res.Restarts)
		}
		if res.Restarts != restarts[i] {
			t.Fatalf("run %d started again %d times, want %d", i, res.Restarts, restarts[i])
		}
		noStrayFiles(t, lh, dir, spec.Table, spec.QuarantineTable)
		c := res.Counts
		if i == 0 {
			if want := oracleFullBuild(t, landing); c != want {
				t.Fatalf("full build counts\n %+v, oracle\n %+v", c, want)
			}
		}
		if c.Current+c.Superseded+c.Duplicates+c.Quarantined != c.Read || c.Read != 10000 {
			t.Fatalf("run %d counts do not add up: %+v", i, c)
		}
		total.Quarantined += c.Quarantined
		total.Updated += c.Updated
		total.Superseded += c.Superseded
		total.Duplicates += c.Duplicates
		tbl, _ := lh.LoadTable(ctx, spec.Table)
		if n := len(tbl.Metadata().Snapshots()); n != i+1 {
			t.Fatalf("after run %d silver has %d snapshots, want one per run", i, n)
		}
	}
	if total.Updated == 0 || total.Superseded == 0 || total.Duplicates == 0 {
		t.Fatalf("the stream did not exercise updates, late events and duplicates across runs: %+v", total)
	}
	want, wantQ := oracle(t, landing)
	got := silverRows(t, lh)
	if len(got) != len(want) {
		t.Errorf("silver has %d keys, oracle %d", len(got), len(want))
	}
	diffs := 0
	for k, w := range want {
		if got[k] != w && diffs < 10 {
			diffs++
			t.Errorf("key %s:\n silver %s\n oracle %s", k, got[k], w)
		}
	}
	if int(total.Quarantined) != wantQ {
		t.Errorf("quarantined %d, oracle %d", total.Quarantined, wantQ)
	}
	q := tableRows(t, lh, spec.QuarantineTable)
	if len(q) != wantQ {
		t.Errorf("quarantine table has %d rows, oracle %d", len(q), wantQ)
	}
	ids := colValues(q, QColEventID)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("bronze event %s quarantined twice", id)
		}
		seen[id] = true
	}
}

// noStrayFiles fails when a data file under dir's warehouse for the tables is in none
// of their snapshots (a stopped pass must delete what it wrote).
func noStrayFiles(t *testing.T, lh *catalog.Lakehouse, dir string, tables ...string) {
	t.Helper()
	ctx := context.Background()
	live := map[string]bool{}
	for _, ident := range tables {
		tbl, err := lh.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		for _, snap := range tbl.Metadata().Snapshots() {
			for _, e := range manifestEntries(t, tbl, &snap, false) {
				live[filepath.Base(e.DataFile().FilePath())] = true
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "warehouse", "silver.db", "*", "data", "*", "*.parquet"))
	more, _ := filepath.Glob(filepath.Join(dir, "warehouse", "silver.db", "*", "data", "*.parquet"))
	files = append(files, more...)
	if len(files) == 0 {
		t.Fatal("no Silver data file found on disk: the check would prove nothing")
	}
	for _, f := range files {
		if !live[filepath.Base(f)] {
			t.Errorf("%s is on disk but in no snapshot", f)
		}
	}
}

// TestPassesAreWholeBuckets checks that the passes split the keys by whole buckets:
// a full build in passes writes as many data files (one per bucket) as in one pass.
func TestPassesAreWholeBuckets(t *testing.T) {
	ctx := context.Background()
	landing := t.TempDir()
	if _, err := demo.Generate(ctx, demo.Options{OutDir: landing, Events: 6000, Seed: 3, End: time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	files := map[int]int{} // passes -> data files
	for _, passRows := range []int64{-1, 1000} {
		lh := lakehousetest.Open(t)
		ingest(t, lh, landing)
		spec := ordersSpec()
		spec.Buckets = 16
		res, err := Run(ctx, lh, spec, "bronze.orders", Options{PassRows: passRows})
		if err != nil {
			t.Fatal(err)
		}
		tbl, _ := lh.LoadTable(ctx, spec.Table)
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil {
			t.Fatal(err)
		}
		files[res.Passes] = len(tasks)
	}
	if len(files) != 2 || files[1] == 0 {
		t.Fatalf("passes -> files %v: want one pass and several", files)
	}
	for p, n := range files {
		if n != files[1] {
			t.Errorf("%d passes wrote %d data files, one pass %d: a bucket was split across passes", p, n, files[1])
		}
	}
}
