package silver

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"goldbridge/lakehouse/catalog"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/zeebo/xxh3"
)

// Columns goldbridge adds to Silver tables: all of them in upsert mode; _event_id,
// _run_id and _silver_updated_ts in append mode.
const (
	ColIsDeleted = "is_deleted"
	ColUpdatedTS = "_silver_updated_ts"
	ColRunID     = "_run_id"
	ColEventID   = "_event_id"
	ColCDCOp     = "_cdc_op"       // canonical op of the stored version: c, u, d, r
	ColVersion   = "_version_hash" // xxh64 of the payload: orders versions with equal time and op
	// The XXH3-128 of the rendered business key (see keyHash), in two longs: the lookup
	// of stored versions reads these fixed-width columns instead of decoding every key.
	// Upsert tables created before they existed do without them.
	ColKeyHashHi = "_key_hash_hi"
	ColKeyHashLo = "_key_hash_lo"
	// ColDeliveryID is the identity of a fact of an entity with IdentityDelivery, and its
	// key: "<_source_file>@<_source_pos>#<xxh64 of the payload, 16 hex digits>" of the
	// Bronze row it was typed from, or "<_source_file>@event:<_event_id>" for a row
	// ingested before Bronze recorded positions (see appendDeliveryID).
	ColDeliveryID = "_delivery_id"
)

// Snapshot summary keys of Silver and quarantine commits.
const (
	PropBronzeSnapshot = "goldbridge.bronze-snapshot-id" // Bronze snapshot processed up to (inclusive)
	PropRunID          = "goldbridge.run-id"
	PropCounts         = "goldbridge.counts"  // JSON of Counts
	PropQuality        = "goldbridge.quality" // JSON of Quality
	PropReplay         = "goldbridge.replay"  // "true" on a replay commit: downstream recomputes fully
)

// Quarantine table columns.
const (
	QColPayload = "raw_payload"
	QColEventID = "_event_id"
	QColReason  = "error_reason"
	QColTS      = "quarantine_ts"
	QColRunID   = "_run_id"
	QColIngest  = "_ingest_ts"
	QColFile    = "_source_file"
)

func icebergType(t Type) iceberg.Type {
	switch t.Kind {
	case String:
		return iceberg.PrimitiveTypes.String
	case Int32:
		return iceberg.PrimitiveTypes.Int32
	case Int64:
		return iceberg.PrimitiveTypes.Int64
	case Float64:
		return iceberg.PrimitiveTypes.Float64
	case Decimal:
		return iceberg.DecimalTypeOf(t.Precision, t.Scale)
	case Bool:
		return iceberg.PrimitiveTypes.Bool
	case Date:
		return iceberg.PrimitiveTypes.Date
	case Timestamp:
		return iceberg.PrimitiveTypes.TimestampTz
	}
	panic(fmt.Sprintf("silver: unknown kind %d", t.Kind))
}

func arrowType(t Type) arrow.DataType {
	switch t.Kind {
	case String:
		return arrow.BinaryTypes.String
	case Int32:
		return arrow.PrimitiveTypes.Int32
	case Int64:
		return arrow.PrimitiveTypes.Int64
	case Float64:
		return arrow.PrimitiveTypes.Float64
	case Decimal:
		return &arrow.Decimal128Type{Precision: int32(t.Precision), Scale: int32(t.Scale)}
	case Bool:
		return arrow.FixedWidthTypes.Boolean
	case Date:
		return arrow.FixedWidthTypes.Date32
	case Timestamp:
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	}
	panic(fmt.Sprintf("silver: unknown kind %d", t.Kind))
}

// internalCols are the columns added after the entity's own in upsert mode, in table order.
var internalCols = []ColumnSpec{
	{Name: ColIsDeleted, Type: Type{Kind: Bool}},
	{Name: ColCDCOp, Type: Type{Kind: String}},
	{Name: ColVersion, Type: Type{Kind: Int64}},
	{Name: ColEventID, Type: Type{Kind: String}},
	{Name: ColRunID, Type: Type{Kind: String}},
	{Name: ColUpdatedTS, Type: Type{Kind: Timestamp}},
	{Name: ColKeyHashHi, Type: Type{Kind: Int64}},
	{Name: ColKeyHashLo, Type: Type{Kind: Int64}},
}

// InternalNames are the names of the columns goldbridge adds to Silver tables (in
// upsert mode, and the delivery identity; append mode adds a subset; a Debezium
// entity the position's two); config refuses them as column names.
func InternalNames() []string {
	var out []string
	for _, c := range append(slices.Clone(internalCols), debeziumPositionCols...) {
		out = append(out, c.Name)
	}
	return append(out, ColDeliveryID)
}

// deliveryColumn is the key column of an entity with IdentityDelivery, after the
// entity's own and its rules' columns.
var deliveryColumn = ColumnSpec{Name: ColDeliveryID, Type: Type{Kind: String}}

// KeyColumns are the entity's key columns as its Silver table has them: Key, or
// ColDeliveryID with IdentityDelivery.
func (s EntitySpec) KeyColumns() []string {
	if s.Identity == IdentityDelivery {
		return []string{ColDeliveryID}
	}
	return s.Key
}

