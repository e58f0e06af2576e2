package catalog

import (
	"strings"
	"testing"

	"github.com/apache/iceberg-go"
)

// counted is a data file that only knows its row count (HoldAll reads nothing else).
type counted struct {
	iceberg.DataFile
	n int64
}

func (c counted) Count() int64 { return c.n }

// HoldAll accepts files that hold every row handed to the writer, and refuses fewer or
// more, naming both counts.
func TestHoldAll(t *testing.T) {
	files := func(ns ...int64) []iceberg.DataFile {
		var out []iceberg.DataFile
		for _, n := range ns {
			out = append(out, counted{n: n})
		}
		return out
	}
	for _, c := range []struct {
		name   string
		files  []iceberg.DataFile
		handed int64
		err    string
	}{
		{"nothing", nil, 0, ""},
		{"all in two files", files(2, 3), 5, ""},
		{"a partition lost", files(2), 5, "hold 2 rows of the 5 written"},
		{"no file", nil, 3, "hold 0 rows of the 3 written"},
		{"more than handed", files(4, 4), 5, "hold 8 rows of the 5 written"},
	} {
		err := HoldAll(c.files, c.handed)
		if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: HoldAll = %v, want %q", c.name, err, c.err)
		}
	}
}
