package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestProblemLines: every problem of a file, from decoding, Validate and an extra
// check, is reported at once with its config path and the line of that path in the
// file, or of its nearest ancestor there when the key is missing.
func TestProblemLines(t *testing.T) {
	src := `version: 1
sources:
  land: {type: file, system: shop, path: /x}
entities:
  orders:
    sources: [land, nope]
    silver:
      mode: upsert
      updated_at: updated_at
      columns:
        - {name: order_id, type: string}
        - name: updated_at
          type: timestamp
        - {name: amount, type: "decimal(18,2)"}
        - {name: _run_id, type: string}
        - {name: _RUN_ID, type: string}
      rules:
        - {id: F1, kind: filter, expr: 'amount >= 0', reason: negative}
marts:
  kpi:
    source: orders
    grain:
      column: updated_at
    dimensions: [country]
    measures:
      - {name: n, agg: count}
      - name: revenue
        agg: sum
        column: amont
    filter: 'amount >'
clickhouse:
  protocl: native
`
	extra := func(*Config) Problems {
		return Problems{{Path: "entities.orders.silver.rules[0].expr", Msg: "rule F1: refused"}}
	}
	_, err := Parse([]byte(src), "/tmp/s", env(nil), extra)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want Problems, got %v", err)
	}
	for _, want := range []struct {
		path string
		line int
		msg  string
	}{
		{"clickhouse.protocl", 32, `unknown key (did you mean "protocol"?)`}, // decoding
		{"entities.orders.sources[1]", 6, `unknown source "nope"`},           // a flow list item
		{"entities.orders.silver.key", 7, "required"},                        // missing: its parent's line
		{"entities.orders.silver.columns[3].name", 15, `"_run_id" is a column goldbridge adds itself`},
		// Two problems at one path: both.
		{"entities.orders.silver.columns[4].name", 16, `"_RUN_ID" is a column goldbridge adds itself`},
		{"entities.orders.silver.columns[4].name", 16, `column "_RUN_ID" differs from column "_run_id" only by case`},
		{"marts.kpi.dimensions[0]", 24, `unknown column "country"`},
		{"marts.kpi.measures[1].column", 29, `unknown column "amont"`}, // a block list item's key
		{"marts.kpi.filter", 30, "invalid expression"},
		{"entities.orders.silver.rules[0].expr", 18, "rule F1: refused"}, // an extra check's, in a flow mapping
	} {
		found := false
		for _, p := range ps {
			if p.Path == want.path && strings.HasPrefix(p.Msg, want.msg) {
				found = true
				if p.Line != want.line {
					t.Errorf("%s: %q at line %d, want line %d", want.path, p.Msg, p.Line, want.line)
				}
				if s := p.String(); !strings.HasPrefix(s, want.path+": "+want.msg) || !strings.HasSuffix(s, fmt.Sprintf(" (line %d)", want.line)) {
					t.Errorf("%s: rendered %q", want.path, s)
				}
			}
		}
		if !found {
			t.Errorf("no problem %q at %s in:\n%v", want.msg, want.path, err)
		}
	}
	if len(ps) != 10 {
		t.Errorf("%d problems, want 10:\n%v", len(ps), err)
	}
}
