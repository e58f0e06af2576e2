package forget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
)

// AuditTable is the append-only Iceberg table of finished forgets: one row per request,
// never the value (only its SHA-256). No goldbridge operation rewrites or expires it, so
// every record stays readable in its current snapshot.
const AuditTable = "audit.forget_log"

// Record is one row of AuditTable.
type Record struct {
	Time           time.Time
	Entity         string
	Field          string
	ValueSHA256    string // bronze.ValueHash of the value
	BronzeSnapshot int64
	// Rows and Snapshots, per table: the subject's rows removed (-1: not counted) and
	// the snapshots expired.
	Rows      map[string]int64
	Snapshots map[string]int
	Marts     []string // marts recomputed (and pushed again by the command)
	Operator  string   // who ran it (OS user)
	Host      string
}

func auditSchema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "forgotten_at", Type: iceberg.PrimitiveTypes.TimestampTz, Required: true},
		iceberg.NestedField{ID: 2, Name: "entity", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 3, Name: "field", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 4, Name: "value_sha256", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 5, Name: "bronze_snapshot_id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: 6, Name: "rows_removed", Type: iceberg.PrimitiveTypes.String, Required: true},      // JSON {table: rows}
		iceberg.NestedField{ID: 7, Name: "snapshots_expired", Type: iceberg.PrimitiveTypes.String, Required: true}, // JSON {table: n}
		iceberg.NestedField{ID: 8, Name: "marts", Type: iceberg.PrimitiveTypes.String, Required: true},             // JSON [mart]
		iceberg.NestedField{ID: 9, Name: "operator", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 10, Name: "host", Type: iceberg.PrimitiveTypes.String, Required: true},
	)
}

