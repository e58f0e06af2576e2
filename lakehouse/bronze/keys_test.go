package bronze

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// TestKafkaKeysAndHeaders produces Debezium-like records on kfake (a key, headers, a
// tombstone with its key, a binary key, a record without key) into a Bronze table created
// with the schema before _source_key and _source_headers existed: the columns are added,
// and each row holds its record's key and headers as docs/bronze.md describes; rows of a
// file source read NULL.
func TestKafkaKeysAndHeaders(t *testing.T) {
	ctx := context.Background()
	c := newKafka(t, "shop.public.customers")
	brokers := c.ListenAddrs()
	lh := lakehousetest.Open(t)
	// A Bronze table as goldbridge created it before: seven columns.
	old := iceberg.NewSchema(0, Schema().Fields()[:7]...)
	if _, _, err := lh.LoadOrCreateTable(ctx, ident, old, PartitionSpec(), TableProperties(catalog.DefaultCodec())); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := []*kgo.Record{
		{Key: []byte(`{"id":7}`), Value: []byte(`{"before":null,"after":{"id":7},"source":{"lsn":1},"op":"c"}`),
			Headers: []kgo.RecordHeader{{Key: "__debezium.context.connectorName", Value: []byte("shop")}, {Key: "trace", Value: []byte{0xff, 0x01}}, {Key: "empty"}}},
		{Key: []byte(`{"id":7}`), Value: []byte(`{"before":{"id":7},"after":null,"source":{"lsn":2},"op":"d"}`)},
		{Key: []byte(`{"id":7}`), Value: nil}, // the tombstone
		{Key: []byte{0x00, 0xfe}, Value: []byte(`{}`)},
		{Value: []byte(`{"no":"key"}`)},
	}
	for _, r := range recs {
		r.Topic, r.Partition = "shop.public.customers", 0
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	src := kafkaSource(brokers, "shop.public.customers")
	src.StartOffset = "earliest"
	if _, err := IngestKafka(ctx, lh, ident, src, Options{}); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"shop.public.customers:0:0": {`{"id":7}`, `[{"key":"__debezium.context.connectorName","value":"shop"},{"key":"trace","value":"\u0000b64:/wE="},{"key":"empty","value":null}]`},
		"shop.public.customers:0:1": {`{"id":7}`, "NULL"},
		"shop.public.customers:0:2": {`{"id":7}`, "NULL"},
		"shop.public.customers:0:3": {"\x00b64:AP4=", "NULL"},
		"shop.public.customers:0:4": {"NULL", "NULL"},
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte("{\"n\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := IngestFiles(ctx, lh, ident, []FileSource{{Name: "landing", System: "shop_file", Dir: dir}}, Options{}); err != nil {
		t.Fatal(err)
	}
	want[filepath.Join(dir, "a.jsonl")] = [2]string{"NULL", "NULL"}
	got := keyColumns(t, lh)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("keys and headers:\n got  %q\n want %q", got, want)
	}
	if v := got["shop.public.customers:0:2"]; v[0] != `{"id":7}` {
		t.Errorf("the tombstone's key: %q", v)
	}
}

// keyColumns reads _source_file -> _source_key, _source_headers ("NULL" for null).
func keyColumns(t *testing.T, lh *catalog.Lakehouse) map[string][2]string {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	_, recs, err := tbl.Scan().ToArrowRecords(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]string{}
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) *array.String { return rec.Column(rec.Schema().FieldIndices(name)[0]).(*array.String) }
		val := func(a *array.String, i int) string {
			if a.IsNull(i) {
				return "NULL"
			}
			return a.Value(i)
		}
		for i := range int(rec.NumRows()) {
			out[col(ColFile).Value(i)] = [2]string{val(col(ColSourceKey), i), val(col(ColSourceHeaders), i)}
		}
		rec.Release()
	}
	return out
}
