package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/lakehouse/catalog"
	"goldbridge/serving"
	"goldbridge/serving/chlocal"
	"goldbridge/serving/ddl"
	gbsync "goldbridge/sync"
)

// pushRecords are the marts' push records (gbsync.Records), in the state directory
// beside the embedded catalog.
func pushRecords(cfg *config.Config) gbsync.Records {
	return gbsync.Records{Dir: filepath.Join(cfg.StateDir, "pushed"), Definition: ddl.Statements}
}

// syncTarget names the ClickHouse a push went to: a record of one target never stands
// for another.
func syncTarget(cfg *config.Config) string {
	ch := cfg.ClickHouse
	if ch.IsEmbedded() {
		return fmt.Sprintf("embedded %s %d %d db %s", ch.Local.Path, ch.Local.TCPPort, ch.Local.HTTPPort, ch.Database)
	}
	if len(ch.Shards) > 0 {
		var shards []string
		for _, nodes := range ch.Shards {
			shards = append(shards, strings.Join(nodes, ","))
		}
		return fmt.Sprintf("shards %s db %s cluster %s", strings.Join(shards, ";"), ch.Database, ch.Cluster)
	}
	return fmt.Sprintf("%s db %s cluster %s", strings.Join(ch.Addresses, ","), ch.Database, ch.Cluster)
}

// recordedAll reports whether every mart's push record matches its Gold table as it is
// now: a sync of them has nothing to do and need not reach ClickHouse.
func recordedAll(ctx context.Context, lh *catalog.Lakehouse, cfg *config.Config, marts []string) bool {
	recs, target, now := pushRecords(cfg), syncTarget(cfg), time.Now()
	for _, name := range marts {
		tbl, err := lh.LoadTable(ctx, cfg.Marts[name].Table)
		if err != nil {
			return false
		}
		m, err := servedMart(cfg, name)
		if err != nil || m.CheckGold(tbl) != nil {
			return false
		}
		if _, ok := unchangedRecord(cfg, recs, m, tbl, target, now); !ok {
			return false
		}
	}
	return true
}

// unchangedRecord is recs.Unchanged, unless the embedded server has a definition it
// cannot load (a full disk's leftover): the record then no longer says what the server
// holds, and the sync must reach it (its start moves the definition aside, the sync
// recreates the object).
func unchangedRecord(cfg *config.Config, recs gbsync.Records, m *serving.Mart, tbl *table.Table, target string, now time.Time) (gbsync.Record, bool) {
	if ch := cfg.ClickHouse; ch.IsEmbedded() && chlocal.MetadataBroken(ch.Local.Path) {
		return gbsync.Record{}, false
	}
	return recs.Unchanged(m, tbl, target, now)
}
