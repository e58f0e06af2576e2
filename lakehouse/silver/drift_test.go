package silver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"goldbridge/lakehouse/lakehousetest"
)

// driftSpec is eventsSpec with a nested column ($.customer.id) and a rule that reads a
// column named differently from its field (cust, from customer.id).
func driftSpec() EntitySpec {
	spec := eventsSpec()
	spec.Columns = append(spec.Columns, ColumnSpec{Name: "cust", Path: "$.customer.id", Type: Type{Kind: String}})
	spec.Rules = append(spec.Rules, RuleSpec{ID: "F2", Kind: "filter", Expr: `cust != "blocked"`, Reason: "blocked"})
	return spec
}

// driftLines are n events: every one carries the declared fields and a customer object
// with an undeclared member (email: nested, not reported); from row 3000 on every third
// carries delivery_address (its first value at row 3000), every 500th a "note" object
// (the first undeclared field, at row 499),
// and row 4101 is quarantined (F1) while carrying delivery_address. Rows span three parse
// chunks, so the first values are checked across chunks and workers.
func driftLines(n int) []string {
	lines := make([]string, n)
	for i := range n {
		amount := "10"
		if i == 4101 {
			amount = "-1"
		}
		extra := ""
		if i >= 3000 && i%3 == 0 {
			extra += fmt.Sprintf(`,"delivery_address":"%d Main St"`, i)
		}
		if i%500 == 499 {
			extra += fmt.Sprintf(`,"note":{"by":"u%d","text":"hi"}`, i)
		}
		lines[i] = fmt.Sprintf(`{"event_id":"e%d","user_id":"u","amount":%s,"event_ts":"2026-01-10T10:00:00Z","customer":{"id":"c%d","email":"x@y"}%s}`,
			i, amount, i%7, extra)
	}
	return lines
}

// undeclaredOracle reads the lines with encoding/json: the top-level fields outside
// declared, in order of their first line, with their line counts and first value.
func undeclaredOracle(t *testing.T, lines []string, declared ...string) []UndeclaredField {
	t.Helper()
	var out []UndeclaredField
	at := map[string]int{}
	for _, l := range lines {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		// encoding/json's map has no order: walk the keys in the line's order.
		dec := json.NewDecoder(strings.NewReader(l))
		_, _ = dec.Token()
		for dec.More() {
			tok, _ := dec.Token()
			k := tok.(string)
			var skip json.RawMessage
			_ = dec.Decode(&skip)
			if slices.Contains(declared, k) {
				continue
			}
			if i, ok := at[k]; ok {
				out[i].Rows++
				continue
			}
			var first bytes.Buffer
			if err := json.Compact(&first, m[k]); err != nil {
				t.Fatal(err)
			}
			at[k] = len(out)
			out = append(out, UndeclaredField{Field: k, Rows: 1, First: first.String()})
		}
	}
	return out
}

