package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	dto "github.com/prometheus/client_model/go"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/maintain"
	"goldbridge/lakehouse/silver"
	"goldbridge/serving"
	"goldbridge/serving/hot/hotfake"
	"goldbridge/sync/pipeline"
)

// testPlan is a pipeline.Plan of fixed entities and marts.
type testPlan struct {
	entities map[string]pipeline.Entity
	marts    map[string]pipeline.Mart
	served   map[string]*serving.Mart
}

func (p testPlan) Entities() []string { return sortedKeys(p.entities) }
func (p testPlan) Marts() []string    { return sortedKeys(p.marts) }
func (p testPlan) Entity(name string) (pipeline.Entity, error) {
	e, ok := p.entities[name]
	if !ok {
		return e, fmt.Errorf("no entity %s", name)
	}
	return e, nil
}
func (p testPlan) Kafka(string) ([]bronze.KafkaSource, error) { return nil, nil }
func (p testPlan) PII(context.Context, *catalog.Lakehouse, string) (func([]byte) ([]byte, error), func([]byte) ([]byte, error), error) {
	return nil, nil, nil
}
func (p testPlan) Mart(name string) (pipeline.Mart, error) {
	m, ok := p.marts[name]
	if !ok {
		return m, fmt.Errorf("no mart %s", name)
	}
	return m, nil
}
func (p testPlan) Served(name string) (*serving.Mart, error) { return p.served[name], nil }
func (p testPlan) Maintenance() pipeline.Maintenance {
	return pipeline.Maintenance{Policy: func(string, string) maintain.Policy { return maintain.Policy{} }}
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// fakeHot is the in-memory hot tier (hotfake) with nothing to prepare.
type fakeHot struct {
	*hotfake.Target
}

func (fakeHot) Prepare(context.Context, *serving.Mart, *table.Table) error { return nil }

func flightsSpec() (silver.EntitySpec, gold.MartSpec) {
	typ := func(s string) silver.Type {
		t, err := silver.ParseType(s)
		if err != nil {
			panic(err)
		}
		return t
	}
	col := func(name, t string) silver.ColumnSpec {
		return silver.ColumnSpec{Name: name, Path: "$." + name, Type: typ(t), Required: true}
	}
	e := silver.EntitySpec{
		Name: "flights", Table: "silver.flights", QuarantineTable: "silver.flights_quarantine",
		Mode: silver.ModeAppend, Identity: silver.IdentityDelivery, EventTime: "dep", Lookback: time.Hour, Buckets: 2,
		Columns:           []silver.ColumnSpec{col("carrier", "string"), col("dep", "timestamp"), col("distance", "int64")},
		WarnQuarantinePct: 50, WarnDuplicatePct: 100, FailQuarantinePct: 100,
	}
	cols := map[string]silver.Type{silver.ColDeliveryID: typ("string")}
	for _, c := range e.Columns {
		cols[c.Name] = c.Type
	}
	m := gold.MartSpec{
		Name: "flights_daily", Table: "gold.flights_daily", SourceTable: e.Table,
		SourceKey: e.KeyColumns(), SourceColumns: cols,
		GrainColumn: "dep", GrainUnit: "day", GrainAs: "dep_date", Grouping: "none",
		Dims: []gold.Dim{{Name: "carrier", Type: typ("string")}},
		Measures: []gold.MeasureSpec{
			{Name: "flights", Agg: "count"},
			{Name: "distance", Agg: "sum", Column: "distance", InputType: typ("int64")},
		},
	}
	return e, m
}

// TestRunnerIsolatesSourcesAndServes is the package's promise: Run takes an entity and
// a mart through ingest, silver, gold and sync while another entity, whose landing
// directory is gone, fails on its own and is named in the error; Gold equals an oracle
// computed from the landed lines; the hot tier serves every partition; a second Run
// with nothing new answers sync from the push record without reaching the hot tier; a
// new file is taken through every stage again.
func TestRunnerIsolatesSourcesAndServes(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	landing, state := t.TempDir(), t.TempDir()
	es, ms := flightsSpec()
	broken := es
	broken.Name, broken.Table, broken.QuarantineTable = "broken", "silver.broken", "silver.broken_quarantine"
	served, err := serving.NewMart(ms, serving.Target{Database: "db", Table: "flights_daily", PartitionBy: "day", HotWindow: 30 * 24 * time.Hour, Distinct: "uniqExact"})
	if err != nil {
		t.Fatal(err)
	}
	plan := testPlan{
		entities: map[string]pipeline.Entity{
			"flights": {Bronze: "bronze.flights", Silver: es, Files: []bronze.FileSource{{Name: "landing", System: "bts_file", Dir: landing}}},
			"broken":  {Bronze: "bronze.broken", Silver: broken, Files: []bronze.FileSource{{Name: "gone", System: "bts_file", Dir: filepath.Join(landing, "gone")}}},
		},
		marts:  map[string]pipeline.Mart{"flights_daily": {Gold: ms, Reads: []string{"flights"}, Serving: true}},
		served: map[string]*serving.Mart{"flights_daily": served},
	}
	fake := fakeHot{&hotfake.Target{}}
	opens := 0
	newRunner := func(out io.Writer) *pipeline.Runner {
		return &pipeline.Runner{
			Lake: lh, Plan: plan, Metrics: pipeline.NewMetrics(), Log: slog.New(slog.DiscardHandler), Out: out, StateDir: state,
			Hot: pipeline.Hot{Name: "fake", Open: func(context.Context) (pipeline.Target, func(), error) {
				opens++
				return fake, func() {}, nil
			}},
		}
	}
	day := time.Now().UTC().Truncate(24 * time.Hour)
	flight := func(carrier string, daysAgo, dist int) string {
		return fmt.Sprintf(`{"carrier":%q,"dep":%q,"distance":%d}`, carrier, day.AddDate(0, 0, -daysAgo).Add(8*time.Hour).Format(time.RFC3339), dist)
	}
	a := []string{flight("AA", 1, 700), flight("AA", 1, 700), flight("DL", 1, 300), flight("AA", 2, 700), flight("UA", 3, 1200)}
	writeLines(t, filepath.Join(landing, "a.jsonl"), a)
	all := []string{"ingest", "silver", "gold", "sync"}

	var out bytes.Buffer
	r := newRunner(&out)
	err = r.Run(ctx, all, []string{"broken", "flights"}, []string{"flights_daily"})
	r.Close()
	if err == nil || !strings.Contains(err.Error(), "broken") || strings.Contains(err.Error(), "ingest flights") {
		t.Fatalf("run: %v, want the failure of broken's source only\n%s", err, out.String())
	}
	if got, want := lakehousetest.GoldFlights(t, lh), lakehousetest.FlightCounts(t, a); !maps.Equal(got, want) {
		t.Fatalf("gold\n%v\nwant\n%v", got, want)
	}
	var m dto.Metric
	if err := r.Metrics.Rows.WithLabelValues("ingest", "flights", "", "ingested").Write(&m); err != nil || m.GetCounter().GetValue() != float64(len(a)) {
		n := m.GetCounter().GetValue()
		t.Errorf("ingested rows metric %v, want %d", n, len(a))
	}
	if got := fake.Memory.Served("flights_daily"); len(got) != 3 || opens != 1 {
		t.Fatalf("served %v after %d opens, want 3 partitions after 1", got, opens)
	}
	st := r.Metrics.Status(ctx, lh, plan)
	if len(st) != 1 || st[0].NewestGrain != day.AddDate(0, 0, -1).Format(time.DateOnly) || st[0].LastSync == nil ||
		st[0].SyncLagSeconds == nil || *st[0].SyncLagSeconds != 0 || st[0].Error != "" {
		t.Errorf("status %+v", st)
	}
	if open := r.Metrics.RefreshState(ctx, lh, plan); len(open) != 0 {
		t.Errorf("open circuits %v", open)
	}

	out.Reset()
	r = newRunner(&out)
	if err := r.Run(ctx, all, []string{"flights"}, []string{"flights_daily"}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if opens != 1 || !strings.Contains(out.String(), "sync flights_daily") {
		t.Errorf("a run with nothing new reached the hot tier (%d opens) or printed no sync:\n%s", opens, out.String())
	}

	b := []string{flight("DL", 1, 300), flight("UA", 0, 1200)}
	writeLines(t, filepath.Join(landing, "b.jsonl"), b)
	r = newRunner(io.Discard)
	if err := r.Run(ctx, all, []string{"flights"}, []string{"flights_daily"}); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if got, want := lakehousetest.GoldFlights(t, lh), lakehousetest.FlightCounts(t, a, b); !maps.Equal(got, want) {
		t.Fatalf("gold after b\n%v\nwant\n%v", got, want)
	}
	if got := fake.Memory.Served("flights_daily"); len(got) != 4 || opens != 2 {
		t.Fatalf("served %v after %d opens, want 4 partitions after 2", got, opens)
	}
}

func writeLines(t *testing.T, path string, lines []string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}
