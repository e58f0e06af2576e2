package push

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/ddl"
	"goldbridge/serving/hot"
)

// The sync table: what was pushed of each partition, read back to plan the next push.

// Partition, Result and State are the hot tier's terms (serving/hot).
type (
	Partition = hot.Partition
	Result    = hot.Result
	State     = hot.State
)

// RecordState writes a sync state row for mart m.
func RecordState(ctx context.Context, c *chconn.Client, m *serving.Mart, s State) error {
	return RecordStates(ctx, c, m, []State{s})
}

// RecordStates writes sync state rows for mart m in one insert.
func RecordStates(ctx context.Context, c *chconn.Client, m *serving.Mart, states []State) error {
	if len(states) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "INSERT INTO %s.%s (mart, partition, gold_snapshot_id, rows, checksum, deleted, pushed_at) VALUES",
		serving.Q(m.Database), serving.Q(ddl.SyncTable))
	for i, s := range states {
		del := 0
		if s.Deleted {
			del = 1
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, " (%s, %s, %d, %d, %s, %d, fromUnixTimestamp64Micro(%d, 'UTC'))",
			serving.QS(m.Name), serving.QS(s.Partition), s.SnapshotID, s.Rows, serving.QS(s.Checksum), del, s.PushedAt.UnixMicro())
	}
	return c.Conn().Exec(ctx, b.String())
}

// States reads the current sync state of mart m by partition (deleted ones omitted).
func States(ctx context.Context, c *chconn.Client, m *serving.Mart) (map[string]State, error) {
	q := fmt.Sprintf("SELECT partition, gold_snapshot_id, rows, checksum, deleted, pushed_at FROM %s.%s FINAL WHERE mart = ?",
		serving.Q(m.Database), serving.Q(ddl.SyncTable))
	rows, err := c.Conn().Query(ctx, q, m.Name)
	if err != nil {
		return nil, fmt.Errorf("sync state %s: %w", m.Name, err)
	}
	defer rows.Close()
	out := map[string]State{}
	for rows.Next() {
		var s State
		var del uint8
		if err := rows.Scan(&s.Partition, &s.SnapshotID, &s.Rows, &s.Checksum, &del, &s.PushedAt); err != nil {
			return nil, err
		}
		if del == 0 {
			out[s.Partition] = s
		}
	}
	return out, rows.Err()
}

// ErrFault is a convenience error for fault injection.
var ErrFault = errors.New("injected fault")
