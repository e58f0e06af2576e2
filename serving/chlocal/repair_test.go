package chlocal_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"goldbridge/serving/chlocal"
	"goldbridge/serving/chtest"
)

// TestBrokenMetadataRepaired: a view whose metadata file a full disk left empty (the
// CREATE OR REPLACE of the _final view) made every later start fail with "Cannot parse
// definition from metadata file"; now the server starts without the view, the table and
// its rows are intact, and the view can be created again.
func TestBrokenMetadataRepaired(t *testing.T) {
	chtest.Require(t)
	ctx := context.Background()
	ports, err := chlocal.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	opt := chlocal.Options{Path: filepath.Join(t.TempDir(), "data"), TCPPort: ports[0], HTTPPort: ports[1], Password: "pw-repair"}
	srv, err := chlocal.Start(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Kill() })
	run := func(q string) (int, string) {
		t.Helper()
		code, body, err := tryPost(srv, chlocal.DefaultUser, "pw-repair", q, nil)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return code, body
	}
	const view = "CREATE VIEW marts.kpi_final AS SELECT d, sum(v) AS v FROM marts.kpi GROUP BY d"
	for _, q := range []string{
		"CREATE DATABASE marts",
		"CREATE TABLE marts.kpi (d Date, v UInt64) ENGINE = SummingMergeTree ORDER BY d",
		"INSERT INTO marts.kpi VALUES ('2026-01-01', 7)",
		view,
	} {
		if code, body := run(q); code != http.StatusOK {
			t.Fatalf("%s: %d %s", q, code, body)
		}
	}
	if err := srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	defs, err := filepath.Glob(filepath.Join(opt.Path, "store", "*", "*", "kpi_final.sql"))
	if err != nil || len(defs) != 1 {
		t.Fatalf("view definition: %v %v", defs, err)
	}
	if err := os.Truncate(defs[0], 0); err != nil { // what ENOSPC left
		t.Fatal(err)
	}

	srv2, err := chlocal.Start(ctx, opt)
	if err != nil {
		t.Fatalf("start over an empty view definition: %v", err)
	}
	t.Cleanup(func() { _ = srv2.Kill() })
	srv = srv2
	if code, body := run("SELECT sum(v) FROM marts.kpi"); code != http.StatusOK || body != "7" {
		t.Fatalf("table after repair: %d %q, want 7", code, body)
	}
	if code, body := run("EXISTS marts.kpi_final"); code != http.StatusOK || body != "0" {
		t.Fatalf("EXISTS view after repair: %d %q, want 0 (moved aside)", code, body)
	}
	if code, body := run(view); code != http.StatusOK {
		t.Fatalf("recreate view: %d %s", code, body)
	}
	if code, body := run("SELECT v FROM marts.kpi_final"); code != http.StatusOK || body != "7" {
		t.Fatalf("recreated view: %d %q", code, body)
	}
	if _, err := os.Stat(defs[0] + ".bak"); err != nil {
		t.Errorf("the broken definition is not kept aside: %v", err)
	}
}
