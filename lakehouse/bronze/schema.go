// Package bronze lands raw records append-only in the Iceberg table bronze.<entity>, with
// audit columns, exactly once per source unit (file, Kafka offset range).
//
// Nothing is filtered, fixed, deduplicated or overwritten here: Bronze holds exactly what
// the sources delivered and is what Silver and Gold can always be replayed from.
package bronze

import (
	"context"
	"fmt"
	"maps"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
)

// Column names of a Bronze table.
const (
	ColPayload  = "raw_payload"
	ColIngestTS = "_ingest_ts"
	ColSystem   = "_source_system"
	ColFile     = "_source_file"
	ColEventID  = "_event_id"
	ColBatchID  = "_batch_id"
	ColSourceTS = "_source_ts"
	// ColSourcePos is where the record sits in its source unit: the byte offset of its
	// first byte in a JSON Lines or CSV file (of the decompressed bytes, a byte order mark
	// counted), the row index of a Parquet row, the offset of a Kafka record. With
	// _source_file it names one delivered record: reading the same file again yields the
	// same positions (docs/bronze.md, "Where a record came from"). Null in rows ingested
	// before it existed.
	ColSourcePos = "_source_pos"
	// The Kafka record's key and headers (null for files); see docs/bronze.md.
	ColSourceKey     = "_source_key"
	ColSourceHeaders = "_source_headers"
)

// Snapshot summary keys written with every Bronze commit.
const (
	PropBatchID = "goldbridge.batch-id"
	PropSource  = "goldbridge.source"
	PropFiles   = "goldbridge.files"   // JSON list of FileRecord ingested by this commit
	PropFileLog = "goldbridge.filelog" // JSON list of every FileRecord so far (written when history is expired)
	// PropRedated lists, as FileRecord with their new mtime, the landing files ingested
	// before whose mtime changed but whose content did not (checksum equal): carried by
	// the next commit, so that later runs take the mtime again instead of reading them.
	PropRedated = "goldbridge.redated"
	PropOffsets = "goldbridge.offsets" // JSON map topic/partition -> next offset (Kafka)
	PropRows    = "goldbridge.rows"
	PropBlank   = "goldbridge.blank-lines"
)

// Schema is the Bronze table schema: the payload as delivered plus audit columns.
func Schema() *iceberg.Schema {
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: ColPayload, Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 2, Name: ColIngestTS, Type: iceberg.PrimitiveTypes.TimestampTz, Required: true},
		iceberg.NestedField{ID: 3, Name: ColSystem, Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 4, Name: ColFile, Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 5, Name: ColEventID, Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 6, Name: ColBatchID, Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: 7, Name: ColSourceTS, Type: iceberg.PrimitiveTypes.TimestampTz, Required: false},
		iceberg.NestedField{ID: 8, Name: ColSourceKey, Type: iceberg.PrimitiveTypes.String, Required: false},
		iceberg.NestedField{ID: 9, Name: ColSourceHeaders, Type: iceberg.PrimitiveTypes.String, Required: false},
		iceberg.NestedField{ID: 10, Name: ColSourcePos, Type: iceberg.PrimitiveTypes.Int64, Required: false},
	)
}

// PartitionSpec partitions Bronze by day(_ingest_ts).
func PartitionSpec() iceberg.PartitionSpec {
	return iceberg.NewPartitionSpec(iceberg.PartitionField{
		SourceIDs: []int{2}, FieldID: 1000, Name: "_ingest_day", Transform: iceberg.DayTransform{},
	})
}

// addSourcePos adds the _source_pos column to a Bronze table created before it existed,
// in a schema-only commit: no snapshot, so the ingested files, the Kafka offsets and every
// watermark stay as they are; the rows already there read it as null. It returns the
// table as committed.
func addSourcePos(ctx context.Context, lh *catalog.Lakehouse, ident string, tbl *table.Table) (*table.Table, error) {
	if _, ok := tbl.Schema().FindFieldByName(ColSourcePos); ok {
		return tbl, nil
	}
	return lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		if _, ok := tbl.Schema().FindFieldByName(ColSourcePos); ok {
			return nil, nil // added meanwhile by another run
		}
		tx := tbl.NewTransaction()
		us := tx.UpdateSchema(true, false)
		us.AddColumn([]string{ColSourcePos}, iceberg.PrimitiveTypes.Int64, "", false, nil)
		if err := us.Commit(); err != nil {
			return nil, fmt.Errorf("add column %s: %w", ColSourcePos, err)
		}
		key := "write.parquet.dict-encoding-enabled.column." + ColSourcePos
		if err := tx.SetProperties(iceberg.Properties{key: TableProperties(catalog.DefaultCodec())[key]}); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
}

// TableProperties are set when a Bronze table is created: Parquet compressed with codec
// (lakehouse.compression.bronze), format v2.
func TableProperties(codec catalog.Codec) iceberg.Properties {
	props := iceberg.Properties{
		"format-version":       "2",
		"write.format.default": "parquet",
		// The writer buffers a whole row group in memory: 128k rows or 16 MB written
		// keeps ingestion memory constant whatever the file size.
		"write.parquet.row-group-limit":      "131072",
		"write.parquet.row-group-size-bytes": "16777216",
		// No min/max of payloads in manifests: they would not prune anything and would
		// copy personal data into metadata that forget cannot reach.
		"write.metadata.metrics.column.raw_payload": "counts",
		// Payloads and event ids are (nearly) all distinct: a dictionary would only be
		// built and thrown away (hashing every value) before Parquet falls back to plain.
		"write.parquet.dict-encoding-enabled.column.raw_payload": "false",
		"write.parquet.dict-encoding-enabled.column._event_id":   "false",
		"write.parquet.dict-encoding-enabled.column._source_pos": "false",
		// The source, file and batch repeat one value over long runs: plain pages of it
		// compress to the same size under zstd, and the writer no longer hashes each of
		// the 10M values into a dictionary (ingest 16.8-17.2 -> 15.7-16.0 s of CPU at 10M).
		"write.parquet.dict-encoding-enabled.column._source_file":   "false",
		"write.parquet.dict-encoding-enabled.column._batch_id":      "false",
		"write.parquet.dict-encoding-enabled.column._source_system": "false",
	}
	maps.Copy(props, codec.Properties())
	return props
}

// arrowSchema is the Arrow form of Schema, as written.
var arrowSchema = arrow.NewSchema([]arrow.Field{
	{Name: ColPayload, Type: arrow.BinaryTypes.String},
	{Name: ColIngestTS, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
	{Name: ColSystem, Type: arrow.BinaryTypes.String},
	{Name: ColFile, Type: arrow.BinaryTypes.String},
	{Name: ColEventID, Type: arrow.BinaryTypes.String},
	{Name: ColBatchID, Type: arrow.BinaryTypes.String},
	{Name: ColSourceTS, Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: ColSourceKey, Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: ColSourceHeaders, Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: ColSourcePos, Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)
