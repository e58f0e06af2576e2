package config

import (
	"errors"
	"strings"
	"testing"
)

// TestDebeziumFormat checks format: debezium and its options: what validate accepts (no
// updated_at, no op, decimal_handling's default) and each mistake, with its path.
func TestDebeziumFormat(t *testing.T) {
	const base = `
version: 1
sources:
  land: {type: file, system: shop, path: /x}
entities:
  customers:
    sources: [land]
    silver:
      mode: upsert
      format: debezium
      debezium: {connector: postgresql}
      key: [id]
      columns:
        - {name: id, type: int64, required: true}
        - {name: balance, type: "decimal(12,2)"}
        - {name: birth, type: date, format: epoch_days}
`
	cfg, err := Parse([]byte(base), "/tmp/s", env(nil))
	if err != nil {
		t.Fatalf("the base config: %v", err)
	}
	if d := cfg.Entities["customers"].Silver.Debezium; d == nil || d.DecimalHandling != "precise" {
		t.Errorf("decimal_handling default: %+v", d)
	}
	if f := cfg.Entities["customers"].Silver.Format; f != "json" && f != "debezium" {
		t.Errorf("format = %q", f)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"unknown format", "format: debezium", "format: avro", "entities.customers.silver.format: must be json or debezium"},
		{"no options", "      debezium: {connector: postgresql}\n", "", "entities.customers.silver.debezium: required with format: debezium"},
		{"unknown connector", "connector: postgresql", "connector: oracle", "entities.customers.silver.debezium.connector: must be one of postgresql, mysql, sqlserver"},
		{"no connector", "{connector: postgresql}", "{decimal_handling: string}", "entities.customers.silver.debezium.connector: required"},
		{"decimal handling", "{connector: postgresql}", "{connector: mysql, decimal_handling: exact}", "entities.customers.silver.debezium.decimal_handling: must be one of precise, string, double"},
		{"path in after", "{name: balance, type:", "{name: balance, path: $.after.balance, type:", "entities.customers.silver.columns[1].path: with format: debezium a path is read in the row image"},
		{"op column", "      key: [id]\n", "      key: [id]\n      op: op\n", "entities.customers.silver.op: not with format: debezium"},
		{"append", "mode: upsert", "mode: append", "entities.customers.silver.mode: a debezium entity is mode upsert"},
		{"options without the format", "format: debezium", "format: json", "entities.customers.silver.debezium: only with format: debezium"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(base, tc.from, tc.to, 1)
			if src == base {
				t.Fatalf("%q not in the base config", tc.from)
			}
			_, err := Parse([]byte(src), "/tmp/s", env(nil))
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("want problems, got %v", err)
			}
			for _, p := range ps {
				if strings.HasPrefix(p.Path+": "+p.Msg, tc.want) {
					return
				}
			}
			t.Errorf("no %q among %v", tc.want, ps)
		})
	}
	// A json entity still needs updated_at.
	src := strings.Replace(strings.Replace(base, "format: debezium", "format: json", 1), "      debezium: {connector: postgresql}\n", "", 1)
	_, err = Parse([]byte(src), "/tmp/s", env(nil))
	if err == nil || !strings.Contains(err.Error(), "entities.customers.silver.updated_at") {
		t.Errorf("json upsert without updated_at: %v", err)
	}
}
