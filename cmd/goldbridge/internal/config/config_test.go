package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestExampleIsValid(t *testing.T) {
	cfg, err := Load("../../../../examples/orders.yaml", "/tmp/gb-state")
	if err != nil {
		t.Fatalf("examples/orders.yaml: %v", err)
	}
	e := cfg.Entities["orders"]
	checks := map[string][2]string{
		"catalog uri":      {cfg.Lakehouse.Catalog.URI, "/tmp/gb-state/catalog.db"},
		"warehouse":        {cfg.Lakehouse.Warehouse, "file:///tmp/gb-state/warehouse"},
		"landing path":     {cfg.Sources["orders_landing"].Path, "/tmp/gb-state/landing/orders"},
		"bronze table":     {e.Bronze.Table, "bronze.orders"},
		"silver table":     {e.Silver.Table, "silver.orders"},
		"quarantine table": {e.Silver.QuarantineTable, "silver.orders_quarantine"},
		"gold table":       {cfg.Marts["daily_revenue_kpi"].Table, "gold.daily_revenue_kpi"},
		"ch database":      {cfg.ClickHouse.Database, "marts"},
		"ch local path":    {cfg.ClickHouse.Local.Path, "/tmp/gb-state/clickhouse"},
		"currency default": {*e.Silver.Columns[3].Default, "USD"},
		"amount path":      {e.Silver.Columns[2].Path, "$.amount"},
		"grain":            {cfg.Marts["daily_revenue_kpi"].Grain.As, "report_date"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", name, c[0], c[1])
		}
	}
	if got := cfg.Marts["daily_revenue_kpi"].Serving.HotWindow.D(); got != 90*24*time.Hour {
		t.Errorf("hot window = %v", got)
	}
	if !cfg.ClickHouse.IsEmbedded() {
		t.Error("embedded should default to true")
	}
}

func TestEveryProblemIsReported(t *testing.T) {
	src := `
version: 1
clickhouse:
  protocl: native
sources:
  land: {type: file, system: shop, path: /x}
entities:
  orders:
    sources: [land]
    silver:
      mode: upsert
      updated_at: updated_at
      columns:
        - {name: order_id, type: string}
        - {name: updated_at, type: timestamp}
        - {name: amount, type: "decimal(18,2)", default: abc}
marts:
  kpi:
    source: orders
    grain: {column: created, unit: day}
    measures: [{name: n, agg: count}]
`
	_, err := Parse([]byte(src), "/tmp/s", env(nil))
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want Problems, got %v", err)
	}
	want := []string{
		"clickhouse.protocl",
		"entities.orders.silver.columns[2].default",
		"entities.orders.silver.key",
		"marts.kpi.grain.column",
	}
	var got []string
	for _, p := range ps {
		got = append(got, p.Path)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("problems = %v\nwant paths %v", ps, want)
	}
	if !strings.Contains(ps[0].Msg, `did you mean "protocol"`) || ps[0].Line != 4 {
		t.Errorf("unknown key problem = %v", ps[0])
	}
	if !strings.Contains(ps[2].Msg, "required") {
		t.Errorf("key message = %q", ps[2].Msg)
	}
}

func TestDecodeProblems(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string // the first problems, as "path: substring"
	}{
		{"wrong scalar types", "clickhouse:\n  max_retries: many\n  embedded: perhaps\n",
			[]string{"clickhouse.max_retries: expected a integer", "clickhouse.embedded: expected a boolean"}},
		{"list expected", "entities:\n  e:\n    sources: land\n", []string{"entities.e.sources: expected a list"}},
		{"unset env", "clickhouse:\n  password: ${NOPE}\n", []string{"clickhouse.password: environment variable NOPE is not set"}},
		{"bad duration", "marts:\n  m:\n    serving: {hot_window: 9x}\n", []string{"marts.m.serving.hot_window: invalid duration"}},
		{"unknown nested", "entities:\n  e:\n    silver:\n      columns:\n        - {name: a, typ: string}\n",
			[]string{`entities.e.silver.columns[0].typ: unknown key (did you mean "type"?)`}},
		{"invalid yaml", "a: [\n", []string{"(file): invalid YAML"}},
		{"empty", "", []string{"(file): empty config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "/tmp/s", env(nil))
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("want Problems, got %v", err)
			}
			// Decoding problems come first; validation of the rest may add more after them.
			if len(ps) < len(tt.want) {
				t.Fatalf("got %d problems %v, want %v first", len(ps), ps, tt.want)
			}
			for i, w := range tt.want {
				path, sub, _ := strings.Cut(w, ": ")
				if ps[i].Path != path || !strings.Contains(ps[i].Msg, sub) {
					t.Errorf("problem %d = %q, want %q", i, ps[i], w)
				}
			}
		})
	}
}

func TestEnvExpansion(t *testing.T) {
	src := `
clickhouse:
  embedded: ${EMB}
  addresses: ["${CH_HOST}:9000"]
  password: ${CH_PASSWORD}
  user: ${CH_USER:-reader}
  max_retries: ${RETRIES}
  database: "$${literal}"
`
	_, err := Parse([]byte(src), "/tmp/s", env(map[string]string{"EMB": "false", "CH_HOST": "ch1", "CH_PASSWORD": "s3cr3t", "RETRIES": "7"}))
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 1 || ps[0].Path != "clickhouse.database" {
		t.Fatalf("want only the database identifier problem, got %v", err)
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Fatal("secret leaked into the error")
	}
	cfg, err := Parse([]byte(strings.Replace(src, `"$${literal}"`, "marts", 1)), "/tmp/s",
		env(map[string]string{"EMB": "false", "CH_HOST": "ch1", "CH_PASSWORD": "s3cr3t", "RETRIES": "7"}))
	if err != nil {
		t.Fatal(err)
	}
	ch := cfg.ClickHouse
	if ch.IsEmbedded() || ch.Addresses[0] != "ch1:9000" || ch.User != "reader" || ch.MaxRetries != 7 || ch.Password.Reveal() != "s3cr3t" {
		t.Fatalf("expanded wrongly: %+v", ch)
	}
	for _, s := range []string{fmt.Sprint(ch.Password), fmt.Sprintf("%v %+v %#v", ch, ch, ch)} {
		if strings.Contains(s, "s3cr3t") {
			t.Fatalf("secret printed: %s", s)
		}
	}
}

