// Package silver turns Bronze payloads into typed entities: parsing and typing, the rules
// registry, quarantine with a reason, CDC dedup and a MERGE that late events cannot roll
// back (upsert), or anti-join dedup of immutable facts (append); incremental from the last
// Bronze snapshot processed, with the watermark committed atomically with the data.
// A run's memory is bounded (Options.PassRows, Options.PassBytes): a pass over the
// byte bound starts the run again in more passes, and nothing it wrote stays.
package silver

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"goldbridge/lakehouse/catalog"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// Kind is the type of a Silver column.
type Kind int

// Column kinds.
const (
	String Kind = iota
	Int32
	Int64
	Float64
	Decimal
	Bool
	Date
	Timestamp
)

// Type is a Silver column type; Precision and Scale apply to Decimal.
type Type struct {
	Kind             Kind
	Precision, Scale int
}

var decimalRe = regexp.MustCompile(`^decimal\((\d+),\s*(\d+)\)$`)

// ParseType parses a config type: string, int32, int64, float64, decimal(p,s), bool, date, timestamp.
func ParseType(s string) (Type, error) {
	switch s {
	case "string":
		return Type{Kind: String}, nil
	case "int32":
		return Type{Kind: Int32}, nil
	case "int64":
		return Type{Kind: Int64}, nil
	case "float64":
		return Type{Kind: Float64}, nil
	case "bool":
		return Type{Kind: Bool}, nil
	case "date":
		return Type{Kind: Date}, nil
	case "timestamp":
		return Type{Kind: Timestamp}, nil
	}
	if m := decimalRe.FindStringSubmatch(s); m != nil {
		p, _ := strconv.Atoi(m[1])
		sc, _ := strconv.Atoi(m[2])
		if p >= 1 && p <= 38 && sc <= p {
			return Type{Kind: Decimal, Precision: p, Scale: sc}, nil
		}
	}
	return Type{}, fmt.Errorf("unknown type %q", s)
}

func (t Type) String() string {
	switch t.Kind {
	case String:
		return "string"
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	case Float64:
		return "float64"
	case Decimal:
		return fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale)
	case Bool:
		return "bool"
	case Date:
		return "date"
	case Timestamp:
		return "timestamp"
	}
	return "?"
}

// ColumnSpec is one typed column read from the payload.
type ColumnSpec struct {
	Name     string
	Path     string // JSON path, "$.a.b"
	Type     Type
	Required bool
	Default  *string
	Format   string // timestamp/date: "" or rfc3339, epoch_s, epoch_ms, epoch_us, or a Go layout
	// RenamedFrom is the column's earlier name: a table that still has it renames it in
	// place (by field id: the stored rows keep their values under the new name).
	RenamedFrom string
}

// RuleSpec is one entry of the rules registry.
type RuleSpec struct {
	ID     string
	Kind   string // filter | normalize | derive | lookup
	Expr   string
	Column string
	Type   string // derive: the new column's; normalize: optional, the column's type from this rule on
	Reason string
	Lookup *LookupSpec
}

// LookupSpec is a LEFT JOIN enrichment against a CSV reference file or another entity.
type LookupSpec struct {
	Entity  string
	Table   string // Entity's Silver table, read at its current snapshot (LoadLakeLookup)
	File    string
	On      map[string]string // this column -> lookup column
	Columns []string          // the lookup's columns brought in
	As      []string          // their names in Silver, parallel to Columns; nil: as in Columns
	// OnChange is what a run does when the lookup changed since Silver's last commit
	// and stored rows hold the old enrichment: LookupReplay (the default) or LookupFail.
	OnChange string
}

// What a run does about stored rows a changed lookup would enrich differently
// (LookupSpec.OnChange; see lookupversion.go).
const (
	LookupReplay = "replay" // the run rebuilds Silver from Bronze with the current lookup
	LookupFail   = "fail"   // the run commits nothing and fails with ErrLookupChanged
)

// SilverNames are the names the lookup's columns take in Silver.
func (l LookupSpec) SilverNames() []string {
	if len(l.As) == len(l.Columns) {
		return l.As
	}
	return l.Columns
}

// Modes of an entity.
const (
	ModeUpsert = "upsert" // mutable entities: one current row per key, CDC merge
	ModeAppend = "append" // immutable facts: one row per event key, anti-join dedup
)

// Identities of an append entity's facts: what makes two Bronze rows the same fact.
const (
	// IdentityKey: the business key (EntitySpec.Key). A row whose key is stored is a
	// duplicate, whatever else it holds.
	IdentityKey = "key"
	// IdentityDelivery: where Bronze got the record (its source file or Kafka partition,
	// its position there) and its bytes, in the column ColDeliveryID. Every delivered
	// record is a fact, identical ones included; only the same record delivered again
	// (read again from the same place) is a duplicate. For facts without a natural key.
	IdentityDelivery = "delivery"
)

// EntitySpec is the Silver model of one entity.
type EntitySpec struct {
	Name            string
	Table           string
	QuarantineTable string
	Mode            string // upsert | append
	Identity        string // append: IdentityKey ("" too) or IdentityDelivery (then Key is empty)
	Key             []string
	UpdatedAt       string              // upsert ordering column
	Op              string              // upsert CDC op column ("" = every row is an upsert)
	OpValues        map[string][]string // source op values per canonical op c/u/d/r
	EventTime       string              // append: partition/lookback column
	Lookback        time.Duration       // append: anti-join window (0 = unbounded)
	KeysTable       string              // append: compact keys table (key columns only) for unbounded lookback
	Buckets         int
	SortBy          []string // columns Silver's data files are sorted by (prunes scans on them, e.g. a mart's grain)
	Columns         []ColumnSpec
	Rules           []RuleSpec
	// IgnoredFields are top-level payload fields the entity knows and does not read:
	// never reported as undeclared (drift.go).
	IgnoredFields []string
	// Debezium, if set, reads the payloads as Debezium change events (upsert mode;
	// debezium.go): the columns from the row image, the op from the event, and the
	// versions ordered by the source position unless UpdatedAt is set.
	Debezium *DebeziumSpec
	// Codec compresses the data files of the entity's tables (the zero value:
	// catalog.DefaultCodec); a table written with another is set to it before a run.
	Codec catalog.Codec

	// Quality warning thresholds in percent of the Bronze rows of a run: the report
	// warns when the quarantined (duplicate) share is above them.
	WarnQuarantinePct, WarnDuplicatePct float64
	// FailQuarantinePct is the quarantine gate: a run that quarantines a larger share of
	// its Bronze rows commits nothing and fails with ErrQuarantineGate (0 = no gate).
	FailQuarantinePct float64
	// Severity is the severity of the row, schema and balance checks of the quality
	// report: a failed critical check (the default) commits nothing and fails the run
	// with ErrCriticalCheck; a failed warning is reported in Quality.Failures and the
	// run commits.
	Severity Severities
}

// Value is one typed cell. I holds Int32/Int64, Date (days since 1970-01-01) and
// Timestamp (µs since the epoch, UTC); D holds a Decimal's unscaled value.
type Value struct {
	Null bool
	S    string
	I    int64
	F    float64
	D    decimal128.Num
	B    bool
}
