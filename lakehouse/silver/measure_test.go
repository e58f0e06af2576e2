package silver

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"goldbridge/lakehouse/lakehousetest"
)

// TestMeasure times a full build and one incremental run of about 10k events per mode.
// It runs only with SILVER_MEASURE=<events>, e.g. SILVER_MEASURE=200000.
func TestMeasure(t *testing.T) {
	n, _ := strconv.ParseInt(os.Getenv("SILVER_MEASURE"), 10, 64)
	if n == 0 {
		t.Skip("set SILVER_MEASURE=<events>")
	}
	keys := orderEventsSpec()
	keys.KeysTable = "silver.order_events_keys"
	lookback := orderEventsSpec()
	lookback.Lookback = 7 * 24 * time.Hour
	files := int(n / 10000)
	all := landDemo(t, n, files, 3)
	for _, tc := range []struct {
		name string
		spec EntitySpec
	}{{"upsert", ordersSpec()}, {"append lookback 7d", lookback}, {"append keys table", keys}, {"append unbounded", orderEventsSpec()}} {
		ctx := context.Background()
		lh := lakehousetest.Open(t)
		landing := t.TempDir()
		for _, f := range all[:len(all)-1] {
			cp(t, f, landing)
		}
		ingest(t, lh, landing)
		start := time.Now()
		full, err := Run(ctx, lh, tc.spec, "bronze.orders", Options{})
		if err != nil {
			t.Fatal(err)
		}
		fullT := time.Since(start)
		cp(t, all[len(all)-1], landing)
		ingest(t, lh, landing)
		start = time.Now()
		inc, err := Run(ctx, lh, tc.spec, "bronze.orders", Options{})
		if err != nil {
			t.Fatal(err)
		}
		incT := time.Since(start)
		start = time.Now()
		rep, err := Replay(ctx, lh, tc.spec, "bronze.orders", Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-20s full %d rows %v (%.0f rows/s); incremental %d rows (%d current) %v; replay %d rows %v",
			tc.name, full.Read, fullT.Round(time.Millisecond), float64(full.Read)/fullT.Seconds(),
			inc.Read, inc.Current, incT.Round(time.Millisecond), rep.Read, time.Since(start).Round(time.Millisecond))
	}
}

func cp(t *testing.T, f, dir string) {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
