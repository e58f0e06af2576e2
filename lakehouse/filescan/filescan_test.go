package filescan_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/arrowmem"
	"goldbridge/lakehouse/filescan"
	"goldbridge/lakehouse/lakehousetest"
)

// text is row i's string: up to 5 KB, so that pages are far larger than the read
// buffer and values cross buffer boundaries; every 7th is NULL.
func text(i int) (string, bool) {
	if i%7 == 3 {
		return "", false
	}
	return strings.Repeat(string(rune('a'+i%26)), i%5000) + "|" + string(rune('A'+i%26)), true
}

// Read must yield every row of the files as written, in order, through its small
// read buffer and recycled batch buffers, and skip exactly the row groups
// KeepRowGroup rejects.
func TestReadYieldsRowsAsWritten(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	sch := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 2, Name: "s", Type: iceberg.PrimitiveTypes.String},
	)
	props := iceberg.Properties{"write.parquet.row-group-limit": "1000"}
	_, _, err := lh.LoadOrCreateTable(ctx, "t.rows", sch, *iceberg.UnpartitionedSpec, props)
	if err != nil {
		t.Fatal(err)
	}
	const n = 6000
	ids := array.NewInt64Builder(memory.DefaultAllocator)
	ss := array.NewStringBuilder(memory.DefaultAllocator)
	for i := range n {
		ids.Append(int64(i))
		if s, ok := text(i); ok {
			ss.Append(s)
		} else {
			ss.AppendNull()
		}
	}
	asch := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	rec := array.NewRecordBatch(asch, []arrow.Array{ids.NewArray(), ss.NewArray()}, n)
	defer rec.Release()
	tbl, err := lh.Commit(ctx, "t.rows", func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		tx := tbl.NewTransaction()
		if err := tx.AppendTable(ctx, array.NewTableFromRecords(asch, []arrow.RecordBatch{rec}), n, nil); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !filescan.Direct(tasks) {
		t.Fatal("Direct: an appended Parquet file without deletes must be read directly")
	}

	for _, tc := range []struct {
		name string
		keep func(*metadata.RowGroupMetaData) bool
		want []int // the ids expected, in order
	}{
		{name: "all row groups", want: seq(0, n)},
		{
			name: "row groups with an id below 2500",
			keep: func(rg *metadata.RowGroupMetaData) bool {
				cc, err := rg.ColumnChunk(0)
				if err != nil {
					t.Fatal(err)
				}
				st, err := cc.Statistics()
				if err != nil || st == nil {
					t.Fatalf("row group statistics: %v", err)
				}
				return st.(*metadata.Int64Statistics).Min() < 2500
			},
			want: seq(0, 3000), // whole row groups of 1000 rows
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := arrowmem.NewPool(64 << 20)
			var got []int
			for b, err := range filescan.Read(ctx, tbl, tasks, []string{"s", "id"}, filescan.Options{BatchRows: 700, Mem: pool, KeepRowGroup: tc.keep}) {
				if err != nil {
					t.Fatal(err)
				}
				p, err := filescan.Project(b, []string{"id", "s"})
				b.Release()
				if err != nil {
					t.Fatal(err)
				}
				idc, sc := p.Column(0).(*array.Int64), p.Column(1).(*array.String)
				for r := range int(p.NumRows()) {
					id := int(idc.Value(r))
					want, ok := text(id)
					if sc.IsNull(r) == ok || ok && sc.Value(r) != want {
						t.Fatalf("id %d: s = %.20q (null %v), want %.20q (null %v)", id, sc.Value(r), sc.IsNull(r), want, !ok)
					}
					got = append(got, id)
				}
				p.Release()
			}
			if len(got) != len(tc.want) {
				t.Fatalf("read %d rows, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("row %d has id %d, want %d", i, got[i], tc.want[i])
				}
			}
		})
	}

	// A file that is not the one its manifest entry describes (here: an entry one row
	// short) is an error, not a read of whatever the path holds.
	wrong := slices.Clone(tasks)
	wrong[0].File = miscounted{DataFile: tasks[0].File, n: tasks[0].File.Count() - 1}
	var err2 error
	for b, err := range filescan.Read(ctx, tbl, wrong, []string{"id"}, filescan.Options{}) {
		if err != nil {
			err2 = err
			break
		}
		b.Release()
	}
	if err2 == nil || !strings.Contains(err2.Error(), "the file holds 6000 rows, its manifest entry 5999") {
		t.Fatalf("a file of another row count than its manifest entry: error %v", err2)
	}
}

// miscounted is a data file whose manifest entry counts n rows.
type miscounted struct {
	iceberg.DataFile
	n int64
}

func (m miscounted) Count() int64 { return m.n }

func seq(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}
