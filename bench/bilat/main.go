// Command bilat measures BI latency hot vs cold (issue 21, goal 6): the dashboard
// questions of docs/bi.md asked by concurrent clients of one ClickHouse, once of the
// served mart (<mart>_final and its state table, "hot") and once of the Gold Iceberg
// table through ClickHouse's Iceberg reader ("cold"). It first checks that both sides
// give the same, non-empty answer to every question, then loads each side in turn and
// prints one JSON object: p50/p99 latency, queries/s and the server's CPU per query per
// side. The sides alternate in rounds, so that a shared host's changing load falls on both.
//
//	go run ./bench/bilat -addr 127.0.0.1:9000 -password-file pw -db marts \
//	    -iceberg "icebergLocal('/state/warehouse/gold.db/daily_revenue_kpi')"
//
// The questions are those of examples/orders.yaml's daily_revenue_kpi mart (bench/orders.yaml).
// "Today" is the newest served day, so that a fixed-date input has answers. A query is
// never cancelled mid-flight (libchdb 26.7 can abort on a client that drops a running
// query, docs/operations.md): a client stops at the first query that would start after
// the deadline.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// question is one dashboard question as asked of each side; {d} is the anchor day
// (a Date32 literal expression).
type question struct {
	Name string
	Hot  string // over {final} (the view) or {states} (the AggregatingMergeTree); {merge}: the distinct states' merge function
	// Windows, when set, is the hot side with -windows: over {windows}, the mart's
	// rolling windows served finished (serving.windows, docs/bi.md).
	Windows string
	Cold    string // over {gold} (the Iceberg table function)
}

// questions are docs/bi.md's dashboard queries with a total order (ties broken by the
// dimensions) so that both sides' answers compare row by row.
var questions = []question{
	{
		Name: "daily_kpis_30d",
		Hot: `SELECT report_date, total_revenue, total_orders, unique_customers, avg_order_value
FROM {final} WHERE grouping_level = 'total' AND report_date >= {d} - 30 ORDER BY report_date`,
		Cold: `SELECT report_date, total_revenue, total_orders, unique_customers, avg_order_value
FROM {gold} WHERE grouping_level = 'total' AND report_date >= {d} - 30 ORDER BY report_date`,
	},
	{
		Name: "by_country_day",
		Hot: `SELECT country, total_revenue, total_orders, unique_customers
FROM {final} WHERE grouping_level = 'by_country' AND report_date = {d} - 1 ORDER BY total_revenue DESC, country`,
		Cold: `SELECT country, total_revenue, total_orders, unique_customers
FROM {gold} WHERE grouping_level = 'by_country' AND report_date = {d} - 1 ORDER BY total_revenue DESC, country`,
	},
	{
		Name: "detail_newest_day",
		Hot: `SELECT country, category, total_revenue, total_orders, unique_customers, avg_order_value
FROM {final} WHERE grouping_level = 'detail' AND report_date = {d} ORDER BY total_revenue DESC, country, category`,
		Cold: `SELECT country, category, total_revenue, total_orders, unique_customers, avg_order_value
FROM {gold} WHERE grouping_level = 'detail' AND report_date = {d} ORDER BY total_revenue DESC, country, category`,
	},
	{
		// Distinct customers over 30 days: the merged daily states (hot); in Gold, the
		// distinct keys of the detail rows, the only level that keeps them (cold).
		Name: "customers_30d",
		Hot: `SELECT {merge}(unique_customers__state) AS unique_customers_30d
FROM {states} WHERE grouping_level = 'total' AND report_date >= {d} - 29`,
		Windows: `SELECT unique_customers AS unique_customers_30d
FROM {windows} WHERE window_days = 30 AND grouping_level = 'total' AND report_date = {d}`,
		Cold: `SELECT uniqExactArray(unique_customers__keys) AS unique_customers_30d
FROM {gold} WHERE grouping_level = 'detail' AND report_date >= {d} - 29`,
	},
	{
		// The average as the served one is rounded (half away from zero at the scale
		// of the mart's avg, 8), on every side.
		Name: "by_country_7d",
		Hot: `SELECT country, sum(total_revenue) AS revenue_7d, sum(total_orders) AS orders_7d,
    {merge}(unique_customers__state) AS customers_7d,
    toDecimal128(round(toDecimal128(sum(avg_order_value__sum), 9) / sum(avg_order_value__count), 8), 8) AS avg_order_value_7d
FROM {states} WHERE grouping_level = 'by_country' AND report_date >= {d} - 6
GROUP BY country ORDER BY revenue_7d DESC, country`,
		Windows: `SELECT country, total_revenue AS revenue_7d, total_orders AS orders_7d,
    unique_customers AS customers_7d, avg_order_value AS avg_order_value_7d
FROM {windows} WHERE window_days = 7 AND grouping_level = 'by_country' AND report_date = {d}
ORDER BY revenue_7d DESC, country`,
		Cold: `SELECT country, sum(total_revenue) AS revenue_7d, sum(total_orders) AS orders_7d,
    uniqExactArray(unique_customers__keys) AS customers_7d,
    toDecimal128(round(toDecimal128(sum(avg_order_value__sum), 9) / sum(avg_order_value__count), 8), 8) AS avg_order_value_7d
FROM {gold} WHERE grouping_level = 'detail' AND report_date >= {d} - 6
GROUP BY country ORDER BY revenue_7d DESC, country`,
	},
}