// withIdentity checks the spec's identity and returns it with Key set to the key
// columns of its table (KeyColumns).
func withIdentity(spec EntitySpec) (EntitySpec, error) {
	switch spec.Identity {
	case "", IdentityKey:
		return spec, nil
	case IdentityDelivery:
		if spec.Mode != ModeAppend {
			return spec, fmt.Errorf("identity %s is for append mode (facts): an %s entity merges the versions of its business key", IdentityDelivery, spec.Mode)
		}
		if len(spec.Key) > 0 {
			return spec, fmt.Errorf("identity %s takes no key (got %v): the delivery is the fact's identity", IdentityDelivery, spec.Key)
		}
		spec.Key = spec.KeyColumns()
		return spec, nil
	}
	return spec, fmt.Errorf("identity %q: want %s or %s", spec.Identity, IdentityKey, IdentityDelivery)
}

// withoutKeyHash drops the key hash columns from a table's columns (an upsert table
// created before they existed keeps its schema).
func withoutKeyHash(cols []ColumnSpec) []ColumnSpec {
	return slices.DeleteFunc(slices.Clone(cols), func(c ColumnSpec) bool { return c.Name == ColKeyHashHi || c.Name == ColKeyHashLo })
}

// hasKeyHash tells whether a Silver table has the key hash columns.
func hasKeyHash(sch *iceberg.Schema) bool {
	_, hi := sch.FindFieldByName(ColKeyHashHi)
	_, lo := sch.FindFieldByName(ColKeyHashLo)
	return hi && lo
}

// keyHash is the XXH3-128 of a rendered business key (see ColKeyHashHi).
func keyHash(key string) xxh3.Uint128 { return xxh3.HashString128(key) }

// appendInternalCols are the columns added after the entity's own in append mode.
var appendInternalCols = []ColumnSpec{
	{Name: ColEventID, Type: Type{Kind: String}},
	{Name: ColRunID, Type: Type{Kind: String}},
	{Name: ColUpdatedTS, Type: Type{Kind: Timestamp}},
}

// tableColumns are every column of the Silver table: the entity's, the rules', then internal.
func tableColumns(cols []ColumnSpec, mode string) []ColumnSpec {
	if mode == ModeAppend {
		return append(slices.Clone(cols), appendInternalCols...)
	}
	return append(slices.Clone(cols), internalCols...)
}

// requiredInternal tells the internal columns every row has.
func requiredInternal(name string) bool {
	switch name {
	case ColIsDeleted, ColCDCOp, ColVersion, ColKeyHashHi, ColKeyHashLo:
		return true
	}
	return false
}

// icebergSchema builds the Silver schema; key columns are required identifier fields.
func icebergSchema(cols []ColumnSpec, key []string) (*iceberg.Schema, error) {
	fields := make([]iceberg.NestedField, len(cols))
	var ids []int
	for i, c := range cols {
		req := slices.Contains(key, c.Name) || requiredInternal(c.Name)
		fields[i] = iceberg.NestedField{ID: i + 1, Name: c.Name, Type: icebergType(c.Type), Required: req}
		if slices.Contains(key, c.Name) {
			ids = append(ids, i+1)
		}
	}
	if len(ids) != len(key) {
		return nil, fmt.Errorf("key %v: not every key column is declared", key)
	}
	return iceberg.NewSchemaWithIdentifiers(0, ids, fields...), nil
}

func arrowSchemaOf(cols []ColumnSpec, key []string) *arrow.Schema {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		req := slices.Contains(key, c.Name) || requiredInternal(c.Name)
		fields[i] = arrow.Field{Name: c.Name, Type: arrowType(c.Type), Nullable: !req}
	}
	return arrow.NewSchema(fields, nil)
}

// partitionSpec buckets an upsert table (and an append table without an event time) on
// its first key column, so a small increment's lookups prune to few partitions and
// deletes stay partition-local. An append table with an event time is partitioned by
// day(event_time), so the lookback anti-join reads only the days in its window.
func partitionSpec(sch *iceberg.Schema, spec EntitySpec) (iceberg.PartitionSpec, error) {
	if spec.Mode == ModeAppend && spec.EventTime != "" {
		f, ok := sch.FindFieldByName(spec.EventTime)
		if !ok {
			return iceberg.PartitionSpec{}, fmt.Errorf("event_time column %s not in schema", spec.EventTime)
		}
		return iceberg.NewPartitionSpec(iceberg.PartitionField{
			SourceIDs: []int{f.ID}, FieldID: 1000, Name: spec.EventTime + "_day", Transform: iceberg.DayTransform{},
		}), nil
	}
	return bucketSpec(sch, spec.Key, max(spec.Buckets, 1))
}

