package gold

import (
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// TestDecimalFloat: a decimal input becomes the nearest float64, as ClickHouse's
// toFloat64 and strconv give it.
func TestDecimalFloat(t *testing.T) {
	for _, c := range []struct {
		text  string
		scale int
	}{{"291.53", 2}, {"-291.53", 2}, {"63.55", 2}, {"42.30", 2}, {"0.00", 2}, {"12345678901234567890.12", 2}, {"-0.000001", 6}, {"9007199254740993", 0}} {
		d, err := decimal128.FromString(c.text, 38, int32(c.scale))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := strconv.ParseFloat(c.text, 64)
		if got := decimalFloat(d, c.scale); got != want {
			t.Errorf("%s: %v, want %v", c.text, got, want)
		}
	}
}