// freshness is a Grafana freshness panel's query (docs/bi.md), asked of the hot side
// only (Iceberg has no sync table): with -freshness, a load of its own after the others.
const freshness = `SELECT mart, max(pushed_at) AS last_push, count() AS partitions, max(partition) AS newest_partition
FROM {sync} FINAL GROUP BY mart ORDER BY mart`

// sideResult is one side's load: latencies over every question, and per question.
type sideResult struct {
	Queries     int                `json:"queries"`
	Seconds     float64            `json:"seconds"`
	QPS         float64            `json:"qps"`
	P50ms       float64            `json:"p50_ms"`
	P99ms       float64            `json:"p99_ms"`
	PerQuestion map[string]latency `json:"per_question"`
	// ServerCPU is the CPU time (user + system) the server process spent during the
	// load, with -server-pid: unlike latency under a shared host's load, it does not
	// grow with other processes' demand. 0 without -server-pid.
	ServerCPU         float64 `json:"server_cpu_s"`
	ServerCPUPerQuery float64 `json:"server_cpu_ms_per_query"`
}

type latency struct {
	N     int     `json:"n"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
}

type result struct {
	Anchor   string         `json:"anchor"`
	Protocol string         `json:"protocol"`
	Clients  int            `json:"clients"`
	Duration float64        `json:"duration_s"` // per side
	Rounds   int            `json:"rounds"`
	Checked  map[string]int `json:"checked_rows"` // rows of each question's answer, equal on both sides
	// StateType is the served type of the distinct-count states (serving.distinct).
	StateType string `json:"state_type"`
	// Windows: the questions over several days read the rolling windows (-windows).
	Windows bool       `json:"windows"`
	Hot     sideResult `json:"hot"`
	Cold    sideResult `json:"cold"`
	// Freshness: the freshness panel's query alone, as many clients (-freshness).
	Freshness *sideResult `json:"freshness,omitempty"`
	// HotEach: each hot question alone, as many clients, for -each (the server's CPU
	// per query of one question, which the mixed load cannot tell apart).
	HotEach map[string]sideResult `json:"hot_each,omitempty"`
}

// options are the command's flags.
type options struct {
	addr, user, pwFile, db, mart, gold, protocol, final, states string
	readerUser, readerPwFile                                    string
	clients, rounds, pid                                        int
	duration, each                                              time.Duration
	freshness, windows                                          bool
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:9000", "ClickHouse address: native (tcp port) or, with -protocol http, the http port")
	flag.StringVar(&o.protocol, "protocol", "native", "native or http: the interface the clients use")
	flag.StringVar(&o.user, "user", "goldbridge", "ClickHouse user")
	flag.StringVar(&o.pwFile, "password-file", "", "file holding the user's password")
	flag.StringVar(&o.readerUser, "reader", "", "a clickhouse.local.readers user that asks the hot side's questions, as a dashboard does (default: -user)")
	flag.StringVar(&o.readerPwFile, "reader-password-file", "", "file holding the reader's password")
	flag.StringVar(&o.db, "db", "marts", "database of the served mart")
	flag.StringVar(&o.mart, "mart", "daily_revenue_kpi", "served mart (table <mart>, view <mart>_final)")
	flag.StringVar(&o.final, "final", "", "the view of finished values asked on the hot side (default <mart>_final): to compare another layout")
	flag.StringVar(&o.states, "states", "", "the table of states asked on the hot side (default <mart>): to compare another layout")
	flag.StringVar(&o.gold, "iceberg", "", "table expression of the Gold Iceberg table, e.g. icebergLocal('<dir>')")
	flag.IntVar(&o.clients, "clients", 16, "concurrent clients per side")
	flag.DurationVar(&o.duration, "duration", 20*time.Second, "load time per side")
	flag.IntVar(&o.rounds, "rounds", 4, "rounds per side, alternating with the other side's")
	flag.IntVar(&o.pid, "server-pid", 0, "the server's process id, to report its CPU time per query (Linux /proc)")
	flag.BoolVar(&o.freshness, "freshness", false, "then load the freshness panel's query alone (hot side)")
	flag.BoolVar(&o.windows, "windows", false, "the hot side reads the questions over several days from <mart>_windows (serving.windows: days [7, 30], levels total and by_country)")
	flag.DurationVar(&o.each, "each", 0, "then load each hot question alone for this long (0: not)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "bilat: %v\n", err)
		os.Exit(1)
	}
}

// open connects as user with the password in file pwFile, over o's protocol; the pool
// holds a connection per client.
func open(o options, user, pwFile string) (driver.Conn, error) {
	pw, err := os.ReadFile(pwFile)
	if err != nil {
		return nil, err
	}
	proto := clickhouse.Native
	switch o.protocol {
	case "native":
	case "http":
		proto = clickhouse.HTTP
	default:
		return nil, fmt.Errorf("-protocol %q: native or http", o.protocol)
	}
	return clickhouse.Open(&clickhouse.Options{
		Addr:         []string{o.addr},
		Protocol:     proto,
		Auth:         clickhouse.Auth{Database: o.db, Username: user, Password: strings.TrimSpace(string(pw))},
		MaxOpenConns: o.clients + 1,
		MaxIdleConns: o.clients + 1,
		DialTimeout:  10 * time.Second,
	})
}

func run(o options) error {
	if o.gold == "" || o.pwFile == "" {
		return errors.New("-iceberg and -password-file are required")
	}
	if o.clients < 1 || o.clients > 512 || o.duration <= 0 || o.duration > time.Hour || o.rounds < 1 || o.rounds > 100 || o.each < 0 || o.each > time.Hour {
		return fmt.Errorf("-clients %d (1..512), -duration %s (up to 1h), -rounds %d (1..100), -each %s (up to 1h)", o.clients, o.duration, o.rounds, o.each)
	}
	conn, err := open(o, o.user, o.pwFile)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The hot side as a reader (read-only, the served database only) when one is given;
	// the cold side needs the table function a reader may not use.
	hotConn := conn
	if o.readerUser != "" {
		if hotConn, err = open(o, o.readerUser, o.readerPwFile); err != nil {
			return err
		}
		defer hotConn.Close()
	}
	ctx := context.Background()
	db, mart, gold, clients, duration, rounds, pid := o.db, o.mart, o.gold, o.clients, o.duration, o.rounds, o.pid

	var anchor time.Time
	final := db + "." + mart + "_final"
	if o.final != "" {
		final = db + "." + o.final
	}
	if err := conn.QueryRow(ctx, "SELECT max(report_date) FROM "+final+" WHERE grouping_level = 'total'").Scan(&anchor); err != nil {
		return fmt.Errorf("anchor day: %w", err)
	}
	day := anchor.Format("2006-01-02")
	res := result{Anchor: day, Protocol: o.protocol, Clients: clients, Duration: duration.Seconds(), Checked: map[string]int{}}
	states := db + "." + mart
	if o.states != "" {
		states = db + "." + o.states
	}
	// The merge of the served distinct-count states (serving.distinct): uniqExact, uniq
	// or bitmap (groupBitmap of the key dictionary's ids).
	var stateType string
	if err := conn.QueryRow(ctx, "SELECT type FROM system.columns WHERE database || '.' || table = ? AND name = 'unique_customers__state'", states).Scan(&stateType); err != nil {
		return fmt.Errorf("type of %s.unique_customers__state: %w", states, err)
	}
	merge := "uniqExactMerge"
	switch {
	case strings.Contains(stateType, "groupBitmap"):
		merge = "groupBitmapMerge"
	case strings.Contains(stateType, "(uniq,"):
		merge = "uniqMerge"
	}
	res.StateType = stateType
	res.Windows = o.windows
	r := strings.NewReplacer("{final}", final, "{states}", states, "{gold}", gold, "{d}", "toDate32('"+day+"')",
		"{windows}", db+"."+mart+"_windows",
		"{sync}", db+"._goldbridge_sync", "{merge}", merge)
	hot := make([]string, len(questions))
	cold := make([]string, len(questions))
	for i, q := range questions {
		hot[i], cold[i] = r.Replace(q.Hot), r.Replace(q.Cold)
		if o.windows && q.Windows != "" {
			hot[i] = r.Replace(q.Windows)
		}
		h, err := answer(ctx, hotConn, hot[i])
		if err != nil {
			return fmt.Errorf("%s hot: %w", q.Name, err)
		}
		c, err := answer(ctx, conn, cold[i])
		if err != nil {
			return fmt.Errorf("%s cold: %w", q.Name, err)
		}
		if len(h) == 0 || slices.Equal(h, []string{"(0)"}) {
			return fmt.Errorf("%s: no answer on the hot side (%v): nothing to compare", q.Name, h)
		}
		if !slices.Equal(h, c) {
			return fmt.Errorf("%s: the sides disagree:\nhot  %v\ncold %v", q.Name, h, c)
		}
		res.Checked[q.Name] = len(h)
	}
	// The sides alternate in rounds (hot, cold, cold, hot, ...), so that a change in the
	// host's load during the run falls on both alike.
	if err := warm(ctx, hotConn, hot); err != nil {
		return fmt.Errorf("hot: %w", err)
	}
	if err := warm(ctx, conn, cold); err != nil {
		return fmt.Errorf("cold: %w", err)
	}
	var h, c side
	slice := duration / time.Duration(rounds)
	for i := range rounds {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, isHot := range order {
			sqls, acc, name, cn := cold, &c, "cold", conn
			if isHot {
				sqls, acc, name, cn = hot, &h, "hot", hotConn
			}
			if err := round(ctx, cn, sqls, clients, slice, pid, acc); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	res.Rounds = rounds
	res.Hot, res.Cold = h.summary(questions), c.summary(questions)
	if o.freshness {
		fq := []string{r.Replace(freshness)}
		if err := warm(ctx, hotConn, fq); err != nil {
			return fmt.Errorf("freshness: %w", err)
		}
		var f side
		for range rounds {
			if err := round(ctx, hotConn, fq, clients, slice, pid, &f); err != nil {
				return fmt.Errorf("freshness: %w", err)
			}
		}
		fs := f.summary([]question{{Name: "freshness"}})
		res.Freshness = &fs
	}
	if o.each > 0 {
		res.HotEach = map[string]sideResult{}
		for i, q := range questions {
			var e side
			if err := round(ctx, hotConn, hot[i:i+1], clients, o.each, pid, &e); err != nil {
				return fmt.Errorf("%s alone: %w", q.Name, err)
			}
			res.HotEach[q.Name] = e.summary([]question{q})
		}
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// answer returns every row of sql as ClickHouse's own text of the row's tuple, so that
// the two sides compare by value whatever their column types (UInt8 vs Int32 flags).
func answer(ctx context.Context, conn driver.Conn, sql string) ([]string, error) {
	rows, err := conn.Query(ctx, "SELECT toString(tuple(*)) FROM ("+sql+")")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// sample is one answered question and how long it took.
type sample struct {
	q int
	d time.Duration
}

// side accumulates one side's load over its rounds.
type side struct {
	samples []sample
	seconds float64
	cpu     float64
}

// warm asks every question once (not measured).
func warm(ctx context.Context, conn driver.Conn, sqls []string) error {
	for _, q := range sqls {
		if err := drain(ctx, conn, q); err != nil {
			return err
		}
	}
	return nil
}

// round runs clients goroutines, each asking the questions in turn (client i starting
// at question i) until duration has passed, and adds their samples, the elapsed time and
// the server's CPU time to acc.
func round(ctx context.Context, conn driver.Conn, sqls []string, clients int, duration time.Duration, pid int, acc *side) error {
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	cpu0, err := processCPU(pid)
	if err != nil {
		return err
	}
	start := time.Now()
	deadline := start.Add(duration)
	for c := range clients {
		wg.Go(func() {
			var mine []sample
			for i := c; time.Now().Before(deadline); i++ {
				q := i % len(sqls)
				t0 := time.Now()
				if err := drain(ctx, conn, sqls[q]); err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
				mine = append(mine, sample{q, time.Since(t0)})
			}
			mu.Lock()
			acc.samples = append(acc.samples, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	acc.seconds += time.Since(start).Seconds()
	if firstErr != nil {
		return firstErr
	}
	cpu1, err := processCPU(pid)
	acc.cpu += cpu1 - cpu0
	return err
}

// summary is the side's latency quantiles, rate and server CPU per query.
func (acc *side) summary(qs []question) sideResult {
	all := make([]time.Duration, 0, len(acc.samples))
	per := make([][]time.Duration, len(qs))
	for _, s := range acc.samples {
		all = append(all, s.d)
		per[s.q] = append(per[s.q], s.d)
	}
	out := sideResult{Queries: len(all), Seconds: acc.seconds, PerQuestion: map[string]latency{}, ServerCPU: acc.cpu}
	if acc.seconds > 0 {
		out.QPS = float64(len(all)) / acc.seconds
	}
	out.P50ms, out.P99ms = pct(all, 0.50), pct(all, 0.99)
	if len(all) > 0 {
		out.ServerCPUPerQuery = 1000 * acc.cpu / float64(len(all))
	}
	for i, d := range per {
		out.PerQuestion[qs[i].Name] = latency{N: len(d), P50ms: pct(d, 0.50), P99ms: pct(d, 0.99)}
	}
	return out
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// processCPU returns the user + system CPU seconds of process pid so far (Linux
// /proc/<pid>/stat, in USER_HZ = 100 ticks per second), or 0 for pid 0.
func processCPU(pid int) (float64, error) {
	if pid == 0 {
		return 0, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("server cpu: %w", err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces:
	// state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("server cpu: cannot parse /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("server cpu: %w", err)
	}
	return (ut + st) / 100, nil
}

// drain runs sql and reads every row, as a dashboard does.
func drain(ctx context.Context, conn driver.Conn, sql string) error {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return err
	}
	return rows.Close()
}

// pct is the q-quantile of ds in milliseconds (nearest rank), 0 for none.
func pct(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := min(max(int(math.Ceil(q*float64(len(s))))-1, 0), len(s)-1)
	return float64(s[i].Microseconds()) / 1000
}
