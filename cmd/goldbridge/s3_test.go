package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/silver"
)

// sharedCase is examples/orders.yaml with the warehouse on SeaweedFS's S3 and a shared
// catalog: edit changes the config, env holds the credentials the commands get (never
// the config file), open opens the same catalog for the test.
type sharedCase struct {
	name string
	edit func(cfg map[string]any)
	env  []string
	open func(t *testing.T) *catalog.Lakehouse
}

// TestS3SharedCatalogs runs the orders pipeline (run over a landing file, run over a
// second that updates its orders, compact, forget, run) with the
// warehouse on s3:// (SeaweedFS) and (a) the SQL catalog on PostgreSQL, (b) SeaweedFS's
// Iceberg REST catalog. Silver, the quarantine, Gold and daily_revenue_kpi_final equal
// the embedded run's (SQLite, local warehouse) on the same input; check finds no drift;
// the orphan sweep on S3 finds nothing unreferenced after the pipeline and deletes an
// unreferenced object planted under a table, nothing else; and no command's output
// (debug logs included) shows a credential, which reach goldbridge from the environment
// (Postgres, AWS_*) or from ${VAR} secrets in the config (REST).
func TestS3SharedCatalogs(t *testing.T) {
	// Parallel: it starts once the package's serial tests are done, which gives a cold
	// SeaweedFS build (make test starts it in the background) their ~20 minutes.
	t.Parallel()
	base := newForgetEnv(t)
	weed := lakehousetest.StartSeaweedFS(t)
	pg := lakehousetest.StartPostgres(t)
	secrets := []string{weed.SecretKey, pg.Password}

	// Two landing files over 20 days: the second updates orders of the first, so Silver
	// has equality deletes for compact to apply, and Gold has few partitions (each is a
	// file on S3).
	input := t.TempDir()
	base.run("demo", "generate", "--events", "1500", "--days", "20", "--files", "2", "--seed", "5", "--out", input)
	files, err := filepath.Glob(filepath.Join(input, "*.jsonl"))
	if err != nil || len(files) != 2 {
		t.Fatalf("landing files: %v %v", files, err)
	}
	land := func(e *forgetEnv, f string) { // settled: older than sources.<name>.settle
		e.t.Helper()
		b, err := os.ReadFile(f)
		if err != nil {
			e.t.Fatal(err)
		}
		if err := os.MkdirAll(e.landing(), 0o700); err != nil {
			e.t.Fatal(err)
		}
		dst := filepath.Join(e.landing(), filepath.Base(f))
		writeFile(e.t, dst, string(b))
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(dst, old, old); err != nil {
			e.t.Fatal(err)
		}
	}
	land(base, files[0])
	land(base, files[1])
	subject := forgetSubject(t, base.landing())
	for _, f := range files {
		_ = os.Remove(filepath.Join(base.landing(), filepath.Base(f)))
	}
	pipeline := func(e *forgetEnv) string {
		e.t.Helper()
		var out []string
		step := func(args ...string) string {
			start := time.Now()
			o := e.run(args...)
			out = append(out, o)
			e.t.Logf("%s: %v", strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
			return o
		}
		step("validate")
		land(e, files[0])
		step("--log-level", "debug", "run")
		land(e, files[1])
		step("run")
		if o := step("compact", "orders"); !strings.Contains(o, "delete files removed") {
			e.t.Errorf("compact did nothing: the test does not exercise it\n%s", o)
		}
		step("forget", "orders", "--where", "user_id = "+subject, "--confirm")
		step("run")
		if o := e.run("check"); !strings.Contains(o, "check daily_revenue_kpi: no drift") {
			e.t.Errorf("check:\n%s", o)
		}
		return strings.Join(out, "\n")
	}
	start := time.Now()
	pipeline(base)
	t.Logf("embedded pipeline: %v", time.Since(start).Round(time.Millisecond))
	const final = "SELECT * FROM marts.daily_revenue_kpi_final ORDER BY ALL FORMAT TSV"
	wantFinal := nonEmptyLines(base.stdout("clickhouse", "query", final))
	want := lakeRows(t, base.lakehouse())

	s3 := map[string]any{"endpoint": weed.Endpoint, "region": "us-east-1", "path_style": true}
	cases := []sharedCase{{
		name: "postgres",
		edit: func(cfg map[string]any) {
			lh := cfg["lakehouse"].(map[string]any)
			lh["catalog"] = map[string]any{"type": "sql", "uri": pg.URI(false)}
			lh["warehouse"] = "s3://" + weed.Bucket + "/pg"
			lh["s3"] = s3
		},
		env: []string{"PGPASSWORD=" + pg.Password, "AWS_ACCESS_KEY_ID=" + weed.AccessKey, "AWS_SECRET_ACCESS_KEY=" + weed.SecretKey},
		open: func(t *testing.T) *catalog.Lakehouse {
			return openShared(t, catalog.Config{Type: catalog.TypeSQL, URI: pg.URI(true), Warehouse: "s3://" + weed.Bucket + "/pg", S3: weed.S3()})
		},
	}, {
		name: "rest",
		edit: func(cfg map[string]any) {
			lh := cfg["lakehouse"].(map[string]any)
			lh["catalog"] = map[string]any{"type": "rest", "uri": weed.CatalogURI, "properties": map[string]any{"credential": "${GB_TEST_REST_CREDENTIAL}"}}
			lh["warehouse"] = weed.TableBucket
			withKeys := map[string]any{"access_key_id": "${GB_TEST_S3_KEY}", "secret_access_key": "${GB_TEST_S3_SECRET}"}
			for k, v := range s3 {
				withKeys[k] = v
			}
			lh["s3"] = withKeys
		},
		env: []string{"GB_TEST_REST_CREDENTIAL=" + weed.AccessKey + ":" + weed.SecretKey,
			"GB_TEST_S3_KEY=" + weed.AccessKey, "GB_TEST_S3_SECRET=" + weed.SecretKey},
		open: func(t *testing.T) *catalog.Lakehouse {
			return openShared(t, catalog.Config{Type: catalog.TypeREST, URI: weed.CatalogURI, Warehouse: weed.TableBucket, S3: weed.S3(),
				Properties: map[string]string{"credential": weed.AccessKey + ":" + weed.SecretKey}})
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // own state dir, ClickHouse, catalog and prefix: only SeaweedFS is shared
			start := time.Now()
			e := newExampleEnv(t, "orders.yaml", c.edit)
			e.env = c.env
			out := pipeline(e)
			if tables := e.run("tables"); !strings.Contains(tables, "gold.daily_revenue_kpi") {
				t.Errorf("tables does not list gold.daily_revenue_kpi:\n%s", tables)
			}
			// query reads local warehouses only, and says so.
			q, err := e.exec("query", "SELECT count() FROM silver.orders")
			if code := exitCode(err); code != exitUsage || !strings.Contains(q, "query it with ClickHouse's icebergS3") {
				t.Errorf("query on an s3:// warehouse: exit %d, want %d with the reason\n%s", code, exitUsage, tail(q, 2000))
			}
			out += q
			lh := c.open(t)
			got := lakeRows(t, lh)
			for _, ident := range []string{"silver.orders", "silver.orders_quarantine", "gold.daily_revenue_kpi"} {
				compareRows(t, ident, got[ident], want[ident])
			}
			compareRows(t, "daily_revenue_kpi_final", nonEmptyLines(e.stdout("clickhouse", "query", final)), wantFinal)
			for _, ident := range forgetTables {
				tbl, err := lh.LoadTable(context.Background(), ident)
				if err != nil {
					t.Fatal(err)
				}
				if loc := tbl.Location(); !strings.HasPrefix(loc, "s3://") {
					t.Errorf("%s lives at %s, not on S3", ident, loc)
				}
			}
			sweepS3(t, lh)
			// The sweep deleted nothing referenced: the tables still read the same.
			got = lakeRows(t, lh)
			compareRows(t, "silver.orders after the sweep", got["silver.orders"], want["silver.orders"])
			compareRows(t, "gold.daily_revenue_kpi after the sweep", got["gold.daily_revenue_kpi"], want["gold.daily_revenue_kpi"])
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Errorf("a credential appears in the commands' output")
				}
			}
			if !strings.Contains(out, "level=DEBUG") {
				t.Errorf("no debug log in the output: the credential check saw too little")
			}
			t.Logf("%s: %v", c.name, time.Since(start).Round(time.Millisecond))
		})
	}
}

