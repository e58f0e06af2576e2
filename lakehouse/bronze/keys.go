package bronze

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
)

// Kafka record keys and headers (issue 40: the key is part of the Debezium contract; a
// tombstone is nothing but its key).
//
// _source_key is the record key as text: UTF-8 as delivered, other bytes as payloads are
// (BinaryPrefix + base64), NULL for a nil key and for files. _source_headers is the
// headers in record order as a JSON list of {"key": name, "value": text} (a value as the
// key is, null for a nil value), NULL when there are none.

// addKey adds a record's key and headers to the batch.
func (b *batchWriter) addKey(key []byte, headers []Header) {
	if key == nil {
		b.keys.AppendNull()
	} else {
		b.scratch, _ = appendPayload(b.scratch[:0], key)
		b.keys.BinaryBuilder.Append(b.scratch)
	}
	if len(headers) == 0 {
		b.headers.AppendNull()
		return
	}
	type kv struct {
		Key   string  `json:"key"`
		Value *string `json:"value"`
	}
	list := make([]kv, len(headers))
	for i, h := range headers {
		list[i].Key = h.Key
		if h.Value != nil {
			v, _ := appendPayload(nil, h.Value)
			s := string(v)
			list[i].Value = &s
		}
	}
	js, _ := json.Marshal(list) // strings only: cannot fail
	b.headers.BinaryBuilder.Append(js)
}

// addKeyColumns adds _source_key and _source_headers to a Bronze table created before
// they existed (a schema-only commit; older rows read NULL), and returns the table.
func addKeyColumns(ctx context.Context, lh *catalog.Lakehouse, ident string, tbl *table.Table) (*table.Table, error) {
	missing := func(sch *iceberg.Schema) []string {
		var out []string
		for _, c := range []string{ColSourceKey, ColSourceHeaders} {
			if _, ok := sch.FindFieldByName(c); !ok {
				out = append(out, c)
			}
		}
		return out
	}
	if len(missing(tbl.Schema())) == 0 {
		return tbl, nil
	}
	return lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		add := missing(tbl.Schema())
		if len(add) == 0 {
			return nil, nil
		}
		tx := tbl.NewTransaction()
		us := tx.UpdateSchema(true, false)
		for _, c := range add {
			us.AddColumn([]string{c}, iceberg.PrimitiveTypes.String, "", false, nil)
		}
		if err := us.Commit(); err != nil {
			return nil, fmt.Errorf("add %v: %w", add, err)
		}
		return tx.Commit(ctx)
	})
}
