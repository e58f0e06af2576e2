package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestEventsExample runs examples/events.yaml as a new user would (demo generate, run per
// landing) over four landings of the app event stream, with each anti-join mode: the
// keys table it ships with, and `lookback: 1d` instead. After each run it compares Silver
// (every row, duplicates included), the quarantine counts by reason, the run's own counts,
// Gold and app_events_daily_final with an oracle that reads the generated JSON lines
// itself and applies seed 002's steps by hand: drop NULL keys and bad rows, deduplicate
// the increment, anti-join against the stored keys (all of them, or those whose event time
// is at most a day before the new row's), append. Then a run with nothing new must change
// nothing. Events re-sent more than a day after their stored copy are appended a second
// time with the lookback and dropped with the keys table (docs/silver.md, "The lookback
// trade-off").
func TestEventsExample(t *testing.T) {
	for _, mode := range []struct {
		name     string
		lookback time.Duration // 0: the keys table
	}{{"keys_table", 0}, {"lookback", 24 * time.Hour}} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel() // two ClickHouses for a minute: half the wall time
			e := newExampleEnv(t, "events.yaml", func(cfg map[string]any) {
				if mode.lookback == 0 {
					return
				}
				sv := cfg["entities"].(map[string]any)["app_events"].(map[string]any)["silver"].(map[string]any)
				delete(sv, "keys_table")
				sv["lookback"] = "1d"
			})
			o := &eventsOracle{lookback: mode.lookback, reasons: map[string]int{}}
			for landing := 1; landing <= 4; landing++ {
				e.run("demo", "generate", "--dataset", "events", "--landing", strconv.Itoa(landing), "--seed", "11")
				want := o.increment(t, filepath.Join(e.state, "landing", "events", fmt.Sprintf("events_%d.jsonl", landing)))
				// A sync, a query and a clickhouse query each start a ClickHouse (~8 s on a
				// loaded machine): landings 1 and 3 go through Gold only, 2 and 4 through run
				// (4's sync replaces partitions 2's pushed), and the whole is checked after 4.
				var out string
				if landing%2 == 1 {
					out = e.run("ingest") + e.run("silver") + e.run("gold")
				} else {
					out = e.run("run")
				}
				if got := silverCounts(t, out); got != want {
					t.Errorf("landing %d: silver counts %s, oracle %s", landing, got, want)
				}
			}
			rows := checkEvents(t, e, o)
			twice := o.appendedTwice()
			if mode.lookback == 0 && twice != 0 || mode.lookback != 0 && twice < 5 {
				t.Fatalf("oracle: %d keys appended twice with %s", twice, mode.name)
			}
			keys := map[string]bool{}
			for _, r := range rows {
				f := strings.SplitN(r, "\t", 3)
				keys[f[0]+"\t"+f[1]] = true
			}
			if got := len(rows) - len(keys); got != twice {
				t.Errorf("keys Silver holds twice: %d, oracle %d", got, twice)
			}
			t.Logf("%s: %d silver rows (%d keys appended twice), %d duplicates, quarantined %v",
				mode.name, len(o.silver), twice, o.duplicates, o.reasons)

			before := e.stdout("tables")
			out := e.run("run")
			for _, want := range []string{" 0 bronze rows", "pushed 0 partitions", "dropped 0"} {
				if !strings.Contains(out, want) {
					t.Errorf("a run with nothing new: no %q in\n%s", want, out)
				}
			}
			if after := e.stdout("tables"); after != before {
				t.Errorf("a run with nothing new changed tables:\n%s\nthen\n%s", before, after)
			}
		})
	}
}

// appEvent is a Silver row as the oracle types it; amount is its text with two decimals
// ("" is NULL).
type appEvent struct {
	id, source, user, typ, amount, country string
	at                                     time.Time
	duration                               int64
}

// eventsOracle is seed 002's anti-join, applied by hand to each landing in turn.
type eventsOracle struct {
	lookback   time.Duration // 0: every stored key (the keys table)
	silver     []appEvent    // in append order
	reasons    map[string]int
	duplicates int
}

