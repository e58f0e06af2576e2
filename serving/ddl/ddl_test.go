package ddl_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"goldbridge/serving"
	"goldbridge/serving/chtest"
	"goldbridge/serving/ddl"
)

var update = flag.Bool("update", false, "rewrite testdata/*.sql")

func TestMain(m *testing.M) { chtest.Main(m) }

func kpi(db, cluster string, aggregating bool) *serving.Mart {
	m := &serving.Mart{
		Name: "daily_revenue_kpi", Database: db, Table: "daily_revenue_kpi", Cluster: cluster,
		Grain:      serving.Grain{As: "report_date", Unit: "day"},
		Dimensions: []serving.Dim{{Name: "country", Type: "String"}, {Name: "category", Type: "String"}},
		Grouping:   "rollup",
		Measures: []serving.Measure{
			{Name: "revenue", Agg: "sum", Type: "Decimal(38, 2)"},
			{Name: "orders", Agg: "count", Type: "Int64"},
		},
		PartitionBy: "day", HotWindow: 90 * 24 * time.Hour, TTL: 120 * 24 * time.Hour, Distinct: "uniqExact",
	}
	if aggregating {
		m.Measures = append(m.Measures,
			serving.Measure{Name: "customers", Agg: "count_distinct"},
			serving.Measure{Name: "avg_order", Agg: "avg", Type: "Decimal(38, 2)"},
			serving.Measure{Name: "max_order", Agg: "max", Type: "Decimal(38, 2)"},
			serving.Measure{Name: "p_order", Agg: "quantiles", Quantiles: []float64{0.5, 0.9}})
	}
	return m
}

func sharded(m *serving.Mart) *serving.Mart { m.Sharded = true; return m }

func bitmap(m *serving.Mart) *serving.Mart { m.Distinct = serving.DistinctBitmap; return m }

func TestGolden(t *testing.T) {
	for name, m := range map[string]*serving.Mart{
		"summing":             kpi("marts", "", false),
		"aggregating":         kpi("marts", "", true),
		"aggregating_cluster": kpi("marts", "prod", true),
		"aggregating_sharded": sharded(kpi("marts", "gb", true)),
		"aggregating_bitmap":  bitmap(kpi("marts", "", true)),
	} {
		t.Run(name, func(t *testing.T) {
			if err := m.Validate(); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(ddl.Statements(m), ";\n\n") + ";\n"
			if m.Aggregating() {
				states, err := ddl.BuildStates(m, "20260501")
				if err != nil {
					t.Fatal(err)
				}
				got += "\n-- states of partition 20260501\n" + strings.Join(states, ";\n") + ";\n"
			}
			path := filepath.Join("testdata", name+".sql")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("DDL differs from %s (run go test -update):\n%s", path, got)
			}
		})
	}
}

// TestBitmapNeedsOneServer: a bitmap mart is refused on a cluster, whose nodes would
// each number the keys their own way.
func TestBitmapNeedsOneServer(t *testing.T) {
	for _, m := range []*serving.Mart{bitmap(kpi("marts", "prod", true)), sharded(bitmap(kpi("marts", "gb", true)))} {
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "single server") {
			t.Fatalf("cluster %s, sharded %v: %v", m.Cluster, m.Sharded, err)
		}
	}
	if err := bitmap(kpi("marts", "", true)).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateRejectsBadIdentifiers(t *testing.T) {
	m := kpi("marts", "", false)
	m.Dimensions[0].Name = "country`; DROP TABLE x"
	if err := m.Validate(); err == nil {
		t.Fatal("bad identifier accepted")
	}
}

