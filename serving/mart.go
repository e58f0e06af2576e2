// Package serving describes a Gold mart as ClickHouse serves it: the plain model
// (Mart, Dim, Measure) built once, complete, from Gold's mart spec (NewMart), identifier
// checks and quoting. The DDL lives in serving/ddl, connections in
// serving/chconn, the partition push in serving/push and the decision of what to push
// in sync.
package serving

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"goldbridge/lakehouse/mart"
)

// Grain is the time column of a mart: one Gold partition per value.
type Grain struct {
	As   string // column name, e.g. report_date
	Unit string // hour | day | month
}

// Dim is one dimension column with its ClickHouse scalar type (String, Int32, Int64,
// Float64, Bool, Date32, Decimal(38, S), DateTime64(6, 'UTC')); served as Nullable.
type Dim struct {
	Name string
	Type string
}

// Measure is one aggregate. Type is the ClickHouse type of the finished value for sum,
// count, min, max, max_by and min_by, and of the hidden __sum column for avg
// (Decimal(38, S), Int64 or Float64); count_distinct and quantiles ignore it. ByType
// is the type of max_by's and min_by's by (mart.ByCol).
type Measure struct {
	Name      string
	Agg       mart.Agg
	Type      string
	ByType    string
	Quantiles []float64
}

// FinalType is the ClickHouse type of the finished value readers see in <t>_final
// (Nullable aside), the type Check compares a measure as: Type for sum, min and max;
// Int64 for count and count_distinct; for avg Decimal(38, S+6) over a decimal and
// Float64 over an integer or a float (an average is a double there, whatever the
// hidden __sum column's type); Array(Float64) for quantiles.
func (ms Measure) FinalType() string {
	switch ms.Agg.Result() {
	case mart.ResultCount:
		return "Int64"
	case mart.ResultAverage:
		var p, s int
		if _, err := fmt.Sscanf(ms.Type, "Decimal(%d, %d)", &p, &s); err == nil {
			return fmt.Sprintf("Decimal(38, %d)", s+6) // as ddl.FinalExpr and Gold's avg
		}
		return "Float64"
	case mart.ResultList:
		return "Array(Float64)"
	}
	return ms.Type
}

// Mart is one mart's ClickHouse copy.
type Mart struct {
	Name     string // mart name (sync state key)
	Database string // ClickHouse database
	Table    string // ClickHouse table; the view is Table+"_final"
	Cluster  string // ON CLUSTER name; empty for a single server
	// Sharded: Cluster names a topology of plain nodes in shards with no Keeper (the
	// nodes' remote_servers): the DDL runs on each node by itself (no ON CLUSTER, no
	// Replicated engines), each node is pushed to as a single server (sync.Sharded), and
	// <t>_final reads <t>_dist, the Distributed table over the nodes' <t>.
	Sharded    bool
	Grain      Grain
	Dimensions []Dim
	// Grouping is none | rollup | cube | sets; Sets lists the kept dimensions of each
	// grouping set for "sets".
	Grouping    string
	Sets        [][]string
	Measures    []Measure
	PartitionBy string        // day | month: the ClickHouse partition, the unit of replacement
	HotWindow   time.Duration // grain range served
	// HotAnchor is what the window counts back from: AnchorClock (today, the default)
	// or AnchorData (the newest Gold partition).
	HotAnchor string
	TTL       time.Duration // TTL backstop (0: none)
	Distinct  string        // DistinctExact | DistinctApprox | DistinctBitmap
	// Windows: the rolling windows served finished in <t>_windows (serving/ddl); none
	// when Windows.Days is empty.
	Windows Windows
	// Definition is the Gold definition the model was built from (gold.PropSpec's value,
	// NewMart); a sync refuses a Gold table built for another. Empty: not checked.
	Definition string
}

// Windows are the rolling windows of a day mart served finished (serving.windows): for
// every end day, each of the Levels' values over the Days days ending there, merged from
// the served daily rows as a question over several days would merge them.
type Windows struct {
	Days   []int    // window lengths in days, ascending, each from 2 to MaxWindowDays
	Levels []string // the grouping levels windowed (empty: every level)
}

// ColWindowDays is <t>_windows's window length column: no column of the mart may
// have its name.
const ColWindowDays = "window_days"

// MaxWindowDays is the longest rolling window (a year and a day: a leap year's 366).
const MaxWindowDays = 366

// MaxWindows bounds how many windows a mart declares: each is a pass over <t>.
const MaxWindows = 8

