package silver

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"

	"goldbridge/demo"
	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/filescan"
	"goldbridge/lakehouse/lakehousetest"
)

// The direct Bronze reader must yield exactly the rows iceberg-go's scan yields, also
// when the planner splits a file into several tasks (here: row groups of 500 rows and
// a 16 KB split target, so one file becomes many split tasks).
func TestDirectBronzeReadEqualsScan(t *testing.T) {
	ctx := context.Background()
	lh := lakehousetest.Open(t)
	props := maps.Clone(bronze.TableProperties(catalog.DefaultCodec()))
	props["write.parquet.row-group-limit"] = "500"
	props["read.split.target-size"] = "16384"
	if _, _, err := lh.LoadOrCreateTable(ctx, "bronze.orders", bronze.Schema(), bronze.PartitionSpec(), props); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := demo.Generate(ctx, demo.Options{OutDir: dir, Events: 12000, Seed: 3, Files: 2, End: time.Date(2026, 6, 30, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	ingest(t, lh, dir)
	bt, err := lh.LoadTable(ctx, "bronze.orders")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := bt.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	split := 0
	for _, task := range tasks {
		if task.Start != 0 {
			split++
		}
	}
	if split == 0 || !filescan.Direct(tasks) {
		t.Fatalf("want split tasks that are directly readable: %d tasks, %d split", len(tasks), split)
	}
	collect := func(recs func(func(arrow.RecordBatch, error) bool)) map[string]string {
		rows := map[string]string{}
		for rec, err := range recs {
			if err != nil {
				t.Fatal(err)
			}
			b := newBronzeBatch(rec)
			for i := range int(rec.NumRows()) {
				id := b.events.Value(i)
				if _, dup := rows[id]; dup {
					t.Fatalf("event %s read twice", id)
				}
				rows[id] = b.payloads.Value(i) + "|" + b.files.Value(i) + "|" + b.ingest.Value(i).ToTime(arrow.Microsecond).String()
			}
			rec.Release()
		}
		return rows
	}
	direct := collect(readBronzeFiles(ctx, bt, tasks, bronzeFields, memory.DefaultAllocator))
	_, recs, err := bt.Scan(table.WithSelectedFields(bronzeFields...)).ReadTasks(ctx, tasks)
	if err != nil {
		t.Fatal(err)
	}
	scanned := collect(recs)
	if len(direct) != 12000 || !maps.Equal(direct, scanned) {
		t.Fatalf("direct read: %d rows, scan: %d rows, equal %v", len(direct), len(scanned), maps.Equal(direct, scanned))
	}
}
