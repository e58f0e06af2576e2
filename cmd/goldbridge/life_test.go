package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/serving/chlocal"
)

// TestCronLifeStaysBounded is issue 36's acceptance in CI's size: the orders example run
// from cron, one landing file of 300 events per `run`, 30 times, with maintenance
// thresholds small enough that every step fires, against a state dir that got the same
// 30 files in one run. Afterwards every lake table holds the one-shot's rows, `check` is
// clean on both, and what a run reads or leaves behind is bounded: live data files ≤ 2×
// the one-shot's, the files on disk flat over the runs, snapshots and metadata files
// within the retention, and the embedded ClickHouse's part directories ≤ 3× the one-shot's.
func TestCronLifeStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs the chain with the embedded ClickHouse (skipped with -short)")
	}
	if _, err := chlocal.LibPath(); err != nil {
		t.Fatal(err)
	}
	const runs, events = 30, 300
	bin := buildGoldbridge(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "pipeline.yaml")
	writeOrdersConfig(t, cfgPath, func(cfg map[string]any) {
		cfg["maintenance"] = map[string]any{"retain_age": "0s", "retain_min": 2, "max_files": 3, "max_delete_files": 3,
			"max_manifests": 3, "metadata_versions": 3}
	})
	// The one-shot lake does not maintain: it is the baseline. (Its config's retain_min 1
	// serves goldbridge maintain by hand on the soaked lake, at the end.)
	oneCfg := filepath.Join(dir, "oneshot.yaml")
	writeOrdersConfig(t, oneCfg, func(cfg map[string]any) {
		cfg["maintenance"] = map[string]any{"enabled": false, "retain_age": "0s", "retain_min": 1}
	})
	gen := filepath.Join(dir, "gen")
	mustRun(t, bin, "--state-dir", filepath.Join(dir, "g"), "demo", "generate", "--events", strconv.Itoa(runs*events),
		"--files", strconv.Itoa(runs), "--seed", "5", "--end", time.Now().UTC().Format(time.DateOnly), "--days", "30", "--out", gen)
	files, _ := filepath.Glob(filepath.Join(gen, "orders-*.jsonl"))
	slices.Sort(files)
	if len(files) != runs {
		t.Fatalf("%d files generated", len(files))
	}
	soaked, oneshot := filepath.Join(dir, "soaked"), filepath.Join(dir, "oneshot")
	land := func(state, f string) {
		t.Helper()
		d := filepath.Join(state, "landing", "orders")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(d, filepath.Base(f))
		if err := os.Link(f, p); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Minute) // past settle
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	gb := func(state string, args ...string) string {
		c := cfgPath
		if state == oneshot {
			c = oneCfg
		}
		return mustRun(t, bin, append([]string{"-c", c, "--state-dir", state, "--log-level", "warn"}, args...)...)
	}
	fired := map[string]bool{}
	lakeTables := []string{"bronze.orders", "silver.orders", "silver.orders_quarantine", "gold.daily_revenue_kpi"}
	onDisk := map[string][]int64{} // per table, the files under data/ (data and delete files) after each run
	for _, f := range files {
		land(soaked, f)
		out := gb(soaked, "run")
		for _, ident := range lakeTables {
			onDisk[ident] = append(onDisk[ident], dataFilesOnDisk(t, soaked, ident))
		}
		for _, l := range strings.Split(out, "\n") {
			if m := regexp.MustCompile(`^maintain (\S+): (\d+) snapshots expired .*\), (\d+) files compacted into \d+ \((\d+) delete files removed\), manifests (\d+) -> (\d+)`).FindStringSubmatch(l); m != nil {
				fired["expire"] = fired["expire"] || m[2] != "0"
				fired["compact "+m[1]] = fired["compact "+m[1]] || m[3] != "0"
				fired["manifests"] = fired["manifests"] || m[5] != m[6]
			}
		}
	}
	for _, f := range files {
		land(oneshot, f)
	}
	gb(oneshot, "run")
	for _, step := range []string{"expire", "compact bronze.orders", "compact silver.orders", "compact silver.orders_quarantine", "manifests"} {
		if !fired[step] {
			t.Errorf("maintenance step %q never fired in %d runs (%v)", step, runs, fired)
		}
	}
	for _, state := range []string{soaked, oneshot} {
		gb(state, "check") // exit 4 on drift fails the test
	}

	ctx := context.Background()
	open := func(state string) *catalog.Lakehouse {
		lh, err := catalog.Open(ctx, catalog.Config{Type: "sql", URI: filepath.Join(state, "catalog.db"), Warehouse: "file://" + filepath.Join(state, "warehouse")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lh.Close() })
		return lh
	}
	lhS, lhO := open(soaked), open(oneshot)
	for _, ident := range lakeTables {
		got, want := allRows(t, lhS, ident), allRows(t, lhO, ident)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %d rows after %d one-file runs, %d in the one-shot lake", ident, len(got), runs, len(want))
		}
		st, err := stats(ctx, lhS, ident)
		if err != nil {
			t.Fatal(err)
		}
		one, err := stats(ctx, lhO, ident)
		if err != nil {
			t.Fatal(err)
		}
		metaFiles := metadataFilesOnDisk(t, soaked, ident)
		// What a run leaves on disk does not grow with the runs: the most files of the last
		// 8 runs are at most those of runs 8-15 and a half (compaction cycles make it
		// oscillate; without expiry it grows by a run's files each run).
		d := onDisk[ident]
		early, late := slices.Max(d[7:15]), slices.Max(d[runs-8:])
		t.Logf("%s: live files %d (one-shot %d), files on disk per run %v, snapshots %d, metadata files %d, manifests %d+%d",
			ident, st.DataFiles, one.DataFiles, d, st.Snapshots, metaFiles, st.DataManifests, st.DeleteManifests)
		if st.DataFiles > 2*one.DataFiles || late > early+early/2+2 || st.Snapshots > 6 || metaFiles > 3+4 {
			t.Errorf("%s after %d runs: live data files %d (one-shot %d), files on disk up to %d in the last runs (%d in runs 8-15), snapshots %d, metadata files %d",
				ident, runs, st.DataFiles, one.DataFiles, late, early, st.Snapshots, metaFiles)
		}
	}
	// By hand, with retain_min 1: the soaked lake keeps one snapshot, its rows stay.
	out := mustRun(t, bin, "-c", oneCfg, "--state-dir", soaked, "--log-level", "warn", "maintain", "silver.orders")
	if !regexp.MustCompile(`(?m)^maintain silver.orders: [1-9]\d* snapshots expired \(1 kept`).MatchString(out) {
		t.Errorf("goldbridge maintain silver.orders with retain_min 1:\n%s", out)
	}
	if got, want := allRows(t, lhS, "silver.orders"), allRows(t, lhO, "silver.orders"); !slices.Equal(got, want) {
		t.Error("goldbridge maintain changed silver.orders's rows")
	}
	if s, o := partDirs(t, soaked), partDirs(t, oneshot); s > 3*o {
		t.Errorf("the embedded ClickHouse holds %d part directories after %d runs, the one-shot's %d", s, runs, o)
	}
}

