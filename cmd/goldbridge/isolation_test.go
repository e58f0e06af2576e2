package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// addEntity adds a source and an entity fed by it to the environment's config.
func (e *forgetEnv) addEntity(source, entity map[string]any, srcName, name string) {
	e.t.Helper()
	b, err := os.ReadFile(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		e.t.Fatal(err)
	}
	cfg["sources"].(map[string]any)[srcName] = source
	cfg["entities"].(map[string]any)[name] = entity
	out, err := yaml.Marshal(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	writeFile(e.t, e.cfg, string(out))
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestKafkaDownFileEntityStillServed: with a Kafka broker unreachable, the file-fed entity
// still goes through Silver, Gold and sync in the same run, and the run exits 1 naming the
// failed source (issue 17: nothing was ingested and no mart synced).
func TestKafkaDownFileEntityStillServed(t *testing.T) {
	e := newForgetEnv(t)
	e.addEntity(map[string]any{"type": "kafka", "system": "clicks", "brokers": []string{"127.0.0.1:1"}, "topic": "clicks"},
		map[string]any{
			"sources": []string{"clicks_kafka"},
			"bronze":  map[string]any{"table": "bronze.clicks"},
			"silver": map[string]any{"table": "silver.clicks", "quarantine_table": "silver.clicks_quarantine",
				"mode": "upsert", "key": []string{"id"}, "updated_at": "ts",
				"columns": []map[string]any{{"name": "id", "type": "string"}, {"name": "ts", "type": "timestamp"}}},
		}, "clicks_kafka", "clicks")
	e.run("demo", "generate", "--events", "2000", "--seed", "5")
	out, err := e.exec("run")
	if code := exitCode(err); code != exitFailure {
		t.Fatalf("run exit %d, want %d\n%s", code, exitFailure, tail(out, 4000))
	}
	for _, want := range []string{"ingest clicks from clicks_kafka", "ingest orders: 1 files", "silver orders:", "gold daily_revenue_kpi:"} {
		if !strings.Contains(out, want) {
			t.Errorf("run output lacks %q:\n%s", want, tail(out, 4000))
		}
	}
	// ClickHouse holds Gold: check finds no drift.
	if out := e.run("check"); !strings.Contains(out, "check daily_revenue_kpi: no drift") {
		t.Fatalf("check:\n%s", tail(out, 2000))
	}
}

// TestSiblingSourceAndCauseOfMissingGold is issue 37, item 2. The entity orders reads a
// second file source whose landing folder does not exist: its other source is still
// ingested and served (all of orders' files used to be skipped, although the log said
// "the other sources go on"). The entity clicks has only a missing folder: its mart's
// sync says gold had no Silver rows because ingest failed for clicks, not "(run gold
// first)" right after the run ran gold. The run exits 1 naming the failed sources only.
func TestSiblingSourceAndCauseOfMissingGold(t *testing.T) {
	e := newForgetEnv(t)
	gone := filepath.Join(e.state, "landing", "gone")
	e.editConfig(func(cfg map[string]any) {
		sources := cfg["sources"].(map[string]any)
		sources["orders_b"] = map[string]any{"type": "file", "system": "shopb", "path": gone + "_orders", "format": "jsonl"}
		sources["clicks_landing"] = map[string]any{"type": "file", "system": "web", "path": gone + "_clicks", "format": "jsonl"}
		orders := cfg["entities"].(map[string]any)["orders"].(map[string]any)
		orders["sources"] = []string{"orders_landing", "orders_b"}
		cfg["entities"].(map[string]any)["clicks"] = map[string]any{
			"sources": []string{"clicks_landing"},
			"silver": map[string]any{"mode": "upsert", "key": []string{"id"}, "updated_at": "ts",
				"columns": []map[string]any{{"name": "id", "type": "string"}, {"name": "ts", "type": "timestamp"}}},
		}
		cfg["marts"].(map[string]any)["clicks_daily"] = map[string]any{
			"source": "clicks", "grain": map[string]any{"column": "ts", "unit": "day"},
			"measures": []map[string]any{{"name": "clicks", "agg": "count"}},
		}
	})
	e.run("demo", "generate", "--events", "2000", "--seed", "5")
	out, err := e.exec("run")
	if code := exitCode(err); code != exitFailure {
		t.Fatalf("run exit %d, want %d\n%s", code, exitFailure, tail(out, 4000))
	}
	for _, want := range []string{
		"ingest orders: 1 files", "source orders_b: list landing dir", "sync daily_revenue_kpi: pushed",
		"sync clicks_daily: no Gold table: gold ran in this run but had no Silver rows to build it from (ingest failed for clicks in this run)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("run output lacks %q:\n%s", want, tail(out, 4000))
		}
	}
	if strings.Contains(out, "run gold first") || strings.Contains(out, "source orders_landing,") {
		t.Errorf("run output blames the wrong cause or source:\n%s", tail(out, 4000))
	}
}

// editConfig rewrites the environment's config through edit.
func (e *forgetEnv) editConfig(edit func(map[string]any)) {
	e.t.Helper()
	b, err := os.ReadFile(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		e.t.Fatal(err)
	}
	edit(cfg)
	out, err := yaml.Marshal(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	writeFile(e.t, e.cfg, string(out))
}
