package sync

import (
	"fmt"

	"github.com/apache/iceberg-go"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
)

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

// FillTypes sets the dimension and measure types of m from the Gold table's schema
// (the types are Gold's, not the config's).
func FillTypes(m *serving.Mart, sch *iceberg.Schema) error {
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
		switch ms.Agg {
		case mart.Count:
			ms.Type = "Int64"
		case mart.Sum, mart.Min, mart.Max:
			ms.Type, err = typeOf(ms.Name)
		case mart.Avg:
			ms.Type, err = typeOf(mart.SumCol(ms.Name))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
