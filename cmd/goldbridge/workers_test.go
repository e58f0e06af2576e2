package main

import (
	"context"
	"database/sql"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/lease"
)

// workersConfig is examples/orders.yaml with a second mart, both unserved (each worker
// would otherwise serve its own embedded ClickHouse), on the given catalog and warehouse,
// reading the shared landing directory, then changed by more.
func workersConfig(t *testing.T, path, catalogURI, warehouse, landing string, more ...func(cfg map[string]any)) {
	t.Helper()
	writeOrdersConfig(t, path, func(cfg map[string]any) {
		lh := cfg["lakehouse"].(map[string]any)
		lh["catalog"] = map[string]any{"type": "sql", "uri": catalogURI}
		lh["warehouse"] = warehouse
		cfg["sources"].(map[string]any)["orders_landing"].(map[string]any)["path"] = landing
		marts := cfg["marts"].(map[string]any)
		daily := marts["daily_revenue_kpi"].(map[string]any)
		daily["serving"] = map[string]any{"enabled": false}
		byCountry := maps.Clone(daily)
		byCountry["table"] = "gold.revenue_by_country"
		byCountry["dimensions"] = []string{"country"}
		byCountry["grouping"] = "none"
		byCountry["checks"] = nil
		marts["revenue_by_country"] = byCountry
		delete(cfg, "schedules")
		for _, edit := range more {
			edit(cfg)
		}
	})
}

// sharedEnv is a PostgreSQL catalog and a warehouse that workers with their own state
// dirs (dir/<name>) share, over generated landing files.
type sharedEnv struct {
	t                       *testing.T
	pg                      *lakehousetest.Postgres
	dir, landing, warehouse string
	cfg                     string
}

func newSharedEnv(t *testing.T, events int, seed int) *sharedEnv {
	t.Helper()
	e := &sharedEnv{t: t, pg: lakehousetest.StartPostgres(t), dir: t.TempDir()}
	e.landing = filepath.Join(e.dir, "landing")
	if code, _, errs := runCLI(t, "--state-dir", e.dir, "demo", "generate", "--out", e.landing,
		"--events", strconv.Itoa(events), "--seed", strconv.Itoa(seed)); code != exitOK {
		t.Fatalf("demo generate: exit %d\n%s", code, errs)
	}
	e.warehouse = "file://" + filepath.Join(e.dir, "shared-warehouse")
	e.cfg = filepath.Join(e.dir, "shared.yaml")
	workersConfig(t, e.cfg, e.pg.URI(true), e.warehouse, e.landing)
	return e
}

// worker runs one goldbridge command as the worker with state dir dir/<name>.
func (e *sharedEnv) worker(name string, args ...string) (int, string) {
	code, out, errs := runCLI(e.t, append([]string{"-c", e.cfg, "--state-dir", filepath.Join(e.dir, name)}, args...)...)
	return code, out + errs
}

