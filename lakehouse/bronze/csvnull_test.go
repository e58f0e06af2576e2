package bronze

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestCSVNulls: the field texts of csv.null_values (default: the empty field) are written
// as JSON null, every other field as its string; an explicit empty list makes no field NULL.
func TestCSVNulls(t *testing.T) {
	const in = "a,b,c\n,NA,x\n\"\",null,NA\n"
	for _, tc := range []struct {
		name  string
		nulls []string
		want  []string
	}{
		{"default", nil, []string{`{"a":null,"b":"NA","c":"x"}`, `{"a":null,"b":"null","c":"NA"}`}},
		{"NA and empty", []string{"", "NA"}, []string{`{"a":null,"b":null,"c":"x"}`, `{"a":null,"b":"null","c":null}`}},
		{"none", []string{}, []string{`{"a":"","b":"NA","c":"x"}`, `{"a":"","b":"null","c":"NA"}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			src := FileSource{CSVNulls: tc.nulls}
			err := readCSV(context.Background(), strings.NewReader(in), 0, ',', src.csvNulls(), func(p []byte, _ int64) error {
				got = append(got, string(p))
				return nil
			})
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}