// increment types one landing's lines, quarantines what fails, deduplicates the rest by
// key (the first line wins), anti-joins it against Silver and appends what is left. It
// returns the run's counts as goldbridge prints them.
func (o *eventsOracle) increment(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ id, source string }
	stored := map[key][]time.Time{}
	for _, r := range o.silver {
		stored[key{r.id, r.source}] = append(stored[key{r.id, r.source}], r.at)
	}
	seen := map[key]bool{}
	read, appended, dups, bad := 0, 0, 0, 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		read++
		row, reason := typeAppEvent(t, sc.Bytes())
		if reason != "" {
			o.reasons[reason]++
			bad++
			continue
		}
		k := key{row.id, row.source}
		if seen[k] {
			dups++ // a retry: the increment is deduplicated first
			continue
		}
		seen[k] = true
		dup := false
		for _, at := range stored[k] {
			if o.lookback == 0 || !at.Before(row.at.Add(-o.lookback)) {
				dup = true
			}
		}
		if dup {
			dups++
			continue
		}
		o.silver = append(o.silver, row)
		appended++
	}
	o.duplicates += dups
	return fmt.Sprintf("%d = %d + %d + %d", read, appended, dups, bad)
}

// appendedTwice is the number of keys Silver holds more than once.
func (o *eventsOracle) appendedTwice() int {
	n := map[string]int{}
	for _, r := range o.silver {
		n[r.id+"\x1f"+r.source]++
	}
	twice := 0
	for _, c := range n {
		twice += c - 1
	}
	return twice
}

// typeAppEvent types one JSON line by examples/events.yaml (columns in order, then F1,
// F2, then the key and event time) and returns the row or its quarantine reason class.
func typeAppEvent(t *testing.T, line []byte) (appEvent, string) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("oracle: %s: %v", line, err)
	}
	str := func(name string) (string, bool) {
		switch v := m[name].(type) {
		case nil:
			return "", false
		case string:
			return v, true
		case json.Number:
			return v.String(), true
		default:
			t.Fatalf("oracle: %s: %s is %T", line, name, v)
		}
		return "", false
	}
	var r appEvent
	id, hasID := str("event_id")
	src, hasSrc := str("source")
	r.id, r.source = id, src
	var ok bool
	if r.user, ok = str("user_id"); !ok {
		return r, "missing_user_id"
	}
	if r.typ, ok = str("event_type"); !ok {
		return r, "missing_event_type"
	}
	ts, hasTime := str("event_time")
	if hasTime {
		at, err := time.Parse(time.RFC3339, ts)
		if err != nil {
			return r, "invalid_event_time"
		}
		r.at = at.UTC()
	}
	dur, hasDur := str("duration_ms")
	if hasDur {
		n, err := strconv.ParseInt(dur, 10, 64)
		if err != nil {
			return r, "invalid_duration_ms"
		}
		r.duration = n
	}
	if a, ok := str("amount"); ok {
		if !regexp.MustCompile(`^\d+\.\d\d$`).MatchString(a) {
			t.Fatalf("oracle: %s: amount %q", line, a)
		}
		r.amount = a
	}
	if r.country, ok = str("country"); !ok {
		r.country = "ZZ"
	}
	switch {
	case !hasDur || r.duration < 0:
		return r, "F1:negative_duration"
	case !slices.Contains([]string{"view", "click", "add_to_cart", "purchase"}, r.typ):
		return r, "F2:unknown_event_type"
	case !hasID:
		return r, "missing_event_id"
	case !hasSrc:
		return r, "missing_source"
	case !hasTime:
		return r, "missing_event_time"
	}
	return r, ""
}

// silverCounts is "read = appended + duplicates + quarantined" from a run's output.
func silverCounts(t *testing.T, out string) string {
	t.Helper()
	m := regexp.MustCompile(`silver app_events: (\d+) bronze rows = (\d+) appended \+ (\d+) duplicates \+ (\d+) quarantined`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no silver counts in:\n%s", out)
	}
	return fmt.Sprintf("%s = %s + %s + %s", m[1], m[2], m[3], m[4])
}

