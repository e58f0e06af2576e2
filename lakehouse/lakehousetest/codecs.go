package lakehousetest

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go/table"
)

// FileCodecs counts the column chunks of tbl's live data files by codec, read from the
// files' Parquet footers (the files themselves, not the table's properties).
func FileCodecs(t testing.TB, tbl *table.Table) map[compress.Compression]int {
	t.Helper()
	tasks, err := tbl.Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[compress.Compression]int{}
	for _, task := range tasks {
		pr, err := file.OpenParquetFile(strings.TrimPrefix(task.File.FilePath(), "file://"), false)
		if err != nil {
			t.Fatal(err)
		}
		for rg := range pr.NumRowGroups() {
			for c := range pr.MetaData().Schema.NumColumns() {
				cc, err := pr.MetaData().RowGroup(rg).ColumnChunk(c)
				if err != nil {
					t.Fatal(err)
				}
				out[cc.Compression()]++
			}
		}
		pr.Close()
	}
	return out
}
