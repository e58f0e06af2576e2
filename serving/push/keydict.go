package push

import (
	"context"
	"fmt"
	"strings"

	"goldbridge/lakehouse/mart"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/ddl"
)

// The key dictionary of a bitmap mart (serving/ddl's keydict.go) between pushes: its
// compaction, by a forget's purge and by a sync whose window moved.

// CompactIdsIfSparse compacts a bitmap mart's key dictionary (compactIds) when it holds
// more than twice the ids the rows of <t> hold, plus compactSlack: keys of days that
// left the hot window stay in the dictionary until then, and every push reads it, so a
// long life would otherwise pay for every key it ever served. A sync calls it after
// dropping partitions. It returns how many hashes it removed (0: not compacted). The
// ids <t>'s rows hold are counted per measure and added, an upper bound of their union.
// Run with no push in progress: <t>__prev is then equal to <t> (settlePrev), and a
// push never publishes a partition of it that differs from <t>'s (prepareNext), so no
// removed id is held by a row a reader can see.
func CompactIdsIfSparse(ctx context.Context, c *chconn.Client, m *serving.Mart) (int, error) {
	if !m.Bitmap() {
		return 0, nil
	}
	held := []string{"toUInt64(0)"}
	for _, ms := range m.Measures {
		if ms.Agg == mart.CountDistinct {
			held = append(held, "toUInt64(groupBitmapMerge("+serving.Q(ddl.StateColumn(ms))+"))")
		}
	}
	var h, n uint64
	q := fmt.Sprintf("SELECT %s, (SELECT toUInt64(count() - 1) FROM %s) FROM %s",
		strings.Join(held, " + "), ddl.Name(m, m.Table+ddl.IdsSuffix), ddl.Name(m, m.Table))
	if err := c.Conn().QueryRow(ctx, q).Scan(&h, &n); err != nil {
		return 0, fmt.Errorf("key dictionary of %s: ids held: %w", m.Name, err)
	}
	if n <= 2*h+compactSlack {
		return 0, nil
	}
	exchange, err := CanExchange(ctx, c, m)
	if err != nil {
		return 0, fmt.Errorf("key dictionary of %s: %w", m.Name, err)
	}
	removed, err := compactIds(ctx, c, m, exchange)
	if err != nil {
		return 0, fmt.Errorf("key dictionary of %s: %w", m.Name, err)
	}
	return removed, nil
}

// compactSlack is the number of unheld keys a dictionary keeps without compaction: a
// small dictionary costs a push nothing worth a rebuild of it.
const compactSlack = 10_000

// compactIds keeps in the mart's key dictionary only the ids a row of <t> holds
// (ddl.CompactIds; exchange: the database can EXCHANGE TABLES) and returns how many it
// removed.
func compactIds(ctx context.Context, c *chconn.Client, m *serving.Mart, exchange bool) (int, error) {
	count := func() (uint64, error) {
		var n uint64
		err := c.Conn().QueryRow(ctx, "SELECT count() FROM "+ddl.Name(m, m.Table+ddl.IdsSuffix)).Scan(&n)
		return n, err
	}
	before, err := count()
	if err != nil {
		return 0, fmt.Errorf("key dictionary: %w", err)
	}
	for _, q := range ddl.CompactIds(m, exchange) {
		if err := c.Conn().Exec(ctx, q); err != nil {
			return 0, fmt.Errorf("compact the key dictionary: %w", err)
		}
	}
	after, err := count()
	if err != nil {
		return 0, fmt.Errorf("key dictionary: %w", err)
	}
	return int(before - after), nil
}
