package bronze

// No Kafka broker can run on this machine (no JVM, no container runtime), so franz-go's
// in-process kfake cluster stands in for one. It speaks the Kafka wire protocol over
// loopback, so the code under test goes through the real client: metadata, list
// offsets, fetch sessions, read_committed fetches and offset commits. The crash test's
// child process reaches the parent's kfake cluster over loopback too.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

const kafkaGroup = "goldbridge-bronze"

func newKafka(t *testing.T, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func kafkaSource(brokers []string, topic string) KafkaSource {
	return KafkaSource{
		Name: "shop_events", System: "shop_kafka", Brokers: brokers, Topic: topic, Group: kafkaGroup,
		PollTimeout: 2 * time.Second,
	}
}

// sent is a produced record as Bronze should hold it, keyed by topic:partition:offset.
type sent struct {
	value []byte
	ts    time.Time
}

var kafkaBaseTS = time.Date(2026, 3, 1, 12, 0, 0, 7_000_000, time.UTC)

// produce writes values round-robin over the 3 partitions with distinct millisecond
// timestamps and adds them to want.
func produce(t *testing.T, brokers []string, topic string, values [][]byte, want map[string]sent) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		n := len(want) + i
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(n % 3), Value: v, Timestamp: kafkaBaseTS.Add(time.Duration(n) * time.Second)}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		want[fmt.Sprintf("%s:%d:%d", r.Topic, r.Partition, r.Offset)] = sent{r.Value, r.Timestamp.UTC()}
	}
}