func bucketSpec(sch *iceberg.Schema, key []string, buckets int) (iceberg.PartitionSpec, error) {
	f, ok := sch.FindFieldByName(key[0])
	if !ok {
		return iceberg.PartitionSpec{}, fmt.Errorf("key column %s not in schema", key[0])
	}
	return iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{f.ID}, FieldID: 1000, Name: key[0] + "_bucket", Transform: iceberg.BucketTransform{NumBuckets: buckets},
	}), nil
}

// sortedRowGroup is the row group size of a sorted Silver table: at 10M demo events a
// bucket file holds ~190k rows over 120 days, so a day is in one or two of its row groups.
const sortedRowGroup = 16384

// sortOrder is the Iceberg sort order of spec.SortBy (ascending, nulls first), or the
// unsorted order.
func sortOrder(sch *iceberg.Schema, spec EntitySpec) (table.SortOrder, error) {
	var fields []table.SortField
	for _, c := range spec.SortBy {
		f, ok := sch.FindFieldByName(c)
		if !ok {
			return table.SortOrder{}, fmt.Errorf("sort_by column %s not in schema", c)
		}
		fields = append(fields, table.SortField{SourceIDs: []int{f.ID}, Transform: iceberg.IdentityTransform{},
			Direction: table.SortASC, NullOrder: table.NullsFirst})
	}
	if len(fields) == 0 {
		return table.UnsortedSortOrder, nil
	}
	return table.NewSortOrder(1, fields)
}

// tableProperties are those of every table of the entity (Silver, its quarantine, its
// keys): Parquet compressed with the entity's codec (lakehouse.compression.silver; the
// default zstd level 1 writes files a few percent larger than level 3's for ~40% less
// compression CPU, a fifth of a full Silver build's write at level 3).
func tableProperties(codec catalog.Codec) iceberg.Properties {
	props := iceberg.Properties{
		"format-version":                "2",
		"write.parquet.row-group-limit": "131072",
		"write.delete.mode":             "merge-on-read",
		"write.update.mode":             "merge-on-read",
	}
	maps.Copy(props, codec.Properties())
	return props
}

// silverProperties are the Silver table's: no dictionary for the columns whose values
// are (nearly) all distinct in a file (a single-column key, the event id, the version
// and key hashes), which Parquet would hash and then give up on; with sort_by, row
// groups of sortedRowGroup rows, so that a range of the sort column maps to few of them.
func silverProperties(spec EntitySpec) iceberg.Properties {
	props := tableProperties(spec.Codec)
	if len(spec.SortBy) > 0 {
		props["write.parquet.row-group-limit"] = strconv.Itoa(sortedRowGroup)
	}
	// _run_id is one value per run: plain pages of it compress as well, unhashed.
	unique := []string{ColEventID, ColRunID}
	if spec.Mode != ModeAppend {
		unique = append(unique, ColVersion, ColKeyHashHi, ColKeyHashLo)
	}
	if len(spec.Key) == 1 {
		unique = append(unique, spec.Key[0])
	}
	for _, c := range unique {
		props["write.parquet.dict-encoding-enabled.column."+c] = "false"
	}
	return props
}

var quarantineArrow = arrow.NewSchema([]arrow.Field{
	{Name: QColPayload, Type: arrow.BinaryTypes.String},
	{Name: QColEventID, Type: arrow.BinaryTypes.String},
	{Name: QColReason, Type: arrow.BinaryTypes.String},
	{Name: QColTS, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: QColRunID, Type: arrow.BinaryTypes.String},
	{Name: QColIngest, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: QColFile, Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

func quarantineSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: QColPayload, Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 2, Name: QColEventID, Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 3, Name: QColReason, Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 4, Name: QColTS, Type: iceberg.PrimitiveTypes.TimestampTz, Required: true},
		iceberg.NestedField{ID: 5, Name: QColRunID, Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 6, Name: QColIngest, Type: iceberg.PrimitiveTypes.TimestampTz},
		iceberg.NestedField{ID: 7, Name: QColFile, Type: iceberg.PrimitiveTypes.String},
	)
}

func quarantineSpec() iceberg.PartitionSpec {
	return iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{4}, FieldID: 1000, Name: "quarantine_day", Transform: iceberg.DayTransform{},
	})
}

// keyColumns are the declared key columns, in key order.
func keyColumns(cols []ColumnSpec, key []string) []ColumnSpec {
	out := make([]ColumnSpec, 0, len(key))
	for _, k := range key {
		if i := slices.IndexFunc(cols, func(c ColumnSpec) bool { return c.Name == k }); i >= 0 {
			out = append(out, cols[i])
		}
	}
	return out
}

// keysTableLayout is the schema and partitioning of an append entity's keys table: the
// key columns only, bucketed on the first like an upsert table, so an IN lookup of a
// small increment reads few files.
func keysTableLayout(cols []ColumnSpec, spec EntitySpec) (*iceberg.Schema, iceberg.PartitionSpec, error) {
	kc := keyColumns(cols, spec.Key)
	sch, err := icebergSchema(kc, spec.Key)
	if err != nil {
		return nil, iceberg.PartitionSpec{}, err
	}
	ps, err := bucketSpec(sch, spec.Key, max(spec.Buckets, 1))
	return sch, ps, err
}
