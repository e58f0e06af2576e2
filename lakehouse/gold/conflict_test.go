package gold

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// TestCommitConflictWritesOnce: a commit that loses to a concurrent writer is retried by
// committing the files already written, never by writing them again (issue 22). A second
// writer commits in between, in each of the two forms a lost race takes:
//   - between the attempt's load and its commit: the catalog refuses the stale base with
//     the unwrapped "requirement failed: branch main has changed" (SQLite and Postgres);
//   - inside the catalog's commit, after it checked the requirements and before its
//     compare-and-swap of the metadata pointer: table.ErrCommitFailed "metadata-location
//     moved underneath us" (Postgres: the other writer's UPDATE is queued first on the row
//     lock the test holds, the attempt's second, and the test releases the lock).
//
// Each costs exactly one retry; Gold ends equal to a full run, and no data file in the
// warehouse is unreferenced.
func TestCommitConflictWritesOnce(t *testing.T) {
	ctx := context.Background()
	seal := func(t *testing.T, lh *catalog.Lakehouse, ident string, _ *sql.DB) {
		if _, err := lh.Seal(ctx, ident, nil); err != nil {
			t.Fatal(err)
		}
	}
	var pg *lakehousetest.Postgres // one server for the Postgres cases
	if !testing.Short() {
		pg = lakehousetest.StartPostgres(t)
	}
	postgres := func(t *testing.T) (*catalog.Lakehouse, *sql.DB) {
		if pg == nil {
			t.Skip("integration test: needs a real PostgreSQL (skipped with -short)")
		}
		// A fresh database per case: the cases use the same table names.
		admin := openPG(t, pg.URI(true))
		name := fmt.Sprintf("conflict_%d", time.Now().UnixNano())
		if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		uri := strings.Replace(pg.URI(true), "/"+pg.Database+"?", "/"+name+"?", 1)
		lh, err := catalog.Open(ctx, catalog.Config{Type: catalog.TypeSQL, URI: uri, Warehouse: "file://" + t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { lh.Close() })
		return lh, openPG(t, uri)
	}
	for _, c := range []struct {
		name string
		open func(t *testing.T) (*catalog.Lakehouse, *sql.DB)
		race func(t *testing.T, lh *catalog.Lakehouse, ident string, db *sql.DB)
		// The losing attempt's metadata file is written only when the catalog refuses
		// it after its requirement check: the evidence of the form the race took.
		lostMetadata int
	}{
		{"branch changed/sqlite", func(t *testing.T) (*catalog.Lakehouse, *sql.DB) { return lakehousetest.OpenDir(t, t.TempDir()), nil }, seal, 0},
		{"branch changed/postgres", postgres, seal, 0},
		{"metadata moved/postgres", postgres, movedUnderneath, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			lh, db := c.open(t)
			landing := t.TempDir()
			writeOrders(t, landing, "a.jsonl", 0)
			loadAndSilver(t, lh, landing)
			m := kpiMart("gold.kpi")
			if _, err := Run(ctx, lh, m, Options{}); err != nil {
				t.Fatal(err)
			}
			writeOrders(t, landing, "b.jsonl", 100)
			loadAndSilver(t, lh, landing)
			var attempts []int
			opt := Options{beforeCommit: func(attempt int) {
				attempts = append(attempts, attempt)
				if attempt == 1 {
					c.race(t, lh, m.Table, db)
				}
			}}
			if _, err := Run(ctx, lh, m, opt); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(attempts, []int{1, 2}) {
				t.Fatalf("commit attempts %v, want [1 2] (the race must cost exactly one retry)", attempts)
			}
			full := kpiMart("gold.kpi_full")
			if _, err := Run(ctx, lh, full, Options{Full: true}); err != nil {
				t.Fatal(err)
			}
			if a, b := goldRows(t, lh, m.Table), goldRows(t, lh, full.Table); !slices.Equal(a, b) {
				t.Fatalf("after the retried commit (%d rows) != full run (%d rows)", len(a), len(b))
			}
			tbl, err := lh.LoadTable(ctx, m.Table)
			if err != nil {
				t.Fatal(err)
			}
			orphans, err := tbl.PlanOrphanFiles(ctx, table.WithFilesOlderThan(0))
			if err != nil {
				t.Fatal(err)
			}
			var data, metadata []string
			for _, f := range orphans.Files() {
				switch {
				case filepath.Ext(f) == ".parquet":
					data = append(data, f)
				case strings.HasSuffix(f, ".metadata.json"):
					metadata = append(metadata, f)
				}
			}
			if len(data) > 0 {
				t.Errorf("%d unreferenced Gold data files after one retried commit: %v", len(data), data)
			}
			if len(metadata) != c.lostMetadata {
				t.Errorf("%d unreferenced metadata files, want %d (the race took the other form?): %v", len(metadata), c.lostMetadata, metadata)
			}
		})
	}
}

// movedUnderneath makes the commit that follows lose inside the catalog, after its
// requirement check: it locks the table's catalog row, starts a second writer (a Seal)
// whose UPDATE of the row queues on the lock, and once the next commit's UPDATE queues
// behind it releases the lock. The second writer moves the metadata pointer first, so
// the compare-and-swap of the commit that follows matches no row: table.ErrCommitFailed.
func movedUnderneath(t *testing.T, lh *catalog.Lakehouse, ident string, db *sql.DB) {
	ctx := context.Background()
	id, err := catalog.ParseIdent(ident)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := lock.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT 1 FROM iceberg_tables WHERE table_namespace = $1 AND table_name = $2 FOR UPDATE) r",
		strings.Join(id[:len(id)-1], "."), id[len(id)-1]).Scan(&n); err != nil || n != 1 {
		t.Fatalf("lock the catalog row of %s: %d rows, %v", ident, n, err)
	}
	sealed := make(chan error, 1)
	go func() {
		_, err := lh.Seal(ctx, ident, nil)
		sealed <- err
	}()
	waitLockWaiters(t, db, 1)
	go func() { // the commit that follows is the second waiter
		defer lock.Rollback()
		waitLockWaiters(t, db, 2)
	}()
	t.Cleanup(func() {
		if err := <-sealed; err != nil {
			t.Errorf("the second writer: %v", err)
		}
	})
}

// waitLockWaiters waits until n sessions of the database wait for a lock (at most 30 s).
func waitLockWaiters(t *testing.T, db *sql.DB, n int) {
	for range 3000 {
		var waiting int
		if err := db.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&waiting); err != nil {
			t.Error(err)
			return
		}
		if waiting >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("%d sessions never waited for the catalog row's lock", n)
}

// openPG opens a Postgres database for the test's own queries, closed when it ends.
func openPG(t *testing.T, uri string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// writeOrders writes 30 orders (ids from first+1) over three days to landing/name.
func writeOrders(t *testing.T, landing, name string, first int) {
	t.Helper()
	var b []byte
	for i := range 30 {
		b = fmt.Appendf(b, `{"order_id":"o%d","user_id":"u%d","amount":%d.25,"country":"US","category":"c%d","created_at":"2026-03-0%dT10:00:00Z","updated_at":"2026-03-04T10:00:00Z","op":"c"}`+"\n",
			first+i+1, i%7, 10+i, i%3, 1+i%3)
	}
	if err := os.WriteFile(filepath.Join(landing, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
