package silver

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/filescan"
)

// The engine of a Silver run: the compiled entity, its columns, and what a run reads.

// engine holds the compiled entity and the state of one run.
type engine struct {
	spec         EntitySpec
	append       bool         // append mode
	cols         []ColumnSpec // entity columns + rule columns
	tcols        []ColumnSpec // table columns
	keyHashCols  bool         // the table has the key hash columns (upsert tables created with them)
	keyIdx       []int
	uaIdx        int // upsert: updated_at (a Debezium entity ordered by position: _cdc_position)
	seqIdx       int // a Debezium entity ordered by position: _cdc_sequence, else -1
	carriedIdx   int // and _cdc_carried, else -1
	opIdx        int // upsert: op, or -1
	etIdx        int // append: event_time, or -1
	rules        *ruleSet
	opMap        map[string]byte
	ws           []*winners             // the winners, one shard per merge goroutine (see shardOfKey)
	sortBy       []int                  // columns the written rows are sorted by
	replaced     map[int]map[int64]bool // upsert: per sort_by column, the values of the versions replaced (see PropReplacedPrefix)
	written      map[int]map[int64]bool // per sort_by column, the values of the rows written (see PropWrittenPrefix)
	bucketShards bool                   // shard by the Iceberg bucket of the key (each data file from one shard)
	counts       Counts
	reasons      map[string]int64 // quarantined rows by reason class (before ": "), for the gate
	quar         *array.RecordBuilder
	runID        string
	now          time.Time
	keyBuf       []byte
	keys         *keySet // append mode with a keys table
	decrypt      func([]byte) ([]byte, error)

	deliveryIdx  int          // IdentityDelivery: the ColDeliveryID column, or -1
	bronzeFields []string     // the Bronze columns read (see readsBronze)
	bronzeDirect bool         // Bronze may be read with filescan (its files have every column read)
	undated      atomic.Int64 // IdentityDelivery: Bronze rows without a position (first pass)

	quality Quality
	drift   fieldTally // the run's undeclared fields (drift.go)

	refill []refill // late Debezium versions that give a stored row a column it lacks (debezium_toast.go)

	lookupPruner *keyPruner // the stored-version lookup's, for its counts (nil: none)

	group, groups int // the key group of this pass, of groups (see Options.PassRows)
	budget        passBudget
	writeBatch    int // Options.writeBatch
	// rowGroup is the key group of each Bronze row of the range being read, in read
	// order (otherGroup: quarantined), recorded by the first pass so that the others
	// skip other groups' rows unparsed; nil when not recorded. rowsRead counts the rows
	// the range's read yielded.
	rowGroup []uint8
	rowsRead int64

	startWatermark     int64 // Silver's Bronze watermark when the run started
	startKeysWatermark int64 // the keys table's

	// retypes are the type changes a replay applies in its commit (applyRetypes), and
	// writeSchema the table's schema with them, which its data files are written for.
	retypes     []schemaChange
	writeSchema *iceberg.Schema
}