// The states of count_distinct (Mart.Distinct): ClickHouse's uniqExact (a set of the
// keys' SipHash-128), uniq (an adaptive sample: approximate), or a bitmap of the keys'
// ids in the mart's key dictionary (<t>__ids, serving/ddl): exact, and merged over
// several grain values at a fraction of uniqExact's cost.
const (
	DistinctExact  = "uniqExact"
	DistinctApprox = "uniq"
	DistinctBitmap = "bitmap"
)

// The hot window's anchors (Mart.HotAnchor).
const (
	AnchorClock = "clock" // the start of today (UTC); "" means this too
	AnchorData  = "data"  // the day of the newest servable Gold partition's start
)

// ClickHouse's name limits, measured on 26.7 (TestNameLimitsAreTheServers): a table
// name in database db may have at most TableNameRoom - len(db) bytes (the metadata file
// of a dropped table, <db>.<table>.<uuid>.sql, must fit in a file name); longer names
// are refused at CREATE. Column names have no limit (long file names are hashed).
const (
	TableNameRoom = 213
	// LongestSuffix is the longest suffix goldbridge adds to a served table's name
	// (push.PushDetailSuffix, "__push_detail"); TestSuffixesFit keeps it so.
	LongestSuffix = 13
	// SyncTableLen is the length of the sync state table's name (ddl.SyncTable).
	SyncTableLen = 16
)

// CheckNames reports whether ClickHouse accepts every table goldbridge creates for a
// mart served as table in database db: <t> with its longest suffix, and the sync table.
func CheckNames(db, table string) error {
	if room := TableNameRoom - len(db); room < SyncTableLen {
		return fmt.Errorf("database name of %d bytes is too long for ClickHouse (at most %d)", len(db), TableNameRoom-SyncTableLen)
	} else if len(table)+LongestSuffix > room {
		return fmt.Errorf("table name of %d bytes is too long for ClickHouse in database %s (at most %d, as goldbridge adds up to %d bytes of suffix)",
			len(table), db, room-LongestSuffix, LongestSuffix)
	}
	return nil
}

