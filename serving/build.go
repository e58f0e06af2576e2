package serving

import (
	"fmt"
	"slices"
	"time"

	"github.com/apache/iceberg-go"

	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/mart"
)

// Target is where and how a mart is served: the clickhouse section and the mart's
// serving keys of the config.
type Target struct {
	Database    string
	Table       string
	Cluster     string
	Sharded     bool // Cluster is a topology of plain nodes in shards (Mart.Sharded)
	PartitionBy string
	HotWindow   time.Duration
	HotAnchor   string
	TTL         time.Duration
	Distinct    string
	Windows     Windows
}

// NewMart builds the complete serving model of the mart spec defines, served at t:
// its columns and their types are those of spec's Gold table (gold.MartSpec.Schema),
// and Definition records the definition, so a sync refuses a Gold table built for
// another. A measure is served as its aggregate's mart.Agg.Served (count_if as count,
// sum_if as sum).
func NewMart(spec gold.MartSpec, t Target) (*Mart, error) {
	m := &Mart{
		Name: spec.Name, Database: t.Database, Table: t.Table, Cluster: t.Cluster, Sharded: t.Sharded,
		Grain:    Grain{As: spec.GrainAs, Unit: spec.GrainUnit},
		Grouping: spec.Grouping, Sets: spec.GroupingSets,
		PartitionBy: t.PartitionBy, HotWindow: t.HotWindow, HotAnchor: t.HotAnchor, TTL: t.TTL, Distinct: t.Distinct,
		Windows:    t.Windows,
		Definition: spec.Definition(),
	}
	for _, d := range spec.Dims {
		m.Dimensions = append(m.Dimensions, Dim{Name: d.Name})
	}
	for _, ms := range spec.Measures {
		m.Measures = append(m.Measures, Measure{Name: ms.Name, Agg: ms.Agg.Served(), Quantiles: ms.Quantiles})
	}
	if err := m.setTypes(spec.Schema()); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// CheckSchema reports whether the Gold table schema sch holds every served column with
// the type m serves it as (a Gold table built for m's definition does).
func (m *Mart) CheckSchema(sch *iceberg.Schema) error {
	c := *m
	c.Dimensions, c.Measures = slices.Clone(m.Dimensions), slices.Clone(m.Measures)
	if err := c.setTypes(sch); err != nil {
		return err
	}
	for i, d := range c.Dimensions {
		if d.Type != m.Dimensions[i].Type {
			return fmt.Errorf("mart %s: dimension %s is %s in the gold table, %s as served", m.Name, d.Name, d.Type, m.Dimensions[i].Type)
		}
	}
	for i, ms := range c.Measures {
		if ms.Type != m.Measures[i].Type {
			return fmt.Errorf("mart %s: measure %s is %s in the gold table, %s as served", m.Name, ms.Name, ms.Type, m.Measures[i].Type)
		}
		if ms.ByType != m.Measures[i].ByType {
			return fmt.Errorf("mart %s: measure %s's by is %s in the gold table, %s as served", m.Name, ms.Name, ms.ByType, m.Measures[i].ByType)
		}
	}
	return nil
}

// setTypes sets the dimension and measure types of m from the Gold schema sch.
func (m *Mart) setTypes(sch *iceberg.Schema) error {
	typeOf := func(col string) (string, error) {
		f, ok := sch.FindFieldByName(col)
		if !ok {
			return "", fmt.Errorf("mart %s: gold table has no column %s", m.Name, col)
		}
		t, err := ClickHouseType(f.Type)
		if err != nil {
			return "", fmt.Errorf("mart %s: column %s: %w", m.Name, col, err)
		}
		return t, nil
	}
	var err error
	for i := range m.Dimensions {
		if m.Dimensions[i].Type, err = typeOf(m.Dimensions[i].Name); err != nil {
			return err
		}
	}
	for i := range m.Measures {
		ms := &m.Measures[i]
		// The type of the value the served table keeps in simple columns, from Gold's.
		switch {
		case ms.Agg.Result() == mart.ResultAverage: // its sum; the count is Int64
			ms.Type, err = typeOf(mart.SumCol(ms.Name))
		case ms.Agg.List() != mart.ListNone: // a state, finished from its list
		case ms.Agg.Result() == mart.ResultCount:
			ms.Type = "Int64"
		case ms.Agg.By(): // and its by's
			if ms.Type, err = typeOf(ms.Name); err == nil {
				ms.ByType, err = typeOf(mart.ByCol(ms.Name))
			}
		default:
			ms.Type, err = typeOf(ms.Name)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ClickHouseType maps a Gold column's Iceberg type to the scalar ClickHouse type
// serving uses for it (decimals are served as Decimal(38, S)).
func ClickHouseType(t iceberg.Type) (string, error) {
	switch v := t.(type) {
	case iceberg.StringType:
		return "String", nil
	case iceberg.Int32Type:
		return "Int32", nil
	case iceberg.Int64Type:
		return "Int64", nil
	case iceberg.Float64Type:
		return "Float64", nil
	case iceberg.BooleanType:
		return "Bool", nil
	case iceberg.DateType:
		return "Date32", nil
	case iceberg.TimestampTzType, iceberg.TimestampType:
		return "DateTime64(6, 'UTC')", nil
	case iceberg.DecimalType:
		return fmt.Sprintf("Decimal(38, %d)", v.Scale()), nil
	}
	return "", fmt.Errorf("type %s is not served", t)
}