func newEngine(spec EntitySpec, opt Options) (*engine, error) {
	spec, err := withIdentity(spec)
	if err != nil {
		return nil, err
	}
	loader := opt.Lookups
	rules, _, err := compileRules(spec.Rules, spec.Columns, func(l LookupSpec) (LookupTable, string, error) {
		if loader == nil {
			return nil, "", fmt.Errorf("lookup against entity %s is not available here", l.Entity)
		}
		return loader(l)
	})
	if err != nil {
		return nil, err
	}
	cols, err := entityColumns(rules.cols, spec) // the declared columns (as the rules retype them), the rules' own, goldbridge's
	if err != nil {
		return nil, err
	}
	if spec.Debezium != nil {
		if spec.Mode != ModeUpsert {
			return nil, errors.New("a Debezium entity is mode upsert")
		}
		if spec.Op != "" || len(spec.OpValues) > 0 {
			return nil, errors.New("a Debezium entity takes its op from the events (no op column)")
		}
		if err := spec.Debezium.check(); err != nil {
			return nil, err
		}
		if spec.UpdatedAt == "" { // ordered by the source position, stored in two columns
			cols = append(cols, debeziumPositionCols...)
		}
	}
	if _, err := newParser(spec.Columns); err != nil { // defaults are checked here
		return nil, err
	}
	e := &engine{
		spec: spec, append: spec.Mode == ModeAppend, cols: cols, tcols: tableColumns(cols, spec.Mode), rules: rules,
		uaIdx: -1, seqIdx: -1, carriedIdx: -1, opIdx: -1, etIdx: -1, deliveryIdx: -1,
		now: time.Now().UTC(), quar: array.NewRecordBuilder(memory.DefaultAllocator, quarantineArrow),
	}
	e.ws = make([]*winners, mergeShards())
	e.groups = 1
	idx := func(name string) int {
		return slices.IndexFunc(cols, func(c ColumnSpec) bool { return c.Name == name })
	}
	for _, k := range spec.Key {
		i := idx(k)
		if i < 0 {
			return nil, fmt.Errorf("key column %s is not declared", k)
		}
		e.keyIdx = append(e.keyIdx, i)
	}
	if spec.Identity == IdentityDelivery {
		e.deliveryIdx = idx(ColDeliveryID)
	}
	if len(e.keyIdx) == 0 {
		return nil, errors.New("no key columns")
	}
	for _, c := range spec.SortBy {
		i := idx(c)
		if i < 0 {
			return nil, fmt.Errorf("sort_by column %s is not declared", c)
		}
		e.sortBy = append(e.sortBy, i)
	}
	switch cols[e.keyIdx[0]].Type.Kind {
	case String, Int32, Int64, Date, Timestamp:
		// Bucket-partitioned on the first key column with at least two buckets per shard.
		e.bucketShards = !(spec.Mode == ModeAppend && spec.EventTime != "") && spec.Buckets >= 2*len(e.ws)
	}
	e.resetWinners()
	if e.append {
		if spec.EventTime != "" {
			if e.etIdx = idx(spec.EventTime); e.etIdx < 0 {
				return nil, fmt.Errorf("event_time column %q is not declared", spec.EventTime)
			}
			if k := cols[e.etIdx].Type.Kind; k != Timestamp && k != Date {
				return nil, fmt.Errorf("event_time column %q must be a timestamp or date", spec.EventTime)
			}
		} else if spec.Lookback > 0 {
			return nil, errors.New("lookback needs event_time (the window is on that column)")
		}
		if spec.KeysTable != "" {
			e.keys = newKeySet(keyColumns(cols, spec.Key))
		}
		return e, nil
	}
	if spec.Debezium != nil && spec.UpdatedAt == "" {
		e.uaIdx, e.seqIdx, e.carriedIdx = idx(ColCDCPosition), idx(ColCDCSequence), idx(ColCDCCarried)
		return e, nil
	}
	if e.uaIdx = idx(spec.UpdatedAt); e.uaIdx < 0 {
		return nil, fmt.Errorf("updated_at column %q is not declared", spec.UpdatedAt)
	}
	if spec.Op != "" {
		if e.opIdx = idx(spec.Op); e.opIdx < 0 {
			return nil, fmt.Errorf("op column %q is not declared", spec.Op)
		}
	}
	e.opMap = map[string]byte{"c": 'c', "u": 'u', "d": 'd', "r": 'r'}
	for op, vals := range spec.OpValues {
		for _, v := range vals {
			e.opMap[v] = op[0]
		}
	}
	return e, nil
}

// entityColumns are the columns of an entity's rows: the declared columns (as the rules
// retype them), the rules' own, then (IdentityDelivery) ColDeliveryID.
func entityColumns(ruleCols []ColumnSpec, spec EntitySpec) ([]ColumnSpec, error) {
	cols := slices.Clone(ruleCols)
	if spec.Identity != IdentityDelivery {
		return cols, nil
	}
	if slices.ContainsFunc(cols, func(c ColumnSpec) bool { return c.Name == ColDeliveryID }) {
		return nil, fmt.Errorf("column %s: goldbridge adds it with identity %s", ColDeliveryID, IdentityDelivery)
	}
	return append(cols, deliveryColumn), nil
}

// readsBronze sets the Bronze columns the run reads: the payload and its audit columns,
// plus, with IdentityDelivery, the record's position if the table has the column (a table
// not ingested into since Bronze added it has none: its rows are named by their event id).
// Files written before the column was added lack it: then the table scan, which reads
// it as null there, reads Bronze instead of filescan.
func (e *engine) readsBronze(bt *table.Table) {
	e.bronzeFields, e.bronzeDirect = bronzeFields, true
	if e.deliveryIdx < 0 {
		return
	}
	if _, ok := bt.Schema().FindFieldByName(bronze.ColSourcePos); ok {
		e.bronzeFields = append(slices.Clone(bronzeFields), bronze.ColSourcePos)
		e.bronzeDirect = !filescan.Evolved(bt)
	}
}

// warnUndated says how many Bronze rows the run named by their event id, having no
// position (IdentityDelivery).
func (e *engine) warnUndated(log *slog.Logger) {
	if n := e.undated.Load(); n > 0 {
		log.Warn("bronze rows without a _source_pos (ingested before Bronze recorded positions): each is a delivery of its own, named by its _event_id; a record Bronze holds twice among them is kept twice",
			"entity", e.spec.Name, "rows", n)
	}
}

// direct tells whether tasks of Bronze are read with filescan (see readsBronze).
func (e *engine) direct(tasks []table.FileScanTask) bool {
	return e.bronzeDirect && filescan.Direct(tasks)
}