func TestDuration(t *testing.T) {
	tests := map[string]time.Duration{"90d": 90 * 24 * time.Hour, "26h": 26 * time.Hour, "1d12h": 36 * time.Hour, "15m": 15 * time.Minute}
	for in, want := range tests {
		d, err := ParseDuration(in)
		if err != nil || d.D() != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, d, err, want)
		}
	}
	for _, bad := range []string{"", "d", "x1d", "1dd", "-5h", "3 days"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) should fail", bad)
		}
	}
	if s := Duration(90 * 24 * time.Hour).String(); s != "90d" {
		t.Errorf("String = %q", s)
	}
}

func TestByteSize(t *testing.T) {
	for in, want := range map[string]ByteSize{"2GiB": 2 << 30, "1.5GB": 1_500_000_000, "512MiB": 512 << 20, "1000": 1000, "0": 0, "-1": -1, " 3 MB ": 3_000_000} {
		var b ByteSize
		if err := b.UnmarshalText([]byte(in)); err != nil || b != want {
			t.Errorf("ByteSize(%q) = %d, %v; want %d", in, b, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "-2", "-1GB", "1XB", "99999999999EB"} {
		var b ByteSize
		if err := b.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("ByteSize(%q) = %d, want an error", bad, b)
		}
	}
}

// exampleWindows is the windows line of examples/orders.yaml.
const exampleWindows = "windows: {days: [7, 30], levels: [total, by_country]}"

func TestValidationRules(t *testing.T) {
	base, err := os.ReadFile("../../../../examples/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, from, to, wantPath string
	}{
		{"bad cron", `cron: "*/15 * * * *"`, `cron: "every tuesday"`, "schedules.every_15m.cron"},
		{"unknown stage", "stages: [ingest, silver, gold, sync]", "stages: [ingest, bake]", "schedules.every_15m.stages[1]"},
		{"unknown source", "sources: [orders_landing]", "sources: [nope]", "entities.orders.sources[0]"},
		{"bad type", `type: "decimal(18,2)"}`, `type: "decimal(99,2)"}`, "entities.orders.silver.columns[2].type"},
		{"rule prefix", "id: F1", "id: X1", "entities.orders.silver.rules[0].id"},
		{"bad rule expr", "expr: amount >= 0", "expr: amount >=", "entities.orders.silver.rules[0].expr"},
		{"sum of string", "agg: sum,            column: amount", "agg: sum,            column: country", "marts.daily_revenue_kpi.measures[0].column"},
		{"bad agg", "agg: avg,", "agg: median,", "marts.daily_revenue_kpi.measures[3].agg"},
		{"grain not time", "grain: {column: created_at", "grain: {column: country", "marts.daily_revenue_kpi.grain.column"},
		{"bad partition", "partition_by: day", "partition_by: week", "marts.daily_revenue_kpi.serving.partition_by"},
		{"bad distinct", "partition_by: day", "partition_by: day\n      distinct: roaring", "marts.daily_revenue_kpi.serving.distinct"},
		{"window of one day", exampleWindows, "windows: {days: [1, 7]}", "marts.daily_revenue_kpi.serving.windows.days[0]"},
		{"windows not ascending", exampleWindows, "windows: {days: [30, 7]}", "marts.daily_revenue_kpi.serving.windows.days[1]"},
		{"window past a year", exampleWindows, "windows: {days: [367]}", "marts.daily_revenue_kpi.serving.windows.days[0]"},
		{"window of an unknown level", exampleWindows, "windows: {days: [7], levels: [total, by_city]}", "marts.daily_revenue_kpi.serving.windows.levels[1]"},
		{"window levels without days", exampleWindows, "windows: {levels: [total]}", "marts.daily_revenue_kpi.serving.windows.days"},
		{"bad table", "table: gold.daily_revenue_kpi", "table: Gold-KPI", "marts.daily_revenue_kpi.table"},
		{"external without addresses", "embedded: true ", "embedded: false", "clickhouse.addresses"},
		{"shards without cluster", "embedded: true ", "embedded: false\n  shards: [[h1:9000, h2:9000]]\n ", "clickhouse.cluster"},
		{"shards and addresses", "embedded: true ", "embedded: false\n  cluster: gb\n  addresses: [h:9000]\n  shards: [[h1:9000]]\n ", "clickhouse.addresses"},
		{"shard without node", "embedded: true ", "embedded: false\n  cluster: gb\n  shards: [[h1:9000], []]\n ", "clickhouse.shards[1]"},
		{"node listed twice", "embedded: true ", "embedded: false\n  cluster: gb\n  shards: [[h1:9000], [h2:9000, h1:9000]]\n ", "clickhouse.shards[1][1]"},
		{"node not host:port", "embedded: true ", "embedded: false\n  cluster: gb\n  shards: [[h1]]\n ", "clickhouse.shards[0][0]"},
		{"shards on the embedded server", "embedded: true ", "embedded: true\n  shards: [[h1:9000]]\n ", "clickhouse.shards"},
		{"negative reader queries", "embedded: true ", "embedded: true\n  local: {reader_queries: -1}\n ", "clickhouse.local.reader_queries"},
		{"reader queries past the bound", "embedded: true ", "embedded: true\n  local: {reader_queries: 1025}\n ", "clickhouse.local.reader_queries"},
		{"reader queries on an external server", "embedded: true ", "embedded: false\n  addresses: [h:9000]\n  local: {reader_queries: 8}\n ", "clickhouse.local.reader_queries"},
		{"reader timeout under a second", "embedded: true ", "embedded: true\n  local: {reader_timeout: 500ms}\n ", "clickhouse.local.reader_timeout"},
		{"reader timeout past the bound", "embedded: true ", "embedded: true\n  local: {reader_timeout: 2d}\n ", "clickhouse.local.reader_timeout"},
		{"reader memory under the least", "embedded: true ", "embedded: true\n  local: {reader_memory: 1000000}\n ", "clickhouse.local.reader_memory"},
		{"reader memory over the server's", "embedded: true ", "embedded: true\n  local: {reader_memory: 2147483648, max_server_memory: 1073741824}\n ", "clickhouse.local.reader_memory"},
		{"reader timeout not whole seconds", "embedded: true ", "embedded: true\n  local: {reader_timeout: 1500ms}\n ", "clickhouse.local.reader_timeout"},
		{"reader timeout on an external server", "embedded: true ", "embedded: false\n  addresses: [h:9000]\n  local: {reader_timeout: 30s}\n ", "clickhouse.local.reader_timeout"},
		{"reader memory on an external server", "embedded: true ", "embedded: false\n  addresses: [h:9000]\n  local: {reader_memory: 2147483648}\n ", "clickhouse.local.reader_memory"},
		{"bad warehouse", "warehouse: file://${STATE_DIR}/warehouse", "warehouse: /plain/path", "lakehouse.warehouse"},
		{"unknown codec", "warehouse: file://${STATE_DIR}/warehouse", "warehouse: file://${STATE_DIR}/warehouse\n  compression: {gold: lz4}", "lakehouse.compression.gold"},
		{"zstd level past the bound", "warehouse: file://${STATE_DIR}/warehouse", "warehouse: file://${STATE_DIR}/warehouse\n  compression: {bronze: \"zstd:23\"}", "lakehouse.compression.bronze"},
		{"a level of snappy", "warehouse: file://${STATE_DIR}/warehouse", "warehouse: file://${STATE_DIR}/warehouse\n  compression: {silver: \"snappy:1\"}", "lakehouse.compression.silver"},
		{"sql uri scheme", "    type: sql ", "    type: sql\n    uri: mysql://db/iceberg\n ", "lakehouse.catalog.uri"},
		{"postgres uri without database", "    type: sql ", "    type: sql\n    uri: postgres://gb@db:5432\n ", "lakehouse.catalog.uri"},
		{"postgres on the local warehouse", "    type: sql ", "    type: sql\n    uri: postgres://gb@db:5432/iceberg\n ", "lakehouse.warehouse"},
		{"lease ttl on sqlite", "    type: sql ", "    type: sql\n    lease_ttl: 30s\n ", "lakehouse.catalog.lease_ttl"},
		{"lease ttl too short", "    type: sql ", "    type: sql\n    uri: postgres://gb@db:5432/iceberg\n    lease_ttl: 2s\n ", "lakehouse.catalog.lease_ttl"},
		{"bad listen", "listen: 127.0.0.1:9464", "listen: nowhere", "server.listen"},
		{"not-null unknown", "columns: [report_date]", "columns: [nope]", "marts.daily_revenue_kpi.checks[1].columns"},
		{"snapshot with grain column", "    filter: not is_deleted", "    mode: snapshot\n    filter: not is_deleted", "marts.daily_revenue_kpi.grain.column"},
		{"join column clash", "    filter: not is_deleted", "    joins: [{entity: orders, on: {order_id: order_id}, columns: [country]}]\n    filter: not is_deleted", "marts.daily_revenue_kpi.joins[0].columns"},
		{"is_deleted filter on append", "      mode: upsert\n", "      mode: append\n      event_time: created_at\n", "marts.daily_revenue_kpi.filter"},
		{"bad pass bytes", "      mode: upsert\n", "      mode: upsert\n      pass_bytes: lots\n", "entities.orders.silver.pass_bytes"},
		{"negative pass bytes", "      mode: upsert\n", "      mode: upsert\n      pass_bytes: -2GB\n", "entities.orders.silver.pass_bytes"},
		{"negative gold pass rows", "    filter: not is_deleted", "    pass_rows: -2\n    filter: not is_deleted", "marts.daily_revenue_kpi.pass_rows"},
		{"filter unknown column", "    filter: not is_deleted", "    filter: not is_deleted and channel == \"web\"", "marts.daily_revenue_kpi.filter"},
		{"pii nested field", "    bronze:\n      table: bronze.orders\n", "    bronze:\n      table: bronze.orders\n    pii: {subject: $.user_id, fields: [$.customer.email]}\n", "entities.orders.pii.fields[0]"},
		{"pii subject encrypted", "    bronze:\n      table: bronze.orders\n", "    bronze:\n      table: bronze.orders\n    pii: {subject: user_id, fields: [$.user_id]}\n", "entities.orders.pii.fields[0]"},
		{"pii without subject", "    bronze:\n      table: bronze.orders\n", "    bronze:\n      table: bronze.orders\n    pii: {fields: [$.email]}\n", "entities.orders.pii.subject"},
		{"whole-payload path", `{name: currency,   type: string,        default: USD}`, `{name: currency,   type: string,        default: USD, path: "$"}`, "entities.orders.silver.columns[3].path"},
		{"indexed path", `{name: currency,   type: string,        default: USD}`, `{name: currency,   type: string,        default: USD, path: "$.items[0]"}`, "entities.orders.silver.columns[3].path"},
		{"empty segment", `{name: currency,   type: string,        default: USD}`, `{name: currency,   type: string,        default: USD, path: "$.a..b"}`, "entities.orders.silver.columns[3].path"},
		{"renamed from a declared column", `{name: currency,   type: string,        default: USD}`, `{name: currency,   type: string,        default: USD, renamed_from: country}`, "entities.orders.silver.columns[3].renamed_from"},
		{"table too long for ClickHouse", "      table: daily_revenue_kpi\n", "      table: " + strings.Repeat("t", 196) + "\n", "marts.daily_revenue_kpi.serving.table"},
		{"database too long for ClickHouse", "  database: marts\n", "  database: " + strings.Repeat("d", 198) + "\n", "clickhouse.database"},
		{"tail wait too long", "    format: jsonl\n", "    format: jsonl\n    tail_wait: 8d\n", "sources.orders_landing.tail_wait"},
		{"lookback with keys table", "      mode: upsert\n", "      mode: append\n      event_time: created_at\n      lookback: 7d\n      keys_table: silver.order_keys\n", "entities.orders.silver.lookback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantProblemAt(t, string(base), tt.wantPath, [2]string{tt.from, tt.to})
		})
	}
	t.Run("windows of an hour grain", func(t *testing.T) {
		wantProblemAt(t, string(base), "marts.daily_revenue_kpi.serving.windows",
			[2]string{"unit: day", "unit: hour"})
	})
	t.Run("a measure named window_days", func(t *testing.T) {
		wantProblemAt(t, string(base), "marts.daily_revenue_kpi.serving.windows",
			[2]string{"name: total_orders", "name: window_days"})
	})
	t.Run("windows on a cluster", func(t *testing.T) {
		wantProblemAt(t, string(base), "marts.daily_revenue_kpi.serving.windows",
			[2]string{"embedded: true ", "embedded: false\n  cluster: gb\n  addresses: [h:9000]\n "})
	})
	// Two edits: bitmaps, and the mart served by a cluster.
	t.Run("bitmap on a cluster", func(t *testing.T) {
		wantProblemAt(t, string(base), "marts.daily_revenue_kpi.serving.distinct",
			[2]string{"partition_by: day", "partition_by: day\n      distinct: bitmap"},
			[2]string{"embedded: true ", "embedded: false\n  cluster: gb\n  addresses: [h:9000]\n "})
	})
}