var auditArrow = arrow.NewSchema([]arrow.Field{
	{Name: "forgotten_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: "entity", Type: arrow.BinaryTypes.String},
	{Name: "field", Type: arrow.BinaryTypes.String},
	{Name: "value_sha256", Type: arrow.BinaryTypes.String},
	{Name: "bronze_snapshot_id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "rows_removed", Type: arrow.BinaryTypes.String},
	{Name: "snapshots_expired", Type: arrow.BinaryTypes.String},
	{Name: "marts", Type: arrow.BinaryTypes.String},
	{Name: "operator", Type: arrow.BinaryTypes.String},
	{Name: "host", Type: arrow.BinaryTypes.String},
}, nil)

// appendRecord appends rec to AuditTable (created on first use).
func appendRecord(ctx context.Context, lh *catalog.Lakehouse, rec Record) error {
	tbl, _, err := lh.LoadOrCreateTable(ctx, AuditTable, auditSchema(), *iceberg.UnpartitionedSpec, iceberg.Properties{})
	if err != nil {
		return fmt.Errorf("audit table: %w", err)
	}
	rows, _ := json.Marshal(rec.Rows)
	snaps, _ := json.Marshal(rec.Snapshots)
	marts, _ := json.Marshal(append([]string{}, rec.Marts...))
	b := array.NewRecordBuilder(memory.DefaultAllocator, auditArrow)
	defer b.Release()
	f := b.Fields()
	f[0].(*array.TimestampBuilder).Append(arrow.Timestamp(rec.Time.UTC().UnixMicro()))
	f[1].(*array.StringBuilder).Append(rec.Entity)
	f[2].(*array.StringBuilder).Append(rec.Field)
	f[3].(*array.StringBuilder).Append(rec.ValueSHA256)
	f[4].(*array.Int64Builder).Append(rec.BronzeSnapshot)
	f[5].(*array.StringBuilder).Append(string(rows))
	f[6].(*array.StringBuilder).Append(string(snaps))
	f[7].(*array.StringBuilder).Append(string(marts))
	f[8].(*array.StringBuilder).Append(rec.Operator)
	f[9].(*array.StringBuilder).Append(rec.Host)
	batch := b.NewRecordBatch()
	defer batch.Release()
	// Written once; a conflict retries only the commit of the file.
	one := func(yield func(arrow.RecordBatch, error) bool) { yield(batch, nil) }
	files, err := catalog.WriteDataFiles(ctx, tbl, auditArrow, one)
	if err != nil {
		return fmt.Errorf("write %s: %w", AuditTable, err)
	}
	_, err = lh.Commit(ctx, AuditTable, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		tx := tbl.NewTransaction()
		if err := tx.AddDataFiles(ctx, files, iceberg.Properties{"goldbridge.forget.audit": "true"}); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return fmt.Errorf("append to %s: %w", AuditTable, err)
	}
	return nil
}

// Log returns every record of AuditTable, oldest first (none when it does not exist).
func Log(ctx context.Context, lh *catalog.Lakehouse) ([]Record, error) {
	return readLog(ctx, lh, iceberg.AlwaysTrue{})
}

// recorded reports whether AuditTable has a record of req for the Bronze snapshot f.
func recorded(ctx context.Context, lh *catalog.Lakehouse, req bronze.ForgetRequest, f int64) (bool, error) {
	recs, err := readLog(ctx, lh, iceberg.NewAnd(
		iceberg.EqualTo(iceberg.Reference("value_sha256"), bronze.ValueHash(req.Value)),
		iceberg.EqualTo(iceberg.Reference("bronze_snapshot_id"), f)))
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(recs, func(r Record) bool { return r.Field == req.Field }), nil
}

// recordedAny reports whether AuditTable has any record of req.
func recordedAny(ctx context.Context, lh *catalog.Lakehouse, req bronze.ForgetRequest) (bool, error) {
	recs, err := readLog(ctx, lh, iceberg.EqualTo(iceberg.Reference("value_sha256"), bronze.ValueHash(req.Value)))
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(recs, func(r Record) bool { return r.Field == req.Field }), nil
}

func readLog(ctx context.Context, lh *catalog.Lakehouse, filter iceberg.BooleanExpression) ([]Record, error) {
	tbl, err := lh.LoadTable(ctx, AuditTable)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if tbl.CurrentSnapshot() == nil {
		return nil, nil
	}
	_, recs, err := tbl.Scan(table.WithRowFilter(filter)).ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", AuditTable, err)
	}
	var out []Record
	for batch, err := range recs {
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", AuditTable, err)
		}
		col := func(name string) arrow.Array { return batch.Column(batch.Schema().FieldIndices(name)[0]) }
		str := func(name string, i int) string { return col(name).(*array.String).Value(i) }
		for i := range int(batch.NumRows()) {
			r := Record{
				Time:           time.UnixMicro(int64(col("forgotten_at").(*array.Timestamp).Value(i))).UTC(),
				Entity:         str("entity", i),
				Field:          str("field", i),
				ValueSHA256:    str("value_sha256", i),
				BronzeSnapshot: col("bronze_snapshot_id").(*array.Int64).Value(i),
				Operator:       str("operator", i),
				Host:           str("host", i),
			}
			if err := errors.Join(json.Unmarshal([]byte(str("rows_removed", i)), &r.Rows),
				json.Unmarshal([]byte(str("snapshots_expired", i)), &r.Snapshots),
				json.Unmarshal([]byte(str("marts", i)), &r.Marts)); err != nil {
				batch.Release()
				return nil, fmt.Errorf("read %s: record of %s: %w", AuditTable, r.Time.Format(time.RFC3339), err)
			}
			out = append(out, r)
		}
		batch.Release()
	}
	slices.SortStableFunc(out, func(a, b Record) int { return a.Time.Compare(b.Time) })
	return out, nil
}

// record builds the audit record of a finished Run.
func (res *Result) record(t Target, req bronze.ForgetRequest) Record {
	rec := Record{
		Time: time.Now().UTC(), Entity: t.Entity, Field: req.Field, ValueSHA256: bronze.ValueHash(req.Value),
		BronzeSnapshot: res.BronzeSnapshot, Rows: map[string]int64{}, Snapshots: map[string]int{},
		Marts: res.Marts, Operator: t.Operator, Host: t.Host,
	}
	for _, tr := range res.Tables {
		if tr.Layer != LayerGold {
			rec.Rows[tr.Table] = tr.Rows
		}
		rec.Snapshots[tr.Table] = tr.Snapshots
	}
	return rec
}

// String renders a record on one line.
func (r Record) String() string {
	rows, _ := json.Marshal(r.Rows)
	snaps, _ := json.Marshal(r.Snapshots)
	return fmt.Sprintf("%s %s %s sha256:%s bronze-snapshot %s rows %s snapshots-expired %s marts %v by %s@%s",
		r.Time.Format(time.RFC3339), r.Entity, r.Field, r.ValueSHA256, strconv.FormatInt(r.BronzeSnapshot, 10), rows, snaps, r.Marts, r.Operator, r.Host)
}