// MaxIdentLen bounds every name goldbridge puts into ClickHouse SQL, hidden columns'
// suffixes included (ClickHouse itself has no limit on column names).
const MaxIdentLen = 127

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,` + strconv.Itoa(MaxIdentLen-1) + `}$`)

// CheckIdent reports whether s is a plain identifier ([A-Za-z_][A-Za-z0-9_]*, at most
// MaxIdentLen bytes, case kept): the only names goldbridge puts into ClickHouse SQL.
func CheckIdent(kind, s string) error {
	if !identRE.MatchString(s) {
		return fmt.Errorf("invalid %s name %q: want [A-Za-z_][A-Za-z0-9_]*", kind, s)
	}
	return nil
}

// Q quotes a checked identifier with backquotes.
func Q(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// QS quotes a string literal.
func QS(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

var typeRE = regexp.MustCompile(`^(String|Int32|Int64|Float64|Bool|Date32|Decimal\(38, [0-9]{1,2}\)|DateTime64\(6, 'UTC'\))$`)

// Validate checks names, types and the combination of settings.
func (m *Mart) Validate() error {
	for kind, n := range map[string]string{"mart": m.Name, "database": m.Database, "table": m.Table, "grain": m.Grain.As} {
		if err := CheckIdent(kind, n); err != nil {
			return err
		}
	}
	if m.Cluster != "" {
		if err := CheckIdent("cluster", m.Cluster); err != nil {
			return err
		}
	}
	switch m.Grain.Unit {
	case "hour", "day", "month":
	default:
		return fmt.Errorf("mart %s: grain unit %q: want hour, day or month", m.Name, m.Grain.Unit)
	}
	switch m.PartitionBy {
	case "day", "month":
	default:
		return fmt.Errorf("mart %s: partition_by %q: want day or month", m.Name, m.PartitionBy)
	}
	if m.Grain.Unit == "month" && m.PartitionBy == "day" {
		return fmt.Errorf("mart %s: partition_by day with a month grain", m.Name)
	}
	switch m.Distinct {
	case DistinctExact, DistinctApprox:
	case DistinctBitmap:
		if m.Cluster != "" {
			// Each node would number the keys in its own dictionary, and a bitmap merged
			// across nodes would mix the numberings.
			return fmt.Errorf("mart %s: distinct bitmap needs a single server, not cluster %s", m.Name, m.Cluster)
		}
	default:
		return fmt.Errorf("mart %s: distinct %q: want uniqExact, uniq or bitmap", m.Name, m.Distinct)
	}
	seen := map[string]bool{m.Grain.As: true, mart.ColGroupingLevel: true}
	add := func(n string) error {
		if err := CheckIdent("column", n); err != nil {
			return err
		}
		if seen[n] {
			return fmt.Errorf("mart %s: duplicate column %s", m.Name, n)
		}
		seen[n] = true
		return nil
	}
	for _, d := range m.Dimensions {
		if err := add(d.Name); err != nil {
			return err
		}
		if err := add(mart.GroupingCol(d.Name)); err != nil {
			return err
		}
		if !typeRE.MatchString(d.Type) {
			return fmt.Errorf("mart %s: dimension %s: unsupported type %q", m.Name, d.Name, d.Type)
		}
	}
	if len(m.Measures) == 0 {
		return fmt.Errorf("mart %s: no measures", m.Name)
	}
	for _, ms := range m.Measures {
		if err := add(ms.Name); err != nil {
			return err
		}
		d, known := ms.Agg.Desc()
		switch {
		case !known || d.Cond: // served as the aggregate it is computed as (mart.Agg.Served)
			return fmt.Errorf("mart %s: measure %s: unknown agg %q", m.Name, ms.Name, ms.Agg)
		case d.By: // a state of any value and by (argMax, argMin)
			for _, t := range []string{ms.Type, ms.ByType} {
				if !typeRE.MatchString(t) {
					return fmt.Errorf("mart %s: measure %s: unsupported type %q", m.Name, ms.Name, t)
				}
			}
		case d.List == mart.ListNone: // a scalar value (or avg's sum and count) in simple columns
			if !typeRE.MatchString(ms.Type) || ms.Type == "String" || ms.Type == "Bool" {
				return fmt.Errorf("mart %s: measure %s: unsupported type %q", m.Name, ms.Name, ms.Type)
			}
		case d.List == mart.ListValues:
			if len(ms.Quantiles) == 0 {
				return fmt.Errorf("mart %s: measure %s: no quantile levels", m.Name, ms.Name)
			}
			for _, q := range ms.Quantiles {
				if err := mart.CheckQuantile(q); err != nil {
					return fmt.Errorf("mart %s: measure %s: %w", m.Name, ms.Name, err)
				}
			}
		}
	}
	levels, err := m.Levels()
	if err != nil {
		return fmt.Errorf("mart %s: %w", m.Name, err)
	}
	if err := m.validateWindows(levels); err != nil {
		return fmt.Errorf("mart %s: windows: %w", m.Name, err)
	}
	return nil
}

// validateWindows checks Windows against the mart: a day grain, a single server (the
// windows are built from <t> on the server that holds it), lengths in range and
// ascending, levels the mart has.
func (m *Mart) validateWindows(levels []mart.Level) error {
	w := m.Windows
	if len(w.Days) == 0 {
		if len(w.Levels) > 0 {
			return fmt.Errorf("levels without days")
		}
		return nil
	}
	switch {
	case m.Grain.Unit != "day":
		return fmt.Errorf("need a day grain, not %s", m.Grain.Unit)
	case m.Cluster != "":
		return fmt.Errorf("need a single server, not cluster %s", m.Cluster)
	case len(w.Days) > MaxWindows:
		return fmt.Errorf("%d windows: at most %d", len(w.Days), MaxWindows)
	}
	for i, d := range w.Days {
		if d < 2 || d > MaxWindowDays {
			return fmt.Errorf("%d days: want 2 to %d", d, MaxWindowDays)
		}
		if i > 0 && d <= w.Days[i-1] {
			return fmt.Errorf("days %v: want them ascending, each once", w.Days)
		}
	}
	for _, l := range w.Levels {
		if !slices.ContainsFunc(levels, func(lv mart.Level) bool { return lv.Name == l }) {
			return fmt.Errorf("level %q is not a grouping level of the mart", l)
		}
	}
	if m.Grain.As == ColWindowDays || slices.ContainsFunc(m.Dimensions, func(d Dim) bool { return d.Name == ColWindowDays }) ||
		slices.ContainsFunc(m.Measures, func(ms Measure) bool { return ms.Name == ColWindowDays }) {
		return fmt.Errorf("a column named %s, the windows' length column", ColWindowDays)
	}
	return nil
}

// Aggregating reports whether the mart has a measure other than sum and count: its
// states are built from the carrier rows (<t>__detail or goldbridge's own states)
// rather than every level streamed as Gold has it.
func (m *Mart) Aggregating() bool {
	for _, ms := range m.Measures {
		if !ms.Agg.Additive() {
			return true
		}
	}
	return false
}

// Bitmap reports whether the mart's distinct counts are bitmaps of the ids in its key
// dictionary: a count_distinct measure with Distinct DistinctBitmap.
func (m *Mart) Bitmap() bool {
	return m.Distinct == DistinctBitmap && slices.ContainsFunc(m.Measures, func(ms Measure) bool { return ms.Agg == mart.CountDistinct })
}

// DimNames are the names of the dimensions, in order.
func (m *Mart) DimNames() []string {
	out := make([]string, len(m.Dimensions))
	for i, d := range m.Dimensions {
		out[i] = d.Name
	}
	return out
}

// Levels are the mart's grouping levels as Gold computes them (mart.Levels), finest
// first, with the carrier levels whose rows hold the lists.
func (m *Mart) Levels() ([]mart.Level, error) {
	return mart.Levels(m.Grouping, m.DimNames(), m.Sets)
}

// GrainType is the ClickHouse type of the grain column: Date32 for day and month
// grains, DateTime64(6, 'UTC') for hours. Both hold [MinTime, MaxTime) exactly
// (ClickHouse's Date stops at 2149-06-06 and wraps later values).
func (m *Mart) GrainType() string {
	if m.Grain.Unit == "hour" {
		return "DateTime64(6, 'UTC')"
	}
	return "Date32"
}

// The range of values the served date and time types (Date32, DateTime64(6, 'UTC'))
// hold, as ClickHouse documents it. ClickHouse 26.7 stores a value outside it as sent,
// but Date32 clamps every value it parses (the literal '9999-12-31' is 2299-12-31, so
// WHERE d = '9999-12-31' matches the 2299-12-31 rows and misses the 9999-12-31 ones),
// and outside it DateTime64 has no documented behaviour. So Gold partitions holding such
// a value as grain, dimension or min/max measure are not served (sync reports them),
// and a push refuses such a value.
var (
	MinTime = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Holds reports whether t lies in [MinTime, MaxTime).
func Holds(t time.Time) bool { return !t.Before(MinTime) && t.Before(MaxTime) }

// Servable reports whether the grain range [start, end) fits the served grain type.
func Servable(start, end time.Time) bool {
	return !start.Before(MinTime) && !end.After(MaxTime)
}

// TimeRange names [MinTime, MaxTime) for messages: "1900-01-01..2299-12-31".
func TimeRange() string {
	return MinTime.Format(time.DateOnly) + ".." + MaxTime.AddDate(0, 0, -1).Format(time.DateOnly)
}

// ValueColumns are the served columns other than the grain that carry a Gold value as
// it is, so a date or timestamp there must fit [MinTime, MaxTime): the dimensions, the
// min and max measures, and max_by's and min_by's values and bys.
func (m *Mart) ValueColumns() []string {
	out := m.DimNames()
	for _, ms := range m.Measures {
		switch {
		case ms.Agg == mart.Min || ms.Agg == mart.Max:
			out = append(out, ms.Name)
		case ms.Agg.By():
			out = append(out, ms.Name, mart.ByCol(ms.Name))
		}
	}
	return out
}

// PartitionExpr is the PARTITION BY expression.
func (m *Mart) PartitionExpr() string {
	if m.PartitionBy == "month" {
		return "toYYYYMM(" + Q(m.Grain.As) + ")"
	}
	return "toYYYYMMDD(" + Q(m.Grain.As) + ")"
}

// PartitionID is the ClickHouse partition id of the partition holding t.
func (m *Mart) PartitionID(t time.Time) string {
	t = t.UTC()
	if m.PartitionBy == "month" {
		return t.Format("200601")
	}
	return t.Format("20060102")
}

// PartitionRange returns [start, end) of the ClickHouse partition holding t.
func (m *Mart) PartitionRange(t time.Time) (time.Time, time.Time) {
	t = t.UTC()
	if m.PartitionBy == "month" {
		s := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return s, s.AddDate(0, 1, 0)
	}
	s := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return s, s.AddDate(0, 0, 1)
}

// ParsePartitionID is the inverse of PartitionID: the start of the partition.
func (m *Mart) ParsePartitionID(id string) (time.Time, error) {
	layout := "20060102"
	if m.PartitionBy == "month" {
		layout = "200601"
	}
	return time.ParseInLocation(layout, id, time.UTC)
}
