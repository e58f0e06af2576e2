package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	iceio "github.com/apache/iceberg-go/io"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// TestS3CronLife is issue 36's object-store life in CI's size: the orders example on S3
// (SeaweedFS) with the PostgreSQL catalog, one small landing file per `run`, 16 times,
// maintenance with small thresholds. Each object is a request on S3, so what is counted
// is objects: after the runs every table holds a bounded number of them (its retention
// and a few files), and the objects the last runs wrote are no more than the first
// runs wrote (a run's cost does not grow with the number of runs before it). The rows
// equal a one-shot embedded run over the same files, and check finds no drift.
func TestS3CronLife(t *testing.T) {
	t.Parallel() // after the serial tests: gives a cold SeaweedFS build its time
	const runs = 16
	base := newForgetEnv(t)
	weed := lakehousetest.StartSeaweedFS(t)
	pg := lakehousetest.StartPostgres(t)
	input := t.TempDir()
	base.run("demo", "generate", "--events", strconv.Itoa(runs*120), "--days", "20", "--files", strconv.Itoa(runs),
		"--seed", "9", "--end", time.Now().UTC().Format(time.DateOnly), "--out", input)
	files, _ := filepath.Glob(filepath.Join(input, "*.jsonl"))
	slices.Sort(files)
	if len(files) != runs {
		t.Fatalf("%d landing files", len(files))
	}
	land := func(e *forgetEnv, f string) {
		t.Helper()
		if err := os.MkdirAll(e.landing(), 0o700); err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(e.landing(), filepath.Base(f))
		if err := os.Link(f, dst); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-time.Hour)
		if err := os.Chtimes(dst, old, old); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		land(base, f)
	}
	base.run("run")
	want := lakeRows(t, base.lakehouse())

	e := newExampleEnv(t, "orders.yaml", func(cfg map[string]any) {
		lh := cfg["lakehouse"].(map[string]any)
		lh["catalog"] = map[string]any{"type": "sql", "uri": pg.URI(false)}
		lh["warehouse"] = "s3://" + weed.Bucket + "/life"
		lh["s3"] = map[string]any{"endpoint": weed.Endpoint, "region": "us-east-1", "path_style": true}
		cfg["maintenance"] = map[string]any{"retain_age": "0s", "retain_min": 2, "max_files": 3, "max_delete_files": 3,
			"max_manifests": 3, "metadata_versions": 3}
	})
	e.env = []string{"PGPASSWORD=" + pg.Password, "AWS_ACCESS_KEY_ID=" + weed.AccessKey, "AWS_SECRET_ACCESS_KEY=" + weed.SecretKey}
	lh := openShared(t, catalog.Config{Type: catalog.TypeSQL, URI: pg.URI(true), Warehouse: "s3://" + weed.Bucket + "/life", S3: weed.S3()})
	var written []int // objects each run left that were not there before it
	seen := map[string]bool{}
	var total int
	for _, f := range files {
		land(e, f)
		e.run("run")
		now := s3Objects(t, lh)
		n := 0
		for p := range now {
			if !seen[p] {
				n++
			}
		}
		written, seen, total = append(written, n), now, len(now)
	}
	t.Logf("objects written per run: %v; objects in the warehouse: %d", written, total)
	first, last := slices.Max(written[2:6]), slices.Max(written[runs-4:])
	if last > first+first/2 {
		t.Errorf("the last runs wrote up to %d objects, the first ones up to %d: a run's writes grow with the runs before it (%v)", last, first, written)
	}
	if total > 400 {
		t.Errorf("%d objects in the warehouse after %d runs of a few thousand rows", total, runs)
	}
	got := lakeRows(t, lh)
	for _, ident := range []string{"silver.orders", "silver.orders_quarantine", "gold.daily_revenue_kpi"} {
		compareRows(t, ident, got[ident], want[ident])
	}
	e.run("check")
}

// s3Objects lists every object under the tables of lh.
func s3Objects(t *testing.T, lh *catalog.Lakehouse) map[string]bool {
	t.Helper()
	ctx := context.Background()
	idents, err := lh.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, ident := range idents {
		tbl, err := lh.LoadTable(ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		fsys, err := tbl.FS(ctx)
		if err != nil {
			t.Fatal(err)
		}
		l, ok := fsys.(iceio.ListableIO)
		if !ok {
			t.Fatalf("%s: the S3 IO cannot list", ident)
		}
		err = l.WalkDir(tbl.Location(), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				out[p] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
