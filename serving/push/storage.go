package push

import (
	"context"
	"fmt"
	"goldbridge/serving/hot"

	"goldbridge/serving"
	"goldbridge/serving/chconn"
)

// Storage is what a served table holds on disk (serving/hot).
type Storage = hot.Storage

// TableStorage reads the Storage of the mart's served table.
func TableStorage(ctx context.Context, c *chconn.Client, m *serving.Mart) (Storage, error) {
	rows, err := c.Conn().Query(ctx, `SELECT active, count(), sum(bytes_on_disk) FROM system.parts
		WHERE database = ? AND (table = ? OR startsWith(table, ?)) AND (NOT active OR table = ?) GROUP BY active`,
		m.Database, m.Table, m.Table+"__", m.Table)
	if err != nil {
		return Storage{}, fmt.Errorf("parts of %s: %w", m.Table, err)
	}
	defer rows.Close()
	var s Storage
	for rows.Next() {
		var active uint8
		var n, bytes uint64
		if err := rows.Scan(&active, &n, &bytes); err != nil {
			return Storage{}, fmt.Errorf("parts of %s: %w", m.Table, err)
		}
		if active == 1 {
			s.Parts, s.Bytes = int64(n), int64(bytes)
		} else {
			s.InactiveParts, s.InactiveBytes = int64(n), int64(bytes)
		}
	}
	if err := rows.Err(); err != nil {
		return Storage{}, fmt.Errorf("parts of %s: %w", m.Table, err)
	}
	return s, nil
}