// wantProblemAt fails t unless src, with each edit's first text replaced by its second
// once, parses into Problems with one at path.
func wantProblemAt(t *testing.T, src, path string, edits ...[2]string) {
	t.Helper()
	for _, e := range edits {
		if !strings.Contains(src, e[0]) {
			t.Fatalf("example lacks %q", e[0])
		}
		src = strings.Replace(src, e[0], e[1], 1)
	}
	_, err := Parse([]byte(src), "/tmp/s", env(nil))
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want Problems, got %v", err)
	}
	for _, p := range ps {
		if p.Path == path {
			return
		}
	}
	t.Fatalf("no problem at %s; got %v", path, ps)
}

// TestSharedCatalogConfig: a postgres:// sql catalog over an s3:// warehouse, and a REST
// catalog whose warehouse is a name, are valid; the PII key store needs the embedded
// SQLite catalog, so pii on a postgres catalog is refused with its path.
func TestSharedCatalogConfig(t *testing.T) {
	base, err := os.ReadFile("../../../../examples/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	shared := strings.Replace(string(base), "  warehouse: file://${STATE_DIR}/warehouse", "  warehouse: s3://bucket/wh", 1)
	pg := strings.Replace(shared, "    type: sql ", "    type: sql\n    uri: postgres://gb@db:5432/iceberg\n ", 1)
	if _, err := Parse([]byte(pg), "/tmp/s", env(nil)); err != nil {
		t.Errorf("postgres + s3: %v", err)
	}
	withTTL := strings.Replace(pg, "    uri: postgres://gb@db:5432/iceberg\n", "    uri: postgres://gb@db:5432/iceberg\n    lease_ttl: 2m\n", 1)
	if c, err := Parse([]byte(withTTL), "/tmp/s", env(nil)); err != nil || c.Lakehouse.Catalog.LeaseTTL.D() != 2*time.Minute {
		t.Errorf("postgres with lease_ttl 2m: %v", err)
	}
	rest := strings.Replace(strings.Replace(string(base), "  warehouse: file://${STATE_DIR}/warehouse", "  warehouse: lakehouse", 1),
		"    type: sql ", "    type: rest\n    uri: http://127.0.0.1:8181\n ", 1)
	if _, err := Parse([]byte(rest), "/tmp/s", env(nil)); err != nil {
		t.Errorf("rest with a warehouse name: %v", err)
	}
	withPII := strings.Replace(pg, "    bronze:\n      table: bronze.orders\n", "    bronze:\n      table: bronze.orders\n    pii: {subject: $.user_id, fields: [$.email]}\n", 1)
	_, err = Parse([]byte(withPII), "/tmp/s", env(nil))
	var ps Problems
	if !errors.As(err, &ps) || !slices.ContainsFunc(ps, func(p Problem) bool { return p.Path == "entities.orders.pii" }) {
		t.Errorf("pii on a postgres catalog: want a problem at entities.orders.pii, got %v", err)
	}
}

// TestIsDeletedOnlyOnUpsert: an append entity has no is_deleted column, so a mart that
// uses it as a dimension or in its filter is rejected with the path (the Gold stage would
// fail or, for a dimension, write NULLs); on an upsert entity both are valid.
func TestIsDeletedOnlyOnUpsert(t *testing.T) {
	base, err := os.ReadFile("../../../../examples/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(base), "    dimensions: [country, category]", "    dimensions: [country, category, is_deleted]", 1)
	if _, err := Parse([]byte(src), "/tmp/s", env(nil)); err != nil {
		t.Fatalf("upsert: %v", err)
	}
	src = strings.Replace(src, "      mode: upsert\n", "      mode: append\n      event_time: created_at\n", 1)
	_, err = Parse([]byte(src), "/tmp/s", env(nil))
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want Problems, got %v", err)
	}
	var paths []string
	for _, p := range ps {
		paths = append(paths, p.Path)
	}
	for _, want := range []string{"marts.daily_revenue_kpi.dimensions[2]", "marts.daily_revenue_kpi.filter"} {
		if !slices.Contains(paths, want) {
			t.Errorf("no problem at %s; got %v", want, ps)
		}
	}
}

// TestDocsCoverEveryKey keeps docs/config.md in step with the schema: every YAML key of
// the Config structs must be documented there.
func TestDocsCoverEveryKey(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, path := range yamlPaths(reflect.TypeFor[Config](), "") {
		re := regexp.MustCompile("`" + regexp.QuoteMeta(path) + "`")
		if !re.Match(doc) {
			missing = append(missing, path)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("docs/config.md does not document:\n  %s", strings.Join(missing, "\n  "))
	}
}

// yamlPaths lists the documented form of every key: maps use <name>, lists use [].
func yamlPaths(t reflect.Type, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	switch t.Kind() {
	case reflect.Struct:
		if t == reflect.TypeFor[time.Time]() {
			return nil
		}
		for i := range t.NumField() {
			name, opts, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if opts == "inline" {
				out = append(out, yamlPaths(t.Field(i).Type, prefix)...)
				continue
			}
			if name == "" || name == "-" {
				continue
			}
			p := join(prefix, name)
			out = append(out, p)
			out = append(out, yamlPaths(t.Field(i).Type, p)...)
		}
	case reflect.Map:
		out = append(out, yamlPaths(t.Elem(), prefix+".<name>")...)
	case reflect.Slice:
		out = append(out, yamlPaths(t.Elem(), prefix+"[]")...)
	}
	return out
}

// TestDerivedKeyIsValid is issue 19's "Why" 1 (validate part): a derive rule's column may
// be the key; a float column still may not.
func TestDerivedKeyIsValid(t *testing.T) {
	base, err := os.ReadFile("../../../../examples/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(base), "key: [order_id]", "key: [row_key]", 1)
	src = strings.Replace(src, "      rules:\n", "      rules:\n        - {id: E0, kind: derive, column: row_key, type: string, expr: 'hash(order_id, amount)'}\n", 1)
	if _, err := Parse([]byte(src), "/tmp/s", env(nil)); err != nil {
		t.Fatalf("derived key: %v", err)
	}
	src = strings.Replace(src, "type: string, expr: 'hash", "type: float64, expr: 'hash", 1)
	_, err = Parse([]byte(src), "/tmp/s", env(nil))
	if err == nil || !strings.Contains(err.Error(), "a float column cannot be a key") {
		t.Fatalf("float key: %v", err)
	}
}

// TestQuantileLevels: the levels validate accepts are the ones Gold and serving take
// (mart.CheckQuantile): (0, 1], 1 being the largest value.
func TestQuantileLevels(t *testing.T) {
	base, err := os.ReadFile("../../../../examples/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	from := "      - {name: avg_order_value,  agg: avg,            column: amount}"
	for _, c := range []struct {
		levels string
		ok     bool
	}{{"[0.5, 0.9, 1]", true}, {"[0.5]", true}, {"[0]", false}, {"[1.5]", false}, {"[-0.1]", false}} {
		src := strings.Replace(string(base), from, from+"\n      - {name: amount_q, agg: quantiles, column: amount, quantiles: "+c.levels+"}", 1)
		_, err := Parse([]byte(src), "/tmp/s", env(nil))
		var ps Problems
		errors.As(err, &ps)
		bad := slices.ContainsFunc(ps, func(p Problem) bool { return strings.HasSuffix(p.Path, ".quantiles") })
		if bad == c.ok || c.ok && err != nil {
			t.Errorf("quantiles %s: %v", c.levels, err)
		}
	}
}

// TestConditionalMeasures: count_if and sum_if take an if expression compiled against
// the mart's row columns; a bad one, a missing one, one on another aggregate and sum_if
// of a text column are each reported at their measure's path.
func TestConditionalMeasures(t *testing.T) {
	const m = "marts.daily_revenue_kpi.measures[4]"
	for _, c := range []struct {
		measure string
		path    string // "" when valid
		msg     string
	}{
		{`{name: paid_revenue, agg: sum_if, column: amount, if: 'status == "paid"'}`, "", ""},
		{`{name: paid_orders, agg: count_if, if: 'status in ["paid", "shipped"] && amount >= 100'}`, "", ""},
		{`{name: paid_orders, agg: count_if, if: 'not is_deleted'}`, "", ""},
		{`{name: paid_orders, agg: count_if}`, m + ".if", "required for count_if"},
		{`{name: paid_revenue, agg: sum_if, column: amount, if: '  '}`, m + ".if", "required for sum_if"},
		{`{name: paid_revenue, agg: sum_if, column: amount, if: 'stat == "paid"'}`, m + ".if", "invalid expression"},
		{`{name: paid_revenue, agg: sum_if, column: amount, if: 'amount + 1'}`, m + ".if", "invalid expression"},
		{`{name: paid_revenue, agg: sum_if, column: amount, if: 'status == '}`, m + ".if", "invalid expression"},
		{`{name: paid_revenue, agg: sum_if, column: status, if: 'status == "paid"'}`, m + ".column", "needs a numeric column"},
		{`{name: paid_revenue, agg: sum_if, if: 'status == "paid"'}`, m + ".column", "required for sum_if"},
		{`{name: revenue2, agg: sum, column: amount, if: 'status == "paid"'}`, m + ".if", "only used with agg: count_if or sum_if"},
	} {
		checkMeasure(t, c.measure, c.path, c.msg)
	}
}

// TestByMeasures: max_by and min_by take a by column of the mart's rows; a missing one,
// an unknown one, one on another aggregate and a hidden column's clash are each
// reported at their measure's path, and so is max of a text (which serving refuses).
func TestByMeasures(t *testing.T) {
	const m = "marts.daily_revenue_kpi.measures[4]"
	for _, c := range []struct {
		measure string
		path    string // "" when valid
		msg     string
	}{
		{`{name: last_status, agg: max_by, column: status, by: updated_at}`, "", ""},
		{`{name: first_amount, agg: min_by, column: amount, by: created_at}`, "", ""},
		{`{name: last_status, agg: max_by, column: status}`, m + ".by", "required for max_by (the column whose largest value"},
		{`{name: first_amount, agg: min_by, column: amount}`, m + ".by", "smallest value"},
		{`{name: last_status, agg: max_by, column: status, by: updated}`, m + ".by", `unknown column "updated"`},
		{`{name: last_status, agg: max_by, by: updated_at}`, m + ".column", "required for max_by"},
		{`{name: revenue2, agg: sum, column: amount, by: updated_at}`, m + ".by", "only used with agg: max_by or min_by"},
		{`{name: top_status, agg: max, column: status}`, m + ".column", "max of a string column is not served"},
		{"{name: last_status, agg: max_by, column: status, by: updated_at}\n      - {name: last_status__by, agg: count}", "marts.daily_revenue_kpi.measures[5].name", "last_status__by"},
	} {
		checkMeasure(t, c.measure, c.path, c.msg)
	}
}

// checkMeasure validates examples/orders.yaml with measure added after the mart's
// measures[3]: valid when path is "", else with a problem at path whose text holds msg.
func checkMeasure(t *testing.T, measure, path, msg string) {
	t.Helper()
	base, err := os.ReadFile("../../../../examples/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	from := "      - {name: avg_order_value,  agg: avg,            column: amount}"
	src := strings.Replace(string(base), from, from+"\n      - "+measure, 1)
	_, err = Parse([]byte(src), "/tmp/s", env(nil))
	if path == "" {
		if err != nil {
			t.Errorf("%s: %v", measure, err)
		}
		return
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Errorf("%s: want problems, got %v", measure, err)
		return
	}
	if !slices.ContainsFunc(ps, func(p Problem) bool { return p.Path == path && strings.Contains(p.Msg, msg) }) {
		t.Errorf("%s: no %q at %s; got %v", measure, msg, path, ps)
	}
}

// TestPIIAccepted: a valid pii section passes validate.
func TestPIIAccepted(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "examples", "orders.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(base), "    bronze:\n      table: bronze.orders\n",
		"    bronze:\n      table: bronze.orders\n    pii: {subject: $.user_id, fields: [$.email, phone]}\n", 1)
	cfg, err := Parse([]byte(src), "/tmp/s", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Entities["orders"].PII; p == nil || PIIKey(p.Subject) != "user_id" || PIIKey(p.Fields[1]) != "phone" {
		t.Fatalf("pii: %+v", p)
	}
}

// TestLookupColumns is issue 19's "Why" 3 and 8: a lookup may rename what it brings, so one
// file backs two lookups; the same names twice, an entity looking itself up or an unknown
// one, a column the looked-up entity lacks and an unknown on_change are validate problems
// with their paths, not a failed first run.
func TestLookupColumns(t *testing.T) {
	base, err := os.ReadFile("../../../../examples/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	with := func(rules string) string {
		return strings.Replace(string(base), "      rules:\n", "      rules:\n"+rules, 1)
	}
	renamed := with(`        - {id: E7, kind: lookup, lookup: {file: z.csv, on: {country: code}, columns: {country_name: name, country_region: region}}}
        - {id: E8, kind: lookup, lookup: {file: z.csv, on: {category: code}, columns: [name2]}}
`)
	cfg, err := Parse([]byte(renamed), "/tmp/s", env(nil))
	if err != nil {
		t.Fatalf("renaming lookups: %v", err)
	}
	var got []string
	for _, r := range cfg.Entities["orders"].Silver.Rules {
		if r.Lookup != nil {
			for _, c := range r.Lookup.Columns {
				got = append(got, c.As+"="+c.From)
			}
		}
	}
	if want := []string{"country_name=name", "country_region=region", "name2=name2"}; !slices.Equal(got, want) {
		t.Fatalf("columns %v, want %v", got, want)
	}
	for _, tc := range []struct{ rules, path string }{
		{`        - {id: E7, kind: lookup, lookup: {file: z.csv, on: {country: code}, columns: [Borough]}}
        - {id: E8, kind: lookup, lookup: {file: z.csv, on: {category: code}, columns: [Borough]}}
`, "entities.orders.silver.rules[1].lookup.columns.Borough"},
		{`        - {id: E7, kind: lookup, lookup: {file: z.csv, on: {country: code}, columns: {country: name}}}
`, "entities.orders.silver.rules[0].lookup.columns.country"},
		{`        - {id: E7, kind: lookup, lookup: {entity: orders, on: {country: order_id}, columns: [status]}}
`, "entities.orders.silver.rules[0].lookup.entity"},
		{`        - {id: E7, kind: lookup, lookup: {entity: shops, on: {country: code}, columns: [name]}}
`, "entities.orders.silver.rules[0].lookup.entity"},
		{`        - {id: E7, kind: lookup, lookup: {file: z.csv, on: {country: code}, columns: [name], on_change: sometimes}}
`, "entities.orders.silver.rules[0].lookup.on_change"},
		{`        - {id: E7, kind: lookup, lookup: {file: z.csv, on: {country: code}, columns: name}}
`, "entities.orders.silver.rules[0].lookup.columns"},
	} {
		_, err := Parse([]byte(with(tc.rules)), "/tmp/s", env(nil))
		var ps Problems
		if !errors.As(err, &ps) || !slices.ContainsFunc(ps, func(p Problem) bool { return p.Path == tc.path }) {
			t.Errorf("no problem at %s; got %v", tc.path, err)
		}
	}
}

// TestNormalizeType is issue 19's "Why" 4 (validate part): a normalize may change its
// column's type, which marts then see; an unknown type is a problem with its path.
func TestNormalizeType(t *testing.T) {
	base, err := os.ReadFile("../../../../examples/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(base), "      rules:\n", "      rules:\n        - {id: N9, kind: normalize, column: country, type: int32, expr: 'int(country)'}\n", 1)
	_, err = Parse([]byte(src), "/tmp/s", env(nil))
	var ps Problems
	// country is a dimension of the mart either way; the new type must reach the mart checks:
	// a sum over it becomes valid.
	src2 := strings.Replace(src, "agg: sum,            column: amount", "agg: sum,            column: country", 1)
	if _, err2 := Parse([]byte(src2), "/tmp/s", env(nil)); err != nil || err2 != nil {
		t.Fatalf("normalize to int32: %v / sum over it: %v", err, err2)
	}
	_, err = Parse([]byte(strings.Replace(src, "type: int32, expr: 'int(", "type: int99, expr: 'int(", 1)), "/tmp/s", env(nil))
	if !errors.As(err, &ps) || !slices.ContainsFunc(ps, func(p Problem) bool { return p.Path == "entities.orders.silver.rules[0].type" }) {
		t.Fatalf("unknown type: %v", err)
	}
}

// TestCSVNullValues is issue 19's "Why" 4 (config part): csv.null_values reaches the file
// source as written (unset: nil, Bronze's default; []: none), and is bounded.
func TestCSVNullValues(t *testing.T) {
	base, err := os.ReadFile("../../../../examples/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	with := func(line string) string {
		return strings.Replace(string(base), "    format: jsonl\n", "    format: jsonl\n"+line, 1)
	}
	for _, tc := range []struct {
		line string
		want *[]string
	}{
		{"", nil},
		{"    csv: {null_values: []}\n", &[]string{}},
		{"    csv: {null_values: ['', NA]}\n", &[]string{"", "NA"}},
	} {
		cfg, err := Parse([]byte(with(tc.line)), "/tmp/s", env(nil))
		if err != nil {
			t.Fatalf("%q: %v", tc.line, err)
		}
		got := cfg.Sources["orders_landing"].CSV.NullValues
		if (got == nil) != (tc.want == nil) || got != nil && !slices.Equal(*got, *tc.want) {
			t.Errorf("%q: null_values %v, want %v", tc.line, got, tc.want)
		}
	}
	_, err = Parse([]byte(with("    csv: {null_values: ['"+strings.Repeat("x", 300)+"']}\n")), "/tmp/s", env(nil))
	var ps Problems
	if !errors.As(err, &ps) || !slices.ContainsFunc(ps, func(p Problem) bool { return p.Path == "sources.orders_landing.csv.null_values[0]" }) {
		t.Fatalf("long null value: %v", err)
	}
}

// TestHotWindowAnchor is issue 19's "Why" 6 (config part): hot_window_anchor is clock or
// data; with data there is no TTL backstop by default and an explicit one is refused.
func TestHotWindowAnchor(t *testing.T) {
	base, err := os.ReadFile("../../../../examples/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	with := func(lines string) string {
		return strings.Replace(string(base), "      hot_window: 90d\n", "      hot_window: 90d\n"+lines, 1)
	}
	const sp = "marts.daily_revenue_kpi.serving"
	cfg, err := Parse([]byte(with("")), "/tmp/s", env(nil))
	if sv := cfg.Marts["daily_revenue_kpi"].Serving; err != nil || sv.HotWindowAnchor != "clock" || sv.TTL.D() != 120*24*time.Hour {
		t.Fatalf("default: %+v %v", sv, err)
	}
	cfg, err = Parse([]byte(with("      hot_window_anchor: data\n")), "/tmp/s", env(nil))
	if sv := cfg.Marts["daily_revenue_kpi"].Serving; err != nil || sv.HotWindowAnchor != "data" || sv.TTL != 0 {
		t.Fatalf("data: %+v %v", sv, err)
	}
	for lines, path := range map[string]string{
		"      hot_window_anchor: newest\n":                sp + ".hot_window_anchor",
		"      hot_window_anchor: data\n      ttl: 400d\n": sp + ".ttl",
	} {
		_, err := Parse([]byte(with(lines)), "/tmp/s", env(nil))
		var ps Problems
		if !errors.As(err, &ps) || !slices.ContainsFunc(ps, func(p Problem) bool { return p.Path == path }) {
			t.Errorf("%q: %v, want a problem at %s", lines, err, path)
		}
	}
}

// TestNamesAsTheSourceHasThem is issue 19's "Why" 2: a column keeps its case (VendorID,
// read at $.VendorID), in Silver and as a Gold dimension or measure; two names of one
// table that differ only by case, a reserved name in another case and a name too long
// for ClickHouse are problems with their path.
func TestNamesAsTheSourceHasThem(t *testing.T) {
	base, err := os.ReadFile("../../../../examples/orders.yaml")
	if err != nil {
		t.Fatal(err)
	}
	edit := func(pairs ...string) string {
		src := string(base)
		for i := 0; i < len(pairs); i += 2 {
			if !strings.Contains(src, pairs[i]) {
				t.Fatalf("example lacks %q", pairs[i])
			}
			src = strings.Replace(src, pairs[i], pairs[i+1], 1)
		}
		return src
	}
	const col = "        - {name: currency,   type: string,        default: USD}\n"
	mixed := edit(col, col+"        - {name: VendorID, type: int64}\n",
		"dimensions: [country, category]", "dimensions: [country, category, VendorID]",
		"    measures:\n", "    measures:\n      - {name: VendorSum, agg: sum, column: VendorID}\n")
	cfg, err := Parse([]byte(mixed), "/tmp/s", env(nil))
	if err != nil {
		t.Fatalf("VendorID: %v", err)
	}
	cols := cfg.Entities["orders"].Silver.Columns
	if c := cols[4]; c.Name != "VendorID" || c.Path != "$.VendorID" {
		t.Fatalf("column %+v, want VendorID at $.VendorID", c)
	}
	for _, tc := range []struct{ name, src, path, msg string }{
		{"case twins", edit(col, col+"        - {name: VendorID, type: int64}\n        - {name: vendorid, type: int64}\n"),
			"entities.orders.silver.columns[5].name", `column "vendorid" differs from column "VendorID" only by case`},
		{"derive twin", edit(col, col+"        - {name: VendorID, type: int64}\n", "      rules:\n", "      rules:\n        - {id: E9, kind: derive, column: VENDORID, type: int64, expr: 'VendorID'}\n"),
			"entities.orders.silver.rules[0].column", `column "VENDORID" differs from column "VendorID" only by case`},
		{"lookup twin", edit("      rules:\n", "      rules:\n        - {id: E9, kind: lookup, lookup: {file: z.csv, on: {country: code}, columns: {Country: name}}}\n"),
			"entities.orders.silver.rules[0].lookup.columns.Country", `column "Country" differs from column "country" only by case`},
		{"reserved in another case", edit(col, col+"        - {name: _Event_ID, type: string}\n"),
			"entities.orders.silver.columns[4].name", `"_Event_ID" is a column goldbridge adds itself (_event_id`},
		{"reserved silver column", edit(col, col+"        - {name: _version_hash, type: string}\n"),
			"entities.orders.silver.columns[4].name", `"_version_hash" is a column goldbridge adds itself`},
		{"too long", edit(col, col+"        - {name: "+strings.Repeat("V", 128)+", type: string}\n"),
			"entities.orders.silver.columns[4].name", "longer than ClickHouse accepts (127 bytes)"},
		{"not an identifier", edit(col, col+"        - {name: Vendor-ID, type: string}\n"),
			"entities.orders.silver.columns[4].name", `invalid column name "Vendor-ID"`},
		{"key in another case", edit("key: [order_id]", "key: [Order_ID]"),
			"entities.orders.silver.key[0]", `unknown column "Order_ID" (names are case-sensitive: did you mean "order_id"?)`},
		{"gold case twins", edit("    measures:\n", "    measures:\n      - {name: Country, agg: count}\n"),
			"marts.daily_revenue_kpi.measures[0].name", `column "Country" differs from column "country" only by case`},
		{"grouping flag clash", edit("    measures:\n", "    measures:\n      - {name: Grouping_Country, agg: count}\n"),
			"marts.daily_revenue_kpi.measures[0].name", `column "Grouping_Country" differs from column "grouping_country" only by case`},
		{"gold reserved", edit("    measures:\n", "    measures:\n      - {name: Grouping_Level, agg: count}\n"),
			"marts.daily_revenue_kpi.measures[0].name", `"Grouping_Level" is a column goldbridge adds itself`},
		{"hidden column too long", edit("    measures:\n", "    measures:\n      - {name: "+strings.Repeat("m", 121)+", agg: avg, column: amount}\n"),
			"marts.daily_revenue_kpi.measures[0].name", "goldbridge adds the column"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "/tmp/s", env(nil))
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("want Problems, got %v", err)
			}
			for _, p := range ps {
				if p.Path == tc.path && strings.Contains(p.Msg, tc.msg) {
					return
				}
			}
			t.Fatalf("no problem at %s saying %q; got %v", tc.path, tc.msg, ps)
		})
	}
}

// TestDeliveryIdentity: identity: delivery is valid on an append entity without a key,
// and every config it cannot serve is a problem at its path: with a key (ambiguous: which
// identity?), on an upsert entity, an unknown identity, and an append entity with neither
// a key nor identity: delivery (whose message points to it).
func TestDeliveryIdentity(t *testing.T) {
	base, err := os.ReadFile("../../../../examples/events.yaml")
	if err != nil {
		t.Fatal(err)
	}
	keyed := "      key: [event_id, source]         "
	if !strings.Contains(string(base), keyed) {
		t.Fatalf("events.yaml lacks %q", keyed)
	}
	cfg := func(to string) string { return strings.Replace(string(base), keyed, to, 1) }
	c, err := Parse([]byte(cfg("      identity: delivery")), "/tmp/s", env(nil))
	if err != nil {
		t.Fatalf("identity: delivery without a key: %v", err)
	}
	if sv := c.Entities["app_events"].Silver; sv.Identity != "delivery" || len(sv.Key) != 0 {
		t.Fatalf("silver %+v", sv)
	}
	if c, err := Parse(base, "/tmp/s", env(nil)); err != nil || c.Entities["app_events"].Silver.Identity != "key" {
		t.Fatalf("the default identity: %v", err)
	}
	for _, tc := range []struct{ name, to, path, msg string }{
		{"key and delivery", "      identity: delivery\n      key: [event_id, source]", "entities.app_events.silver.key", "not with identity: delivery"},
		{"empty key and delivery", "      identity: delivery\n      key: []", "", ""},
		{"neither", "      key: []", "entities.app_events.silver.key", "identity: delivery"},
		{"unknown", "      identity: row\n      key: [event_id, source]", "entities.app_events.silver.identity", "must be one of key, delivery"},
		{"delivery on upsert", "      identity: delivery\n      updated_at: event_time", "entities.app_events.silver.identity", "append mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := cfg(tc.to)
			if tc.name == "delivery on upsert" {
				src = strings.Replace(strings.Replace(src, "mode: append ", "mode: upsert ", 1), "      keys_table: silver.app_events_keys\n", "", 1)
			}
			_, err := Parse([]byte(src), "/tmp/s", env(nil))
			if tc.path == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("want Problems, got %v", err)
			}
			for _, p := range ps {
				if p.Path == tc.path && strings.Contains(p.Msg, tc.msg) {
					return
				}
			}
			t.Fatalf("no problem at %s saying %q; got %v", tc.path, tc.msg, ps)
		})
	}
}