// openShared opens a shared catalog for the test, closed when it ends.
func openShared(t *testing.T, cfg catalog.Config) *catalog.Lakehouse {
	t.Helper()
	lh, err := catalog.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lh.Close() })
	return lh
}

// lakeRows reads what the comparison with the embedded run covers: Silver's entity
// columns, the quarantine's payloads and reasons, Gold without its run columns.
func lakeRows(t *testing.T, lh *catalog.Lakehouse) map[string][]string {
	t.Helper()
	read := func(ident string, cols []string, skip ...string) []string {
		tbl, err := lh.LoadTable(context.Background(), ident)
		if err != nil {
			t.Fatal(err)
		}
		var opts []table.ScanOption
		if cols != nil {
			opts = append(opts, table.WithSelectedFields(cols...))
		}
		_, recs, err := tbl.Scan(opts...).ToArrowRecords(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", ident, err)
		}
		return rowStrings(t, recs, skip...)
	}
	return map[string][]string{
		"silver.orders": read("silver.orders", []string{"order_id", "user_id", "amount", "currency", "country", "category",
			"status", "created_at", "updated_at", "op", "is_deleted"}),
		"silver.orders_quarantine": read("silver.orders_quarantine", []string{silver.QColPayload, silver.QColReason}),
		"gold.daily_revenue_kpi":   read("gold.daily_revenue_kpi", nil, "_calculated_at", "_run_id"),
	}
}

// sweepS3 checks the orphan sweep on the S3 warehouse: after the pipeline no file under
// any table is unreferenced, and an object planted under silver.orders's data is deleted.
func sweepS3(t *testing.T, lh *catalog.Lakehouse) {
	t.Helper()
	ctx := context.Background()
	if sw, err := lh.SweepOrphans(ctx, 0); err != nil || sw.Files != 0 {
		t.Errorf("the pipeline left %d unreferenced files (%d bytes) on S3 (err %v)", sw.Files, sw.Bytes, err)
	}
	tbl, err := lh.LoadTable(ctx, "silver.orders")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, ok := fs.(iceio.WriteFileIO)
	if !ok {
		t.Fatalf("the S3 file IO %T cannot write", fs)
	}
	planted := strings.TrimRight(tbl.Location(), "/") + "/data/00000-0-killed-write.parquet"
	if err := w.WriteFile(planted, []byte("an unreferenced object")); err != nil {
		t.Fatal(err)
	}
	if sw, err := lh.SweepOrphans(ctx, 0); err != nil || sw.Files != 1 {
		t.Errorf("the sweep deleted %d files, want the 1 planted (err %v)", sw.Files, err)
	}
	if f, err := fs.Open(planted); err == nil {
		f.Close()
		t.Errorf("%s is still there after the sweep", planted)
	}
}