// TestSharedCatalogWorkers is issue 22's "several workers": two `run`s with their own
// state dirs share one PostgreSQL catalog and one warehouse. While a foreign holder has
// the lease of an entity, a run leaves it alone; two workers started together twice end
// with every table equal (row for row) to one worker's run on an embedded catalog over
// the same input, and no data file in the shared warehouse is unreferenced.
func TestSharedCatalogWorkers(t *testing.T) {
	e := newSharedEnv(t, 4000, 22)
	pg, dir, landing, warehouse := e.pg, e.dir, e.landing, e.warehouse
	ctx := context.Background()
	worker := func(name string, args ...string) (int, string) {
		return e.worker(name, append([]string{"--log-format", "json"}, args...)...)
	}

	lh, err := catalog.Open(ctx, catalog.Config{Type: "sql", URI: pg.URI(true), Warehouse: warehouse})
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	if code, logs := worker("a", "run"); code != exitOK {
		t.Fatalf("first run: exit %d\n%s", code, tail(logs, 3000))
	}
	bronzeRows := len(tableRows(t, lh, "bronze.orders"))

	// A foreign holder has the entity: new landing files wait for it; the marts are
	// built from the Silver that is there.
	db, err := sql.Open("pgx", pg.URI(true))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	foreign, err := lease.Open(ctx, db, lease.Postgres, "foreign-worker", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	held, _, err := foreign.Acquire(ctx, []string{"entity/orders"})
	if err != nil || !held.Has("entity/orders") {
		t.Fatalf("foreign lease: %v %v", held, err)
	}
	later := filepath.Join(dir, "later")
	if code, _, errs := runCLI(t, "--state-dir", dir, "demo", "generate", "--out", later, "--events", "1500", "--seed", "23"); code != exitOK {
		t.Fatalf("demo generate: exit %d\n%s", code, errs)
	}
	files, _ := filepath.Glob(filepath.Join(later, "*.jsonl"))
	for _, f := range files {
		if err := os.Rename(f, filepath.Join(landing, "later-"+filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	code, logs := worker("b", "run")
	if code != exitOK || !strings.Contains(logs, `"msg":"skipped: another worker holds its lease","entity":"orders","holder":"foreign-worker"`) {
		t.Fatalf("run beside a foreign lease: exit %d\n%s", code, tail(logs, 3000))
	}
	if n := len(tableRows(t, lh, "bronze.orders")); n != bronzeRows {
		t.Fatalf("bronze.orders went from %d to %d rows while another worker held the entity", bronzeRows, n)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// Two workers started together, twice: the second round sees the first's Silver.
	for round := range 2 {
		var wg sync.WaitGroup
		for _, name := range []string{"a", "b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code, logs := worker(name, "run"); code != exitOK {
					t.Errorf("round %d worker %s: exit %d\n%s", round, name, code, tail(logs, 3000))
				}
			}()
		}
		wg.Wait()
	}
	if t.Failed() {
		t.FailNow()
	}

	assertEqualsSolo(t, lh, dir, landing)
	assertNoOrphans(t, lh)
}

// assertEqualsSolo compares every table of lh, row for row, with one worker's run on an
// embedded catalog (in dir/solo) over the same landing files: the reference.
func assertEqualsSolo(t *testing.T, lh *catalog.Lakehouse, dir, landing string) {
	t.Helper()
	ctx := context.Background()
	soloCfg := filepath.Join(dir, "solo.yaml")
	solo := filepath.Join(dir, "solo")
	workersConfig(t, soloCfg, filepath.Join(solo, "catalog.db"), "file://"+filepath.Join(solo, "warehouse"), landing)
	if code, _, errs := runCLI(t, "-c", soloCfg, "--state-dir", solo, "run"); code != exitOK {
		t.Fatalf("solo run: exit %d\n%s", code, tail(errs, 3000))
	}
	ref, err := catalog.Open(ctx, catalog.Config{Type: "sql", URI: filepath.Join(solo, "catalog.db"), Warehouse: "file://" + filepath.Join(solo, "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	for _, ident := range []string{"bronze.orders", "silver.orders", "silver.orders_quarantine", "gold.daily_revenue_kpi", "gold.revenue_by_country"} {
		got, want := tableRows(t, lh, ident), tableRows(t, ref, ident)
		if len(want) == 0 {
			t.Fatalf("%s: the reference has no rows", ident)
		}
		compareRows(t, ident+" (shared catalog vs one embedded worker)", got, want)
	}
}

// TestPostgresDownMidRun is issue 22's "Postgres restarted mid-run": the shared catalog's
// PostgreSQL stops once Bronze has landed, while the run goes on to Silver and Gold. The
// run fails cleanly (exit 1, no password in the output, no panic) and cannot release its
// leases; once PostgreSQL is back, the next run on the same state dir takes its own
// leases back at once (not after their TTL) and converges to one embedded worker's
// result, nothing lost or doubled.
func TestPostgresDownMidRun(t *testing.T) {
	e := newSharedEnv(t, 60000, 5)
	pg, dir, landing, warehouse := e.pg, e.dir, e.landing, e.warehouse
	ctx := context.Background()
	run := func() (int, string) { return e.worker("w", "run") }

	// Stop PostgreSQL as soon as Bronze has its first snapshot.
	done := make(chan struct{})
	var code int
	var out string
	go func() {
		defer close(done)
		code, out = run()
	}()
	watch, err := catalog.Open(ctx, catalog.Config{Type: "sql", URI: pg.URI(true), Warehouse: warehouse})
	if err != nil {
		t.Fatal(err)
	}
	for {
		tbl, err := watch.LoadTable(ctx, "bronze.orders")
		if err == nil && tbl.CurrentSnapshot() != nil {
			break
		}
		select {
		case <-done:
			t.Fatalf("the run ended before Bronze could be watched: exit %d\n%s", code, tail(out, 3000))
		case <-time.After(20 * time.Millisecond):
		}
	}
	watch.Close()
	pg.Stop(t)
	<-done
	if code != exitFailure || strings.Contains(out, pg.Password) || strings.Contains(out, "panic") {
		t.Fatalf("run with its catalog gone: exit %d, want %d, without the password or a panic\n%s", code, exitFailure, tail(out, 3000))
	}
	t.Logf("with PostgreSQL stopped: exit %d, %s", code, lineOf(out, "goldbridge:"))

	pg.Start(t)
	code, out = run()
	if code != exitOK {
		t.Fatalf("rerun: exit %d\n%s", code, tail(out, 3000))
	}
	lh, err := catalog.Open(ctx, catalog.Config{Type: "sql", URI: pg.URI(true), Warehouse: warehouse})
	if err != nil {
		t.Fatal(err)
	}
	defer lh.Close()
	assertEqualsSolo(t, lh, dir, landing)
}

// tableRows renders a table's rows without the columns that name a run, a batch or a
// moment (they differ between any two builds of the same input).
func tableRows(t *testing.T, lh *catalog.Lakehouse, ident string) []string {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rowStrings(t, recs, "_run_id", "_event_id", "_ingest_ts", "_silver_updated_ts", "_batch_id", "quarantine_ts", "_calculated_at")
}

// assertNoOrphans fails if any table's location holds a data file that none of its
// snapshots references (iceberg-go's own orphan listing).
func assertNoOrphans(t *testing.T, lh *catalog.Lakehouse) {
	t.Helper()
	ctx := context.Background()
	idents, err := lh.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ident := range idents {
		tbl, err := lh.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := tbl.PlanOrphanFiles(ctx, table.WithFilesOlderThan(0))
		if err != nil {
			t.Fatal(err)
		}
		var data []string
		for _, f := range plan.OrphanFiles() {
			if strings.HasSuffix(f.Path, ".parquet") {
				data = append(data, f.Path)
			}
		}
		if len(data) > 0 {
			t.Errorf("%s: %d unreferenced data files, e.g. %s", ident, len(data), data[0])
		}
	}
}