// TestUndeclaredFieldsReported is issue 42's schema drift: a source that starts sending
// delivery_address was parsed as before and nothing said so. Now the run reports each
// undeclared top-level field with the rows carrying it and its first value (against an
// oracle read with encoding/json), in one pass and in passes, records it in the snapshot
// summary and prints it; the declared fields, the field a rule reads through its column,
// customer.email (nested under the declared customer) and the ignored fields are not
// reported. At the default severity (warning) the run commits.
func TestUndeclaredFieldsReported(t *testing.T) {
	lines := driftLines(5000)
	want := undeclaredOracle(t, lines, "event_id", "user_id", "amount", "event_ts", "customer")
	if len(want) != 2 || want[0].Field != "note" || want[1].Field != "delivery_address" || want[1].First != `"3000 Main St"` {
		t.Fatalf("oracle %+v", want) // the oracle itself, as the test means it
	}
	for _, passRows := range []int64{0, 1} {
		t.Run(fmt.Sprintf("pass_rows=%d", passRows), func(t *testing.T) {
			ctx := context.Background()
			lh := lakehousetest.Open(t)
			landing := t.TempDir()
			writeLanding(t, landing, "1.jsonl", lines...)
			ingestInto(t, lh, "bronze.events", landing)
			spec := driftSpec()
			res, err := Run(ctx, lh, spec, "bronze.events", Options{PassRows: passRows})
			if err != nil {
				t.Fatal(err)
			}
			if res.Read != 5000 || res.Quarantined != 1 {
				t.Fatalf("counts %+v", res.Counts)
			}
			q := res.Quality
			if !slices.Equal(q.Undeclared, want) || q.UndeclaredOverflow != 0 {
				t.Fatalf("undeclared %+v (overflow %d), want %+v", q.Undeclared, q.UndeclaredOverflow, want)
			}
			detail := `2 top-level fields the spec does not read: note (10 rows, first {"by":"u499","text":"hi"}), delivery_address (667 rows, first "3000 Main St")`
			if wantF := []Failure{{Check: CheckUndeclared, Severity: SeverityWarning, Detail: detail}}; !slices.Equal(q.Failures, wantF) {
				t.Fatalf("failures %+v, want %+v", q.Failures, wantF)
			}
			if !slices.Contains(q.Lines(), "quality undeclared: FAIL (warning): "+detail) {
				t.Errorf("lines %q", q.Lines())
			}
			tbl, err := lh.LoadTable(ctx, spec.Table)
			if err != nil {
				t.Fatal(err)
			}
			var stored Quality
			if err := json.Unmarshal([]byte(tbl.CurrentSnapshot().Summary.Properties[PropQuality]), &stored); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(stored.Undeclared, want) {
				t.Errorf("summary undeclared %+v", stored.Undeclared)
			}
			if got := len(tableRows(t, lh, spec.Table)); got != 4999 {
				t.Errorf("silver rows %d", got)
			}
		})
	}
	t.Run("ignored_fields", func(t *testing.T) { // note is not read on purpose
		lh := lakehousetest.Open(t)
		landing := t.TempDir()
		writeLanding(t, landing, "1.jsonl", lines...)
		ingestInto(t, lh, "bronze.events", landing)
		spec := driftSpec()
		spec.IgnoredFields = []string{"note"}
		res, err := Run(context.Background(), lh, spec, "bronze.events", Options{})
		if err != nil || !slices.Equal(res.Quality.Undeclared, want[1:]) {
			t.Fatalf("undeclared %+v, %v; want %+v", res.Quality.Undeclared, err, want[1:])
		}
	})
}

// TestUndeclaredStrictCommitsNothing: with quality.severity.undeclared critical, a run
// whose payloads carry an undeclared field fails with ErrCriticalCheck naming it and
// commits nothing (the tables and the warehouse's files as before); the run without
// drift before it committed.
func TestUndeclaredStrictCommitsNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	lh := lakehousetest.OpenDir(t, dir)
	landing := t.TempDir()
	spec := eventsSpec()
	spec.KeysTable = "silver.events_keys"
	spec.Severity.Undeclared = SeverityCritical
	writeLanding(t, landing, "1.jsonl", event("e1", "2026-01-10T10:00:00Z", "50"))
	ingestInto(t, lh, "bronze.events", landing)
	if res, err := Run(ctx, lh, spec, "bronze.events", Options{}); err != nil || res.Current != 1 || len(res.Quality.Undeclared) != 0 {
		t.Fatalf("run without drift: %+v, %v", res, err)
	}
	tables := []string{spec.Table, spec.QuarantineTable, spec.KeysTable}
	before := lakeState(t, lh, tables)
	writeLanding(t, landing, "2.jsonl", event("e2", "2026-01-11T10:00:00Z", "5"),
		strings.TrimSuffix(event("e3", "2026-01-11T11:00:00Z", "7"), "}")+`,"delivery_address":"1 Elm St"}`)
	ingestInto(t, lh, "bronze.events", landing)
	files := warehouseFiles(t, dir)
	res, err := Run(ctx, lh, spec, "bronze.events", Options{})
	want := `silver events: critical quality check failed: undeclared: 1 top-level fields the spec does not read: delivery_address (1 rows, first "1 Elm St"); nothing committed`
	if !errors.Is(err, ErrCriticalCheck) || err.Error() != want {
		t.Fatalf("strict run: %v\nwant %s", err, want)
	}
	if res.SnapshotID != 0 || res.QuarantineSnapshotID != 0 || res.KeysSnapshotID != 0 {
		t.Fatalf("result %+v", res)
	}
	if after := lakeState(t, lh, tables); !slices.Equal(after, before) {
		t.Fatalf("the refused run changed the tables:\n%s\nwant\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	if got := warehouseFiles(t, dir); !slices.Equal(got, files) {
		t.Fatalf("the refused run left files: %v", diff(got, files))
	}
}

