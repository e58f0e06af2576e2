package gold

import (
	"fmt"
	"maps"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"

	"goldbridge/lakehouse/mart"
	"goldbridge/lakehouse/silver"
)

// outCol is one column of the Gold table.
type outCol struct {
	name     string
	ice      iceberg.Type
	arrow    arrow.DataType
	required bool
}

var tsType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

func scalarTypes(t silver.Type) (iceberg.Type, arrow.DataType) {
	switch t.Kind {
	case silver.String:
		return iceberg.PrimitiveTypes.String, arrow.BinaryTypes.String
	case silver.Int32:
		return iceberg.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int32
	case silver.Int64:
		return iceberg.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Int64
	case silver.Float64:
		return iceberg.PrimitiveTypes.Float64, arrow.PrimitiveTypes.Float64
	case silver.Decimal:
		return iceberg.DecimalTypeOf(t.Precision, t.Scale), &arrow.Decimal128Type{Precision: int32(t.Precision), Scale: int32(t.Scale)}
	case silver.Bool:
		return iceberg.PrimitiveTypes.Bool, arrow.FixedWidthTypes.Boolean
	case silver.Date:
		return iceberg.PrimitiveTypes.Date, arrow.FixedWidthTypes.Date32
	case silver.Timestamp:
		return iceberg.PrimitiveTypes.TimestampTz, tsType
	}
	panic(fmt.Sprintf("gold: unknown kind %d", t.Kind))
}

// sumType is the type of a sum over t: decimal(38,s), long or double.
func sumType(t silver.Type) silver.Type {
	switch t.Kind {
	case silver.Decimal:
		return silver.Type{Kind: silver.Decimal, Precision: 38, Scale: t.Scale}
	case silver.Float64:
		return silver.Type{Kind: silver.Float64}
	}
	return silver.Type{Kind: silver.Int64}
}

// avgType is the type of an average over t.
func avgType(t silver.Type) silver.Type {
	if t.Kind == silver.Decimal {
		return silver.Type{Kind: silver.Decimal, Precision: 38, Scale: min(t.Scale+avgScaleExtra, 38)}
	}
	return silver.Type{Kind: silver.Float64}
}

// grainType is the type of the grain column: date for day and month, timestamp for hour.
func (m MartSpec) grainType() silver.Type {
	if m.GrainUnit == "hour" {
		return silver.Type{Kind: silver.Timestamp}
	}
	return silver.Type{Kind: silver.Date}
}

var longT = silver.Type{Kind: silver.Int64}

// col is a scalar column of type t (req: never NULL).
func col(name string, t silver.Type, req bool) outCol {
	it, at := scalarTypes(t)
	return outCol{name: name, ice: it, arrow: at, required: req}
}

// columns lists the Gold table's columns in order (docs/gold.md).
func (m MartSpec) columns() []outCol {
	cols := []outCol{col(m.GrainAs, m.grainType(), true)}
	for _, d := range m.Dims {
		cols = append(cols, col(d.Name, d.Type, false))
	}
	for _, d := range m.Dims {
		cols = append(cols, col(mart.GroupingCol(d.Name), silver.Type{Kind: silver.Int32}, true))
	}
	cols = append(cols, col(mart.ColGroupingLevel, silver.Type{Kind: silver.String}, true))
	for _, ms := range m.Measures {
		cols = append(cols, shapeOf(ms).value(ms))
	}
	for _, ms := range m.Measures {
		if h := shapeOf(ms).hidden; h != nil {
			cols = append(cols, h(ms)...)
		}
	}
	cols = append(cols, col(mart.ColCalculatedAt, silver.Type{Kind: silver.Timestamp}, true), col(mart.ColRunID, silver.Type{Kind: silver.String}, true))
	return cols
}

// doubleList is a nullable list<double> column (quantiles and their values).
func doubleList(name string) outCol {
	return outCol{name: name,
		ice:   &iceberg.ListType{Element: iceberg.PrimitiveTypes.Float64, ElementRequired: true},
		arrow: arrow.ListOfNonNullable(arrow.PrimitiveTypes.Float64)}
}

// Schema is the Gold table's schema for this definition (docs/gold.md).
func (m MartSpec) Schema() *iceberg.Schema {
	cols := m.columns()
	fields := make([]iceberg.NestedField, len(cols))
	next := len(cols) + 1
	for i, c := range cols {
		t := c.ice
		if lt, ok := t.(*iceberg.ListType); ok {
			lt = &iceberg.ListType{ElementID: next, Element: lt.Element, ElementRequired: lt.ElementRequired}
			next++
			t = lt
		}
		fields[i] = iceberg.NestedField{ID: i + 1, Name: c.name, Type: t, Required: c.required}
	}
	return iceberg.NewSchema(0, fields...)
}

func (m MartSpec) arrowSchema() *arrow.Schema {
	cols := m.columns()
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: c.name, Type: c.arrow, Nullable: !c.required}
	}
	return arrow.NewSchema(fields, nil)
}

func (m MartSpec) partitionSpec() iceberg.PartitionSpec {
	return iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{1}, FieldID: 1000, Name: m.GrainAs, Transform: iceberg.IdentityTransform{},
	})
}

// tableProperties are a new Gold table's. The distinct keys are nearly unique values
// (no dictionary: it grows to fall back anyway, and decoding it was most of the push's
// Parquet reading at 10M events). The codec is the mart's (lakehouse.compression.gold);
// its default, zstd level 1: the 8 partitions of a 10M incremental run were written and
// committed in 61-121 ms instead of 83-160 ms at level 3, in 801 KB instead of 838 KB.
func (m MartSpec) tableProperties() iceberg.Properties {
	props := iceberg.Properties{
		"format-version": "2",
		PropCircuit:      "closed",
		PropSpec:         m.Definition(),
	}
	maps.Copy(props, m.Codec.Properties())
	for _, ms := range m.Measures {
		if ms.Agg.List() == mart.ListKeys {
			props["write.parquet.dict-encoding-enabled.column."+mart.KeysCol(ms.Name)+".list.element"] = "false"
		}
	}
	for k, v := range m.metricsProperties() {
		props[k] = v
	}
	return props
}

// metricsProperties keep column statistics in Gold's manifests only for its date and
// timestamp columns (the grain, and the ranges sync reads from the bounds): every run
// reads and rewrites the manifest entries of all partitions (the replace's scans, the
// row-count check, freshness, sync's plan), and at 3600 partitions the statistics of
// the other columns, which no reader prunes by, made most of their cost.
func (m MartSpec) metricsProperties() iceberg.Properties {
	props := iceberg.Properties{metricsDefault: "none"}
	for _, c := range m.columns() {
		switch c.ice.(type) {
		case iceberg.DateType, iceberg.TimestampType, iceberg.TimestampTzType:
			props[metricsColumn+c.name] = "full"
		}
	}
	return props
}

// upgradedProperties are the properties a table created by an older goldbridge lacks
// or holds otherwise: its definition (PropSpec, when its columns are the mart's) and
// the statistics kept (metricsProperties, for the files written from now on).
func (m MartSpec) upgradedProperties(have iceberg.Properties) iceberg.Properties {
	want := m.metricsProperties()
	want[PropSpec] = m.Definition()
	up := iceberg.Properties{}
	for k, v := range want {
		if have[k] != v {
			up[k] = v
		}
	}
	return up
}

// Iceberg's write properties of the column statistics kept in manifests.
const (
	metricsDefault = "write.metadata.metrics.default"
	metricsColumn  = "write.metadata.metrics.column."
)