func jsonValues(from, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"n":%d}`, from+i)
	}
	return out
}

type kafkaRow struct {
	payload               []byte
	system, file, batchID string
	sourceTS              time.Time
	sourceTSNull          bool
}

func scanKafka(t *testing.T, lh *catalog.Lakehouse) []kafkaRow {
	t.Helper()
	ctx := context.Background()
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	if tbl.CurrentSnapshot() == nil {
		return nil
	}
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []kafkaRow
	for rec, err := range recs {
		if err != nil {
			t.Fatal(err)
		}
		col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
		str := func(name string, i int) string {
			switch a := col(name).(type) {
			case *array.String:
				return a.Value(i)
			case *array.LargeString:
				return a.Value(i)
			}
			t.Fatalf("column %s has type %T", name, col(name))
			return ""
		}
		ts := col(ColSourceTS).(*array.Timestamp)
		pos := col(ColSourcePos).(*array.Int64)
		for i := range int(rec.NumRows()) {
			// _source_pos is the record's offset, the last part of _source_file.
			file := str(ColFile, i)
			if off := file[strings.LastIndexByte(file, ':')+1:]; pos.IsNull(i) || strconv.FormatInt(pos.Value(i), 10) != off {
				t.Fatalf("%s: _source_pos %d (null %v)", file, pos.Value(i), pos.IsNull(i))
			}
			p, err := DecodePayload(str(ColPayload, i))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, kafkaRow{
				payload: p, system: str(ColSystem, i), file: str(ColFile, i), batchID: str(ColBatchID, i),
				sourceTS: ts.Value(i).ToTime(arrow.Microsecond), sourceTSNull: ts.IsNull(i),
			})
		}
		rec.Release()
	}
	return out
}

// checkRows asserts that Bronze holds exactly the records of want, once each.
func checkRows(t *testing.T, lh *catalog.Lakehouse, want map[string]sent) []kafkaRow {
	t.Helper()
	rows := scanKafka(t, lh)
	seen := map[string]int{}
	for _, r := range rows {
		seen[r.file]++
		w, ok := want[r.file]
		switch {
		case !ok:
			t.Errorf("row for %s was never produced", r.file)
		case !bytes.Equal(r.payload, w.value):
			t.Errorf("%s: payload %q, produced %q", r.file, r.payload, w.value)
		case r.sourceTSNull || !r.sourceTS.Equal(w.ts):
			t.Errorf("%s: _source_ts %v (null %v), record timestamp %v", r.file, r.sourceTS, r.sourceTSNull, w.ts)
		case r.system != "shop_kafka":
			t.Errorf("%s: _source_system %q", r.file, r.system)
		}
	}
	for f, n := range seen {
		if n > 1 {
			t.Errorf("%s landed %d times", f, n)
		}
	}
	for f := range want {
		if seen[f] == 0 {
			t.Errorf("%s was lost", f)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return rows
}

func kafkaAdmin(t *testing.T, brokers []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func endOffsets(t *testing.T, adm *kadm.Client, topic string) map[string]int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[fmt.Sprintf("%s:%d", o.Topic, o.Partition)] = o.Offset })
	return out
}

// groupOffsets returns the offsets committed to kafkaGroup (empty if none).
func groupOffsets(t *testing.T, adm *kadm.Client) map[string]int64 {
	t.Helper()
	resp, err := adm.FetchOffsets(context.Background(), kafkaGroup)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[string]int64{}
	}
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	resp.Each(func(o kadm.OffsetResponse) { out[fmt.Sprintf("%s:%d", o.Topic, o.Partition)] = o.At })
	return out
}

func recordedOffsets(t *testing.T, lh *catalog.Lakehouse, topic string) map[string]int64 {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	offs, err := KafkaOffsets(tbl, topic)
	if err != nil {
		t.Fatal(err)
	}
	return offsetKeys(topic, offs)
}

func currentSnapshot(t *testing.T, lh *catalog.Lakehouse) int64 {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	if s := tbl.CurrentSnapshot(); s != nil {
		return s.SnapshotID
	}
	return 0
}

func TestKafkaIngestExactlyOnce(t *testing.T) {
	ctx := context.Background()
	brokers := newKafka(t, "orders").ListenAddrs()
	adm := kafkaAdmin(t, brokers)
	lh := lakehousetest.Open(t)
	src := kafkaSource(brokers, "orders")
	want := map[string]sent{}

	values := [][]byte{
		[]byte(`{"order_id":"o-1","op":"c"}`),
		[]byte(`{"order_id":"o-1","op":"c"}`), // exact duplicate: kept
		[]byte(`{"order_id":"o-1","op":"c"}`), // and again, on a third partition
		[]byte("caf\xe9 latin-1 bytes"),       // invalid UTF-8: stored losslessly
		{0xff, 0x00, 0xfe},
		nil, // tombstone: lands as an empty payload
		{},  // empty value
		[]byte(BinaryPrefix + "looks encoded"),
		[]byte(`not json`),
	}
	values = append(values, jsonValues(0, 31)...)
	produce(t, brokers, "orders", values, want)

	res, err := IngestKafka(ctx, lh, ident, src, Options{BatchRows: 7})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first run: %d rows in %v", res.Rows, res.Elapsed)
	if res.Rows != 40 || res.SnapshotID == 0 || res.SnapshotID != currentSnapshot(t, lh) {
		t.Fatalf("result = %+v", res)
	}
	rows := checkRows(t, lh, want)
	for _, r := range rows {
		if r.batchID != res.BatchID {
			t.Fatalf("row %s has batch %s, run %s", r.file, r.batchID, res.BatchID)
		}
	}
	ends := endOffsets(t, adm, "orders")
	if !maps.Equal(res.Offsets, ends) || !maps.Equal(recordedOffsets(t, lh, "orders"), ends) {
		t.Fatalf("offsets: result %v, recorded %v, end %v", res.Offsets, recordedOffsets(t, lh, "orders"), ends)
	}
	if g := groupOffsets(t, adm); !maps.Equal(g, ends) {
		t.Fatalf("group offsets %v, want %v", g, ends)
	}

	// Nothing new: nothing read, nothing committed.
	snap := currentSnapshot(t, lh)
	res, err = IngestKafka(ctx, lh, ident, src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 0 || res.SnapshotID != 0 || currentSnapshot(t, lh) != snap || !maps.Equal(res.Offsets, ends) {
		t.Fatalf("idle run = %+v", res)
	}
	t.Logf("idle run: %v", res.Elapsed)

	// M more records: exactly M more rows.
	more := append(jsonValues(100, 10), []byte("\xc3\x28 bad utf8"))
	produce(t, brokers, "orders", more, want)
	res, err = IngestKafka(ctx, lh, ident, src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != int64(len(more)) || res.SnapshotID == 0 {
		t.Fatalf("third run = %+v", res)
	}
	checkRows(t, lh, want)
	ends = endOffsets(t, adm, "orders")
	if !maps.Equal(recordedOffsets(t, lh, "orders"), ends) || !maps.Equal(groupOffsets(t, adm), ends) {
		t.Fatalf("after third run: recorded %v, group %v, end %v", recordedOffsets(t, lh, "orders"), groupOffsets(t, adm), ends)
	}
}

// TestKafkaMaxRecords: a bounded run stops after MaxRecords and the next one continues
// exactly there, partition by partition, with no gap and no overlap.
func TestKafkaMaxRecords(t *testing.T) {
	ctx := context.Background()
	brokers := newKafka(t, "orders").ListenAddrs()
	lh := lakehousetest.Open(t)
	src := kafkaSource(brokers, "orders")
	src.MaxRecords = 10
	want := map[string]sent{}
	produce(t, brokers, "orders", jsonValues(0, 25), want)

	total := int64(0)
	for i, wantRows := range []int64{10, 10, 5, 0} {
		res, err := IngestKafka(ctx, lh, ident, src, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Rows != wantRows || (wantRows == 0) != (res.SnapshotID == 0) {
			t.Fatalf("run %d = %+v, want %d rows", i, res, wantRows)
		}
		total += res.Rows
		// Per partition, Bronze holds offsets 0..next-1, next being the recorded offset.
		byPart := map[string][]int64{}
		rows := scanKafka(t, lh)
		for _, r := range rows {
			i := strings.LastIndexByte(r.file, ':')
			off, _ := strconv.ParseInt(r.file[i+1:], 10, 64)
			byPart[r.file[:i]] = append(byPart[r.file[:i]], off)
		}
		for part, next := range recordedOffsets(t, lh, "orders") {
			offs := byPart[part]
			slices.Sort(offs)
			for j, o := range offs {
				if o != int64(j) {
					t.Fatalf("run %d: %s holds offsets %v (gap or duplicate)", i, part, offs)
				}
			}
			if int64(len(offs)) != next {
				t.Fatalf("run %d: %s holds %d records, recorded next offset %d", i, part, len(offs), next)
			}
		}
		if int64(len(rows)) != total {
			t.Fatalf("run %d: %d rows, want %d", i, len(rows), total)
		}
	}
	checkRows(t, lh, want)
}

// TestKafkaStartLatestAndTwoTopics: "latest" starts at the end seen by the first run and
// keeps meaning that even though the first run reads nothing (its start is committed as
// offsets only); two topics in one table keep separate offsets.
func TestKafkaStartLatestAndTwoTopics(t *testing.T) {
	ctx := context.Background()
	brokers := newKafka(t, "orders", "payments").ListenAddrs()
	adm := kafkaAdmin(t, brokers)
	lh := lakehousetest.Open(t)
	payments := kafkaSource(brokers, "payments")
	payments.StartOffset = StartLatest
	orders := kafkaSource(brokers, "orders")

	skipped := map[string]sent{}
	produce(t, brokers, "payments", jsonValues(0, 5), skipped) // before the first run: never read
	res, err := IngestKafka(ctx, lh, ident, payments, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 0 || res.SnapshotID == 0 || !maps.Equal(res.Offsets, endOffsets(t, adm, "payments")) {
		t.Fatalf("first latest run = %+v (want the start positions committed)", res)
	}

	wantOrders := map[string]sent{}
	produce(t, brokers, "orders", jsonValues(0, 4), wantOrders)
	res, err = IngestKafka(ctx, lh, ident, orders, Options{})
	if err != nil || res.Rows != 4 {
		t.Fatalf("orders run = %+v, %v", res, err)
	}

	// Offsets for payments are found in an older snapshot than the newest (orders) one.
	wantPayments := maps.Clone(skipped)
	produce(t, brokers, "payments", jsonValues(50, 3), wantPayments)
	for k := range skipped {
		delete(wantPayments, k)
	}
	res, err = IngestKafka(ctx, lh, ident, payments, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 3 {
		t.Fatalf("second payments run = %+v, want the 3 records produced after the first run", res)
	}
	all := maps.Clone(wantOrders)
	maps.Copy(all, wantPayments)
	checkRows(t, lh, all)
	if !maps.Equal(recordedOffsets(t, lh, "orders"), endOffsets(t, adm, "orders")) ||
		!maps.Equal(recordedOffsets(t, lh, "payments"), endOffsets(t, adm, "payments")) {
		t.Fatal("recorded offsets differ from end offsets")
	}
	res, err = IngestKafka(ctx, lh, ident, payments, Options{})
	if err != nil || res.SnapshotID != 0 {
		t.Fatalf("idle latest run = %+v, %v", res, err)
	}
}

// TestKafkaTransactions: records of aborted transactions never land (read_committed), and
// a partition ending in a transaction marker counts as caught up, so the run ends at once
// instead of waiting out PollTimeout.
func TestKafkaTransactions(t *testing.T) {
	ctx := context.Background()
	brokers := newKafka(t, "orders").ListenAddrs()
	adm := kafkaAdmin(t, brokers)
	lh := lakehousetest.Open(t)
	src := kafkaSource(brokers, "orders")
	src.PollTimeout = 5 * time.Second

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID("bronze-test"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	want := map[string]sent{}
	txn := func(commit bool, values ...string) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i, v := range values {
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: int32(i % 3), Value: []byte(v), Timestamp: kafkaBaseTS})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
		if commit {
			for _, r := range recs {
				want[fmt.Sprintf("%s:%d:%d", r.Topic, r.Partition, r.Offset)] = sent{r.Value, kafkaBaseTS}
			}
		}
	}
	txn(true, "c1", "c2", "c3", "c4")
	txn(false, "a1", "a2", "a3")

	res, err := IngestKafka(ctx, lh, ident, src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 4 || res.Elapsed >= src.PollTimeout {
		t.Fatalf("result = %+v (rows should be the 4 committed records, read without waiting for the poll timeout)", res)
	}
	checkRows(t, lh, want)
	if ends := endOffsets(t, adm, "orders"); !maps.Equal(res.Offsets, ends) {
		t.Fatalf("offsets %v, end offsets %v (markers included)", res.Offsets, ends)
	}
}

// TestKafkaConcurrentWriter: when another run commits the same topic between this run's
// write and its commit, this run aborts instead of committing duplicates.
func TestKafkaConcurrentWriter(t *testing.T) {
	ctx := context.Background()
	brokers := newKafka(t, "orders").ListenAddrs()
	lh := lakehousetest.Open(t)
	src := kafkaSource(brokers, "orders")
	want := map[string]sent{}
	produce(t, brokers, "orders", jsonValues(0, 12), want)

	var inner KafkaResult
	var innerErr error
	_, err := IngestKafka(ctx, lh, ident, src, Options{afterWrite: func() {
		inner, innerErr = IngestKafka(ctx, lh, ident, src, Options{})
	}})
	if innerErr != nil || inner.Rows != 12 {
		t.Fatalf("inner run = %+v, %v", inner, innerErr)
	}
	if !errors.Is(err, ErrOffsetsMoved) {
		t.Fatalf("outer run error = %v, want ErrOffsetsMoved", err)
	}
	t.Logf("outer run refused: %v", err)
	checkRows(t, lh, want)
}

// TestKafkaCrashBeforeCommit kills a real ingesting process with SIGKILL after its data
// files are written and before the Iceberg commit, then ingests again: nothing lost,
// nothing doubled, and the killed run committed no offsets to Kafka.
func TestKafkaCrashBeforeCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	ctx := context.Background()
	brokers := newKafka(t, "orders").ListenAddrs()
	adm := kafkaAdmin(t, brokers)
	state := t.TempDir()
	want := map[string]sent{}
	produce(t, brokers, "orders", append(jsonValues(0, 2999), []byte("\xff\xfe raw")), want)

	cmd := exec.Command(os.Args[0], "-test.run=^TestKafkaCrashChild$")
	cmd.Env = append(os.Environ(), "BRONZE_KAFKA_CRASH_STATE="+state, "BRONZE_KAFKA_CRASH_BROKERS="+strings.Join(brokers, ","))
	out, err := cmd.CombinedOutput()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if err == nil || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child should die by SIGKILL, got %v\n%s", err, out)
	}
	parquetFiles := 0
	filepath.Walk(state, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".parquet") {
			parquetFiles++
		}
		return nil
	})
	if parquetFiles == 0 {
		t.Fatal("the child died before writing data files: the test would prove nothing")
	}
	t.Logf("child killed by SIGKILL after writing %d parquet files", parquetFiles)
	if g := groupOffsets(t, adm); len(g) != 0 {
		t.Fatalf("the killed run committed offsets to Kafka before Iceberg: %v", g)
	}

	lh := lakehousetest.OpenDir(t, state)
	if rows := scanKafka(t, lh); len(rows) != 0 {
		t.Fatalf("the killed run's %d rows are visible", len(rows))
	}
	res, err := IngestKafka(ctx, lh, ident, kafkaSource(brokers, "orders"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows != 3000 {
		t.Fatalf("rerun ingested %d rows, want 3000", res.Rows)
	}
	checkRows(t, lh, want)
	ends := endOffsets(t, adm, "orders")
	if !maps.Equal(recordedOffsets(t, lh, "orders"), ends) || !maps.Equal(groupOffsets(t, adm), ends) {
		t.Fatalf("after rerun: recorded %v, group %v, end %v", recordedOffsets(t, lh, "orders"), groupOffsets(t, adm), ends)
	}
}

// TestKafkaCrashChild is the process killed by TestKafkaCrashBeforeCommit.
func TestKafkaCrashChild(t *testing.T) {
	state := os.Getenv("BRONZE_KAFKA_CRASH_STATE")
	if state == "" {
		t.Skip("helper process of TestKafkaCrashBeforeCommit")
	}
	lh := lakehousetest.OpenDir(t, state)
	src := kafkaSource(strings.Split(os.Getenv("BRONZE_KAFKA_CRASH_BROKERS"), ","), "orders")
	_, err := IngestKafka(context.Background(), lh, ident, src, Options{
		BatchRows:  500,
		afterWrite: func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) },
	})
	t.Fatalf("not killed: %v", err)
}

func TestKafkaOffsetsParse(t *testing.T) {
	for _, tc := range []struct {
		raw     string
		want    map[int32]int64
		wantErr bool
	}{
		{`{"orders:0":5,"orders:2":7,"payments:0":9}`, map[int32]int64{0: 5, 2: 7}, false},
		{`{"orders.v2:1":3}`, map[int32]int64{}, false},
		{`{}`, map[int32]int64{}, false},
		{`{"orders":1}`, nil, true},
		{`{"orders:x":1}`, nil, true},
		{`{"orders:0":-1}`, nil, true},
		{`not json`, nil, true},
	} {
		got, err := parseOffsets(tc.raw, "orders")
		if (err != nil) != tc.wantErr || !tc.wantErr && !maps.Equal(got, tc.want) {
			t.Errorf("parseOffsets(%s) = %v, %v; want %v (error %v)", tc.raw, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestKafkaSourceValidate(t *testing.T) {
	ok := KafkaSource{Brokers: []string{"localhost:9092"}, Topic: "orders"}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*KafkaSource){
		"no brokers":    func(s *KafkaSource) { s.Brokers = nil },
		"no topic":      func(s *KafkaSource) { s.Topic = "" },
		"bad start":     func(s *KafkaSource) { s.StartOffset = "beginning" },
		"negative max":  func(s *KafkaSource) { s.MaxRecords = -1 },
		"negative poll": func(s *KafkaSource) { s.PollTimeout = -time.Second },
	} {
		s := ok
		mut(&s)
		if err := s.validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestKafkaOversizedRecord is issue 17's "every input has bounds" for Kafka: a value
// longer than MaxRecordBytes lands as the oversized marker (its length and first bytes),
// as a landing file's line does, and the records around it land whole.
func TestKafkaOversizedRecord(t *testing.T) {
	ctx := context.Background()
	brokers := newKafka(t, "orders").ListenAddrs()
	lh := lakehousetest.Open(t)
	big := append([]byte(`{"n":"`), bytes.Repeat([]byte("x"), MaxRecordBytes)...)
	big = append(big, `"}`...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(32<<20), kgo.MaxBufferedBytes(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	values := [][]byte{[]byte(`{"n":0}`), big, []byte(`{"n":2}`)}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := IngestKafka(ctx, lh, ident, kafkaSource(brokers, "orders"), Options{}); err != nil {
		t.Fatal(err)
	}
	rows := scanKafka(t, lh)
	got := map[string]string{}
	for _, r := range rows {
		got[r.file] = string(r.payload)
	}
	wantBig := string(oversizedPayload(int64(len(big)), big))
	if len(rows) != 3 || got["orders:0:0"] != `{"n":0}` || got["orders:0:1"] != wantBig || got["orders:0:2"] != `{"n":2}` {
		t.Fatalf("rows %d; offset 1 holds %d bytes (want the %d-byte marker), others %q %q", len(rows), len(got["orders:0:1"]), len(wantBig), got["orders:0:0"], got["orders:0:2"])
	}
	if !strings.HasPrefix(wantBig, OversizedPrefix+strconv.Itoa(len(big))+":") {
		t.Fatalf("marker %q", wantBig[:40])
	}
}