// checkEvents compares Silver, the quarantine, Gold and the served view with the oracle,
// and returns the Silver rows read.
func checkEvents(t *testing.T, e *forgetEnv, o *eventsOracle) []string {
	t.Helper()
	const null = `\N`
	nullable := func(s string) string {
		if s == "" {
			return null
		}
		return s
	}
	type gkey struct{ day, source, typ string }
	type gval struct {
		events, duration int64
		users            map[string]bool
		cents            int64
		revenue          bool
	}
	gold := map[gkey]*gval{}
	var silverRows []string
	for _, r := range o.silver {
		silverRows = append(silverRows, strings.Join([]string{r.id, r.source, r.user, r.typ, r.at.Format("2006-01-02 15:04:05.000000"),
			strconv.FormatInt(r.duration, 10), nullable(r.amount), r.country}, "\t"))
		k := gkey{r.at.Format(time.DateOnly), r.source, r.typ}
		if gold[k] == nil {
			gold[k] = &gval{users: map[string]bool{}}
		}
		g := gold[k]
		g.events++
		g.duration += r.duration
		g.users[r.user] = true
		if r.amount != "" {
			c, err := strconv.ParseInt(strings.Replace(r.amount, ".", "", 1), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			g.cents += c
			g.revenue = true
		}
	}
	slices.Sort(silverRows)
	var wantReasons, wantGold, wantFinal []string
	for r, n := range o.reasons {
		wantReasons = append(wantReasons, fmt.Sprintf("%s\t%d", r, n))
	}
	slices.Sort(wantReasons)
	newest := ""
	for k := range gold {
		newest = max(newest, k.day)
	}
	nd, _ := time.Parse(time.DateOnly, newest)
	hotFrom := nd.AddDate(0, 0, -30).Format(time.DateOnly) // hot_window 30d, anchor data
	for k, v := range gold {
		rev := null
		if v.revenue {
			rev = fmt.Sprintf("%d.%02d", v.cents/100, v.cents%100)
		}
		row := fmt.Sprintf("%s\t%s\t%s\t%d\t%d\t%d\t%s", k.day, k.source, k.typ, v.events, len(v.users), v.duration, rev)
		wantGold = append(wantGold, row)
		if k.day >= hotFrom {
			wantFinal = append(wantFinal, row)
		}
	}
	slices.Sort(wantGold)
	slices.Sort(wantFinal)
	if len(silverRows) < 400 || len(wantReasons) != 6 || len(wantFinal) < 50 {
		t.Fatalf("oracle: %d silver rows, reasons %v, %d served rows", len(silverRows), wantReasons, len(wantFinal))
	}

	compare := func(what string, got, want []string) {
		t.Helper()
		slices.Sort(got) // as Go orders the oracle's rows
		compareRows(t, what, got, want)
	}
	// One query for the three lake tables (each command starts a ClickHouse): a tag, then
	// the row as TSV text.
	const gcols = "toString(event_date), source, event_type, toString(events), toString(users), toString(duration_ms), ifNull(toDecimalString(revenue, 2), '\\\\N')"
	got := map[string][]string{}
	for _, l := range nonEmptyLines(e.stdout("query", `SELECT * FROM (
		SELECT 'silver' AS t, concatWithSeparator('\t', event_id, source, user_id, event_type, toString(event_time),
			toString(duration_ms), ifNull(toDecimalString(amount, 2), '\\N'), country) AS row FROM silver.app_events
		UNION ALL SELECT 'quarantine', concatWithSeparator('\t', r, toString(count())) FROM (
			SELECT replaceRegexpOne(error_reason, ': .*$', '') AS r FROM silver.app_events_quarantine) GROUP BY r
		UNION ALL SELECT 'gold', concatWithSeparator('\t', `+gcols+`) FROM gold.app_events_daily
	) FORMAT TSVRaw`)) {
		tag, row, _ := strings.Cut(l, "\t")
		got[tag] = append(got[tag], row)
	}
	compare("silver.app_events", got["silver"], silverRows)
	compare("quarantine by reason", got["quarantine"], wantReasons)
	compare("gold.app_events_daily", got["gold"], wantGold)
	compare("app_events_daily_final", nonEmptyLines(e.stdout("clickhouse", "query", "SELECT "+gcols+
		" FROM marts.app_events_daily_final ORDER BY ALL FORMAT TSVRaw")), wantFinal)
	return got["silver"]
}

// TestEventsExampleValidates: examples/events.yaml is a valid config (also under -short).
func TestEventsExampleValidates(t *testing.T) {
	code, out, errs := runCLI(t, "-c", "../../examples/events.yaml", "--state-dir", t.TempDir(), "validate")
	if code != exitOK || !strings.Contains(out, "ok") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
}
