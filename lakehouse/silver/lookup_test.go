package silver

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"goldbridge/lakehouse/lakehousetest"
)

// TestLookupFindsEveryRunsKeys: each run brings new keys and, for every earlier run, a
// newer version (upsert) or a re-delivery (append) of one of that run's keys, with a
// compaction after run 3 and a replay after run 5. The pruned stored-version lookup must
// find each of them: a missed one would count as a new key. Before the compaction the
// lookup reads fewer files than the table has, except where each holds a wanted key.
func TestLookupFindsEveryRunsKeys(t *testing.T) {
	const runs, fresh = 7, 60
	withKeys := orderEventsSpec()
	withKeys.KeysTable = "silver.order_events_keys"
	twoCol := ordersSpec()
	twoCol.Key = []string{"order_id", "user_id"}
	sorted := ordersSpec()
	sorted.SortBy = []string{"created_at"}
	for _, tc := range []struct {
		name string
		spec EntitySpec
		// Every file of run 3's lookup holds one of its keys: an append table without a
		// keys table is partitioned by day, one file a day, and run 3 re-delivers events
		// of both days.
		allNeeded bool
	}{
		{"upsert", ordersSpec(), false},
		{"upsert sorted", sorted, false},
		{"upsert two-column key", twoCol, false},
		{"append keys table", withKeys, false},
		{"append unbounded", orderEventsSpec(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			lh := lakehousetest.Open(t)
			landing := t.TempDir()
			upsert := tc.spec.Mode == ModeUpsert
			line := func(run, i, version int) string {
				return fmt.Sprintf(`{"order_id":"o-%d-%02d","user_id":"u%d","amount":5.00,"status":"s%d","created_at":"2026-01-%02dT00:00:00Z","updated_at":"2026-02-%02dT00:00:00Z","op":"u"}`,
					run, i, i%3, version, run, version)
			}
			for r := 1; r <= runs; r++ {
				var lines []string
				for i := range fresh {
					lines = append(lines, line(r, i, r))
				}
				for j := 1; j < r; j++ {
					if upsert {
						lines = append(lines, line(j, r, r)) // a newer version of run j's key r
					} else {
						lines = append(lines, line(j, r, j)) // run j's event r again
					}
				}
				if err := os.WriteFile(filepath.Join(landing, strconv.Itoa(r)+".jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				ingest(t, lh, landing)
				logs := &debugLog{}
				res, err := Run(ctx, lh, tc.spec, "bronze.orders", Options{Log: slog.New(logs)})
				if err != nil {
					t.Fatal(err)
				}
				want := Counts{Read: int64(fresh + r - 1), Current: int64(fresh), Inserted: int64(fresh), Duplicates: int64(r - 1)}
				if upsert {
					want.Current, want.Updated, want.Duplicates = int64(fresh+r-1), int64(r-1), 0
				}
				if res.Counts != want {
					t.Fatalf("run %d: counts %+v, want %+v", r, res.Counts, want)
				}
				if r == 3 {
					lookup := logs.get("silver resolve")
					files, _ := strconv.Atoi(lookup["files"])
					read, err := strconv.Atoi(lookup["files_read"])
					if err != nil || files == 0 || tc.allNeeded != (read == files) {
						t.Fatalf("run %d: the lookup read %q of %q files, want all: %v", r, lookup["files_read"], lookup["files"], tc.allNeeded)
					}
				}
				switch r {
				case 3:
					if _, err := Compact(ctx, lh, tc.spec.Table); err != nil {
						t.Fatal(err)
					}
				case 5:
					if _, err := Replay(ctx, lh, tc.spec, "bronze.orders", Options{}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !upsert {
				return
			}
			got := silverRows(t, lh)
			for j := 1; j < runs; j++ {
				for r := j + 1; r <= runs; r++ {
					key := fmt.Sprintf("o-%d-%02d", j, r) // silverRows keys by order_id
					if row := got[key]; !strings.Contains(row, "|s"+strconv.Itoa(r)+"|") {
						t.Errorf("%q: stored %q, want status s%d", key, row, r)
					}
				}
			}
		})
	}
}
