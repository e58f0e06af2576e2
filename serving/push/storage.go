package push

import (
	"context"
	"fmt"
	"goldbridge/serving/hot"

	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/ddl"
)

// Storage is what a served table holds on disk (serving/hot).
type Storage = hot.Storage

// TableStorage reads the Storage of the mart's served tables: <t> and its rolling windows
// (Parts, Bytes), its ids dictionary, and what any of them or a transient <t>__* left.
func TableStorage(ctx context.Context, c *chconn.Client, m *serving.Mart) (Storage, error) {
	ids, win := m.Table+ddl.IdsSuffix, m.Table+ddl.WindowsSuffix
	rows, err := c.Conn().Query(ctx, `SELECT active, table = ? AS dict, count(), sum(rows), sum(bytes_on_disk) FROM system.parts
		WHERE database = ? AND (table IN (?, ?) OR startsWith(table, ?)) AND (NOT active OR table IN (?, ?, ?)) GROUP BY active, dict`,
		ids, m.Database, m.Table, win, m.Table+"__", m.Table, ids, win)
	if err != nil {
		return Storage{}, fmt.Errorf("parts of %s: %w", m.Table, err)
	}
	defer rows.Close()
	var s Storage
	for rows.Next() {
		var active, dict uint8
		var n, keys, bytes uint64
		if err := rows.Scan(&active, &dict, &n, &keys, &bytes); err != nil {
			return Storage{}, fmt.Errorf("parts of %s: %w", m.Table, err)
		}
		switch {
		case active == 0:
			s.InactiveParts += int64(n)
			s.InactiveBytes += int64(bytes)
		case dict == 1:
			s.DictionaryKeys, s.DictionaryBytes = int64(keys), int64(bytes)
		default:
			s.Parts, s.Bytes = int64(n), int64(bytes)
		}
	}
	if err := rows.Err(); err != nil {
		return Storage{}, fmt.Errorf("parts of %s: %w", m.Table, err)
	}
	return s, nil
}
