package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"goldbridge/lakehouse/catalog"
	gbsync "goldbridge/sync"
)

// TestNoGoldTableNamesTheCause: the sync error for a mart without a Gold table says "run
// gold first" only when this run did not run gold for it (issue 37).
func TestNoGoldTableNamesTheCause(t *testing.T) {
	reads := []string{"orders", "users"}
	missing := fmt.Errorf("load table gold.kpi: %w", catalog.ErrNoSuchTable)
	var o outcomes
	if err := o.noGoldTable("sync", "kpi", reads, missing); !strings.Contains(err.Error(), "(run gold first)") || !errors.Is(err, catalog.ErrNoSuchTable) {
		t.Errorf("gold not run: %v", err)
	}
	o.goldRan("kpi", nil)
	if err := o.noGoldTable("sync", "kpi", reads, missing); !strings.Contains(err.Error(), "no Silver rows to build it from (its Silver table has no rows yet)") {
		t.Errorf("gold ran, nothing upstream failed: %v", err)
	}
	o.entityFailed("users", "silver")
	o.entityFailed("users", "ingest") // the first failure is the cause
	if err := o.noGoldTable("check", "kpi", reads, missing); !strings.Contains(err.Error(), "check kpi: no Gold table: gold ran in this run but had no Silver rows to build it from (silver failed for users in this run)") {
		t.Errorf("silver failed upstream: %v", err)
	}
	o.goldRan("kpi", errors.New("boom"))
	if err := o.noGoldTable("sync", "kpi", reads, missing); !strings.Contains(err.Error(), "gold did not finish for the mart in this run") {
		t.Errorf("gold failed: %v", err)
	}
	if err := o.withUpstream(reads, errors.New("silver table silver.users: no table (run silver first)")); !strings.HasSuffix(err.Error(), "(silver failed for users in this run)") {
		t.Errorf("gold error: %v", err)
	}
}

// TestExplainCold is issue 19's "Why" 6 (the message): a sync that served nothing of a
// backfill names the keys to change; other errors pass unchanged.
func TestExplainCold(t *testing.T) {
	err := ExplainCold("taxi_daily", fmt.Errorf("wrapped: %w", &gbsync.ColdError{Mart: "taxi_daily", Partitions: 92}))
	var ce *gbsync.ColdError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "marts.taxi_daily.serving.hot_window_anchor: data") ||
		!strings.Contains(err.Error(), "none of Gold's 92 partitions") {
		t.Fatalf("got %v", err)
	}
	other := errors.New("boom")
	if ExplainCold("taxi_daily", other) != other || ExplainCold("taxi_daily", nil) != nil {
		t.Fatal("other errors changed")
	}
}