// TestUndeclaredBound: past MaxUndeclaredFields names the first ones in scan order are
// listed and every other occurrence is counted as overflow; names and values are
// clipped.
func TestUndeclaredBound(t *testing.T) {
	ps, err := newParser(driftSpec().Columns)
	if err != nil {
		t.Fatal(err)
	}
	var run fieldTally
	row := make([]Value, len(ps.cols))
	long := strings.Repeat("é", 100) // 200 bytes
	for chunk := range 2 {
		var c fieldTally
		ps.tally = &c
		for r := range 3 {
			var b strings.Builder
			b.WriteString(`{"event_id":"e","user_id":"u","event_ts":"2026-01-10T10:00:00Z"`)
			for f := range 70 { // rows 0-2 of chunk 0: f0..f69, then f70..f139 twice
				fmt.Fprintf(&b, `,"f%d":%d`, f+70*min(r+chunk, 1), r)
			}
			fmt.Fprintf(&b, `,%q:%q,"f0":1}`, long, long) // f0 twice in a row counts once
			ps.parse([]byte(b.String()), row)
		}
		run.absorb(&c)
	}
	if len(run.fields) != MaxUndeclaredFields {
		t.Fatalf("%d fields", len(run.fields))
	}
	// Chunk 0: f0..f69 (row 0), the long name, then f70..f98 fill the 100; the rest of
	// rows 1-2 (f99..f139: 41 names twice) overflow, and chunk 1 adds 3 rows of them.
	if f := run.fields[0]; f.Field != "f0" || f.Rows != 6 || f.First != "0" {
		t.Errorf("f0 %+v", f)
	}
	if f := run.fields[70]; f.Field != strings.Repeat("é", 64)+"…" || f.Rows != 6 || f.First != `"`+strings.Repeat("é", 31)+"…" {
		t.Errorf("long %+v", f)
	}
	if f := run.fields[99]; f.Field != "f98" || f.Rows != 5 {
		t.Errorf("last %+v", f)
	}
	if want := int64(41*2 + 41*3); run.overflow != want {
		t.Errorf("overflow %d, want %d", run.overflow, want)
	}
}

// TestUndeclaredDebezium: in a Debezium event the row image's fields are checked, not
// the envelope's (source, ts_ms, transaction) nor a flattened event's add.fields and
// __deleted.
func TestUndeclaredDebezium(t *testing.T) {
	d, _ := dbzTestParser(t, ConnectorPostgres, DecimalPrecise, true)
	var tally fieldTally
	d.tally = &tally
	row := make([]Value, len(d.cols))
	img := `{"id":7,"name":"Ann","tier":"gold","balance":"Av1L","updated_at":1700000000123456,"birth":19000,"notes":"x","vip":true}`
	for _, p := range []string{
		`{"before":null,"after":` + img + `,"source":{"connector":"postgresql","lsn":100},"op":"c","ts_ms":5,"transaction":null}`,
		`{"schema":{},"payload":{"before":{"id":7,"region":"eu"},"after":null,"source":{"lsn":101},"op":"d","ts_ms":6}}`,
		strings.TrimSuffix(img, "}") + `,"__op":"u","__lsn":102,"__source_ts_ms":1,"__deleted":"false"}`,
	} {
		if ev, reason := d.parse([]byte(p), row); reason != "" || ev.tombstone {
			t.Fatalf("%s: %s", p, reason)
		}
	}
	want := []UndeclaredField{{Field: "vip", Rows: 2, First: "true"}, {Field: "region", Rows: 1, First: `"eu"`}}
	if !slices.Equal(tally.fields, want) || tally.overflow != 0 {
		t.Fatalf("undeclared %+v, want %+v", tally.fields, want)
	}
}