// TestEnsureLive runs the generated DDL on the local ClickHouse, then checks drift
// handling: a new measure, a changed type or a column dropped by hand make <t> a
// rebuild (never an ALTER that would leave an empty column over its rows), a drifted
// helper table is recreated, and the old Date grain is a rebuild.
func TestEnsureLive(t *testing.T) {
	ctx := context.Background()
	conn := chtest.Conn(t)
	db := chtest.Database(t)
	for _, agg := range []bool{false, true} {
		fresh := func() *serving.Mart {
			m := kpi(db, "", agg)
			m.Table = map[bool]string{true: "agg", false: "sum"}[agg]
			return m
		}
		m := fresh()
		if out, err := ddl.Ensure(ctx, conn, m); err != nil || out.Rebuild || len(out.Changes) > 0 {
			t.Fatalf("fresh tables: %+v %v", out, err)
		}
		if safe, unsafe, err := ddl.Diff(ctx, conn, m); err != nil || len(safe)+len(unsafe) > 0 {
			t.Fatalf("fresh tables drift: %v %v %v", safe, unsafe, err)
		}
		m.Measures = append(m.Measures, serving.Measure{Name: "refunds", Agg: "sum", Type: "Int64"})
		out, err := ddl.Ensure(ctx, conn, m)
		if err != nil || !out.Rebuild {
			t.Fatalf("new measure: %+v err %v", out, err)
		}
		if cols := liveCols(t, conn, db, m.Table); strings.Contains(cols, "refunds") {
			t.Fatalf("new measure added to the live table by ALTER: %s", cols)
		}
		m = fresh()
		m.Measures[0].Type = "Decimal(38, 4)"
		if out, err := ddl.Ensure(ctx, conn, m); err != nil || !out.Rebuild {
			t.Fatalf("type change: %+v %v", out, err)
		}
		m = fresh()
		last := ddl.TargetColumns(m)[len(ddl.TargetColumns(m))-1].Name
		if err := conn.Exec(ctx, "ALTER TABLE "+ddl.Name(m, m.Table)+" DROP COLUMN "+serving.Q(last)); err != nil {
			t.Fatal(err)
		}
		if out, err := ddl.Ensure(ctx, conn, m); err != nil || !out.Rebuild || out.Changes[0].Column != last {
			t.Fatalf("dropped column %s: %+v %v", last, out, err)
		}
		if cols := liveCols(t, conn, db, m.Table); slices.Contains(strings.Split(cols, ","), last) {
			t.Fatalf("dropped column %s re-added: %s", last, cols)
		}
		// A helper table that drifted is recreated.
		if err := conn.Exec(ctx, "ALTER TABLE "+ddl.Name(m, m.Table+ddl.StagingSuffix)+" DROP COLUMN "+serving.Q(last)); err != nil {
			t.Fatal(err)
		}
		if _, err := ddl.Ensure(ctx, conn, m); err != nil {
			t.Fatal(err)
		}
		if cols := liveCols(t, conn, db, m.Table+ddl.StagingSuffix); !slices.Contains(strings.Split(cols, ","), last) {
			t.Fatalf("staging table not recreated: %s", cols)
		}
	}
	// The Date grain of older versions is a rebuild (Date wraps after 2149).
	m := kpi(db, "", false)
	m.Table = "old_date"
	old := strings.Replace(ddl.TargetTable(m, m.Table), "`report_date` Date32", "`report_date` Date", 1)
	if err := conn.Exec(ctx, old); err != nil {
		t.Fatal(err)
	}
	if out, err := ddl.Ensure(ctx, conn, m); err != nil || !out.Rebuild {
		t.Fatalf("Date grain: %+v %v", out, err)
	}
}