func stats(ctx context.Context, lh *catalog.Lakehouse, ident string) (catalog.TableStats, error) {
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		return catalog.TableStats{}, err
	}
	return catalog.Stats(ctx, tbl)
}

// allRows renders a table's rows, read by iceberg-go, without what a run stamps (ids,
// times) or where a file was landed.
func allRows(t *testing.T, lh *catalog.Lakehouse, ident string) []string {
	t.Helper()
	ctx := context.Background()
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	skip := map[string]bool{bronze.ColEventID: true, bronze.ColBatchID: true, bronze.ColSourceTS: true,
		"_run_id": true, "_silver_updated_ts": true, "quarantine_ts": true, "_ingest_ts": true, "_calculated_at": true}
	var out []string
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		for i := range int(rec.NumRows()) {
			var b strings.Builder
			for c, f := range rec.Schema().Fields() {
				if skip[f.Name] {
					continue
				}
				v := rec.Column(c).ValueStr(i)
				if f.Name == bronze.ColFile {
					v = filepath.Base(v)
				}
				fmt.Fprintf(&b, "%s=%s|", f.Name, v)
			}
			out = append(out, b.String())
		}
		rec.Release()
	}
	slices.Sort(out)
	return out
}

func tableDir(state, ident string) string {
	ns, name, _ := strings.Cut(ident, ".")
	return filepath.Join(state, "warehouse", ns+".db", name)
}

func dataFilesOnDisk(t *testing.T, state, ident string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(filepath.Join(tableDir(state, ident), "data"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func metadataFilesOnDisk(t *testing.T, state, ident string) int {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(tableDir(state, ident), "metadata", "*.metadata.json"))
	return len(m)
}

// partDirs counts the MergeTree part directories under the embedded ClickHouse's data
// directory (all_1_1_0, 20261130_3_3_0, ...).
func partDirs(t *testing.T, state string) int {
	t.Helper()
	re := regexp.MustCompile(`^[A-Za-z0-9-]+_\d+_\d+_\d+(_\d+)?$`)
	n := 0
	err := filepath.WalkDir(filepath.Join(state, "clickhouse"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil // a part being removed meanwhile
		}
		if d.IsDir() && re.MatchString(d.Name()) {
			n++
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
