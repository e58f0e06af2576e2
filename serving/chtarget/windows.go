package chtarget

import (
	"context"
	"fmt"
	"time"

	"goldbridge/serving"
	"goldbridge/serving/ddl"
	"goldbridge/serving/hot"
	"goldbridge/serving/push"
)

var _ hot.WindowsServer = (*ClickHouse)(nil)

// windowsChange is what batch b changes in <t>, which held source before: the grain
// ranges of its pushed and dropped partitions.
func windowsChange(m *serving.Mart, b hot.Batch, before string) (*push.WindowsChange, error) {
	ch := &push.WindowsChange{Before: before, Changed: push.Ranges(b.Push)}
	for _, id := range b.Drop {
		start, err := m.ParsePartitionID(id)
		if err != nil {
			return nil, fmt.Errorf("windows of %s: dropped partition %q: %w", m.Name, id, err)
		}
		s, e := m.PartitionRange(start)
		ch.Changed = append(ch.Changed, [2]time.Time{s, e})
	}
	return ch, nil
}

// CheckWindows implements hot.WindowsServer: the row count and an order-independent
// fingerprint of <t>_windows and of its rows recomputed from <t> now (ddl.WindowsSelect),
// or "missing".
func (t *ClickHouse) CheckWindows(ctx context.Context, m *serving.Mart, unservable []hot.Partition) (want, have string, err error) {
	err = t.c.Retry(ctx, func(ctx context.Context) error {
		if want, err = t.fingerprint(ctx, ddl.WindowsSelect(m, push.Ranges(unservable))); err != nil {
			return err
		}
		var n uint64
		win := m.Table + ddl.WindowsSuffix
		if err := t.c.Conn().QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name = ?", m.Database, win).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			have = "missing"
			return nil
		}
		have, err = t.fingerprint(ctx, "SELECT * FROM "+ddl.Name(m, win))
		return err
	})
	if err != nil {
		return "", "", fmt.Errorf("check windows of %s: %w", m.Name, err)
	}
	return want, have, nil
}

// fingerprint describes the rows of the query q: their count and the sum of their
// hashes (order-independent; a changed cell changes it).
func (t *ClickHouse) fingerprint(ctx context.Context, q string) (string, error) {
	var n, h uint64
	if err := t.c.Conn().QueryRow(ctx, "SELECT count(), sum(cityHash64(tuple(*))) FROM ("+q+")").Scan(&n, &h); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d rows, fingerprint %016x", n, h), nil
}