func liveCols(t *testing.T, conn interface {
	QueryRow(context.Context, string, ...any) driver.Row
}, db, table string) string {
	t.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), "SELECT arrayStringConcat(groupArray(name), ',') FROM system.columns WHERE database = ? AND table = ?", db, table).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEnsureFinalComparesFirst: an unchanged _final table is not re-created (its UUID
// stays), a changed definition replaces it, and so does the _final view of an older
// goldbridge: readers then find the same rows in the types they saw, in a Merge table.
func TestEnsureFinalComparesFirst(t *testing.T) {
	ctx := context.Background()
	conn := chtest.Conn(t)
	db := chtest.Database(t)
	m := kpi(db, "", true)
	final := m.Table + ddl.ViewSuffix
	table := func() (uuid, engine string) {
		t.Helper()
		if err := conn.QueryRow(ctx, "SELECT toString(uuid), engine FROM system.tables WHERE database = ? AND name = ?", db, final).Scan(&uuid, &engine); err != nil {
			t.Fatal(err)
		}
		return uuid, engine
	}
	if _, err := ddl.Ensure(ctx, conn, m); err != nil {
		t.Fatal(err)
	}
	first, engine := table()
	if engine != "Merge" {
		t.Fatalf("%s is a %s, want a Merge table", final, engine)
	}
	for range 2 {
		if _, err := ddl.Ensure(ctx, conn, m); err != nil {
			t.Fatal(err)
		}
		if err := ddl.EnsureFinal(ctx, conn, m); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := table(); got != first {
		t.Fatalf("unchanged _final table re-created: uuid %s -> %s", first, got)
	}
	// Another definition (a measure fewer) replaces it.
	m.Measures = m.Measures[:len(m.Measures)-1]
	if err := ddl.EnsureFinal(ctx, conn, m); err != nil {
		t.Fatal(err)
	}
	second, _ := table()
	if second == first {
		t.Fatal("changed _final table not replaced")
	}

	// The view an older goldbridge made, with a row of today in <t> (TTL): replaced by the Merge table,
	// which serves the row as the view did, column by column in the same types.
	exec := func(q string) {
		t.Helper()
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(fmt.Sprintf("INSERT INTO `%s`.`%s` (report_date, grouping_level, country, grouping_country, revenue, orders) SELECT today(), 'by_country', 'DE', 0, 12.5, 3", db, m.Table))
	exec(fmt.Sprintf("CREATE OR REPLACE VIEW `%s`.`%s` AS %s", db, final, ddl.FinalSelect(m, m.Table)))
	described := func() string {
		t.Helper()
		var s string
		if err := conn.QueryRow(ctx, "SELECT arrayStringConcat(groupArray(name || ' ' || type), ', ') FROM system.columns WHERE database = ? AND table = ?", db, final).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	read := func() string {
		t.Helper()
		var s string
		if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT toString(tuple(*)) FROM `%s`.`%s`", db, final)).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	viewCols, viewRow := described(), read()
	if _, engine := table(); engine != "View" {
		t.Fatalf("the old view is a %s", engine)
	}
	if err := ddl.EnsureFinal(ctx, conn, m); err != nil {
		t.Fatal(err)
	}
	if _, engine := table(); engine != "Merge" {
		t.Fatalf("the old view was not replaced: %s", engine)
	}
	if got := described(); got != viewCols {
		t.Errorf("columns %s, the view's %s", got, viewCols)
	}
	if got := read(); got != viewRow {
		t.Errorf("row %s, the view's %s", got, viewRow)
	}
}

// TestNameLimitsAreTheServers: serving.CheckNames's limit is the server's: in databases
// of two name lengths, a table name of exactly TableNameRoom-len(db) bytes is created and
// one byte more is refused; CheckNames accepts a served table leaving room for the
// longest suffix and refuses one byte more.
func TestNameLimitsAreTheServers(t *testing.T) {
	conn := chtest.Conn(t)
	ctx := context.Background()
	long := "gb_names_" + strings.Repeat("d", 91)
	if err := conn.Exec(ctx, "CREATE DATABASE "+long); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+long+" SYNC") })
	for _, db := range []string{chtest.Database(t), long} {
		room := serving.TableNameRoom - len(db)
		create := func(n int) error {
			return conn.Exec(ctx, "CREATE TABLE "+db+"."+strings.Repeat("t", n)+" (k Int32) ENGINE = MergeTree ORDER BY k")
		}
		if err := create(room); err != nil {
			t.Fatalf("database of %d bytes: a table name of %d bytes refused: %v", len(db), room, err)
		}
		if err := create(room + 1); err == nil {
			t.Fatalf("database of %d bytes: a table name of %d bytes accepted", len(db), room+1)
		}
		if err := serving.CheckNames(db, strings.Repeat("t", room-serving.LongestSuffix)); err != nil {
			t.Fatal(err)
		}
		if err := serving.CheckNames(db, strings.Repeat("t", room-serving.LongestSuffix+1)); err == nil {
			t.Fatalf("database of %d bytes: CheckNames accepts a table the push cannot create", len(db))
		}
	}
	if len(ddl.SyncTable) != serving.SyncTableLen {
		t.Fatalf("serving.SyncTableLen %d, sync table %q", serving.SyncTableLen, ddl.SyncTable)
	}
	for _, s := range []string{ddl.StagingSuffix, ddl.DetailSuffix, ddl.ViewSuffix, "_dist"} {
		if len(s) > serving.LongestSuffix {
			t.Fatalf("suffix %s is longer than serving.LongestSuffix", s)
		}
	}
}

// TestClusterDDLParses has the real server parse every statement of the ON CLUSTER,
// Replicated* variant (formatQuery: the server's own parser, ON CLUSTER included), which
// cannot run here (no Keeper: docs/scale-out.md); a statement cut short is refused, so
// the check can fail.
func TestClusterDDLParses(t *testing.T) {
	conn := chtest.Conn(t)
	ctx := context.Background()
	m := kpi("marts", "prod", true)
	stmts := ddl.Statements(m)
	states, err := ddl.BuildStates(m, "20260501")
	if err != nil {
		t.Fatal(err)
	}
	parse := func(q string) error {
		var out string
		return conn.QueryRow(ctx, "SELECT formatQuery(?)", q).Scan(&out)
	}
	for _, s := range append(stmts, states...) {
		if err := parse(s); err != nil {
			t.Errorf("the server does not parse:\n%s\n%v", s, err)
		}
		if !strings.Contains(s, "ON CLUSTER") && !strings.HasPrefix(s, "INSERT") {
			t.Errorf("cluster statement without ON CLUSTER:\n%s", s)
		}
	}
	if err := parse(strings.TrimSuffix(stmts[2], ")") + " ORDER BY"); err == nil {
		t.Fatal("a statement cut short parsed")
	}
}

// TestQuantilesOverNoValues: a quantiles measure over no values (Gold's NULL) is served as
// an empty array, not as zeros; over values it is the nearest rank.
func TestQuantilesOverNoValues(t *testing.T) {
	conn := chtest.Conn(t)
	m := kpi(chtest.Database(t), "", true)
	var ms serving.Measure
	for _, x := range m.Measures {
		if x.Agg == "quantiles" {
			ms = x
		}
	}
	for _, c := range []struct {
		values string
		want   []float64
	}{
		{"[]", []float64{}},
		{"[3, 1, 2, 5, 4]", []float64{3, 5}},
	} {
		var got []float64
		q := fmt.Sprintf("SELECT %s FROM (SELECT CAST(groupArrayArrayState(CAST(%s, 'Array(Float64)')), 'AggregateFunction(groupArray, Float64)') AS %s)",
			ddl.FinalExpr(m, ms), c.values, serving.Q(ddl.StateColumn(ms)))
		if err := conn.QueryRow(context.Background(), q).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("quantiles %v of %s: %v, want %v", ms.Quantiles, c.values, got, c.want)
		}
	}
}
