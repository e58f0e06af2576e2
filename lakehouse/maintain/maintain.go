// Package maintain keeps what a lakehouse table costs independent of how many commits it
// has seen: Iceberg's maintenance contract (expire snapshots, rewrite data files,
// rewrite manifests, a bounded metadata log) run on every table of every layer, with
// the knowledge of what goldbridge's own readers still need.
//
// Per table, in order: the metadata-log properties (catalog.MetadataProperties); the
// compaction of small files (Bronze, quarantine and keys tables: small files of a
// partition; Silver: its merge-on-read debt; Gold rewrites whole partitions and is
// never compacted); merging the data manifests; expiring the snapshots outside the
// retention. An expiry never removes a snapshot a reader starts from: Silver's Bronze
// watermarks, each Gold mart's Silver watermark and joined snapshots, and the newest
// commit carrying a table's own watermark, each with every snapshot after it. Bronze's
// exactly-once bookkeeping (ingested files, Kafka offsets) is folded into its table
// properties in the commit that expires the summaries holding it.
//
// Promise: rows, run ids and watermarks never change, so Gold recomputes nothing and
// sync pushes nothing because of maintenance. Each step is one catalog commit or none;
// a crash at any point leaves each table as it was before or after a step, and files
// a crash strands are unreferenced (the orphan sweep deletes them). Running again
// converges; with nothing to do, nothing is committed.
package maintain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/compact"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/silver"
)

// Policy is what one table keeps.
type Policy struct {
	// RetainAge keeps every snapshot younger than it (time travel, readers in flight);
	// RetainMin keeps at least that many of the newest, and snapshots are expired in
	// batches of RetainMin (catalog.Retention.Batch).
	RetainAge time.Duration
	RetainMin int
	// MaxFiles: a partition of an append-only table (Bronze, quarantine, keys) holding
	// this many small files, or a Silver partition holding this many files, is compacted.
	MaxFiles int
	// MaxDeleteFiles: a Silver table with this many delete files is compacted.
	MaxDeleteFiles int
	// MaxManifests: the current snapshot's data manifests are merged beyond this many.
	MaxManifests int
	// MetadataVersions is the number of previous metadata files kept.
	MetadataVersions int
}

// DefaultPolicy is the policy of a table the configuration says nothing about.
var DefaultPolicy = Policy{
	RetainAge:        time.Hour,
	RetainMin:        5,
	MaxFiles:         8,
	MaxDeleteFiles:   16,
	MaxManifests:     16,
	MetadataVersions: catalog.MetadataVersionsKept,
}

// SmallFile is the size below which a data file of an append-only table is merged.
const SmallFile = 64 << 20

// Entity names the tables of one entity.
type Entity struct {
	Name             string
	Bronze, Silver   string
	Quarantine, Keys string // Keys: "" without a keys table
}

// Mart names a Gold mart's table and the Silver tables it reads.
type Mart struct {
	Name, Gold, Source string
	Joins              []string
}

// Layers of a Report.
const (
	LayerBronze     = "bronze"
	LayerSilver     = "silver"
	LayerQuarantine = "quarantine"
	LayerKeys       = "keys"
	LayerGold       = "gold"
)

// Options tune a Run.
type Options struct {
	// Policy returns the policy of a table (nil: DefaultPolicy for all).
	Policy func(ident string) Policy
	// Only limits the run to these tables (none: all of them).
	Only []string
	Log  *slog.Logger
	// fault, in tests, is called after each step, and with step "commit" before a
	// compaction commits; an error stops the run there.
	fault func(ident, step string) error
}

// Report is what a Run did to one table.
type Report struct {
	Table, Layer  string
	PropertiesSet bool
	Compacted     compact.Result
	// ManifestsBefore and ManifestsAfter count the data manifests (equal: not merged).
	ManifestsBefore, ManifestsAfter int
	Expired                         catalog.Expired
	Stats                           catalog.TableStats // after the run
	Elapsed                         time.Duration
	Err                             error
}

// Run maintains every table of the entities and marts (or opt.Only's) and returns a
// report per table. It goes on past a failing table and returns the failures joined.
func Run(ctx context.Context, lh *catalog.Lakehouse, entities []Entity, marts []Mart, opt Options) ([]Report, error) {
	if opt.Policy == nil {
		opt.Policy = func(string) Policy { return DefaultPolicy }
	}
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	ts, err := plan(ctx, lh, entities, marts)
	if err != nil {
		return nil, fmt.Errorf("maintain: %w", err)
	}
	var reports []Report
	var errs []error
	for _, t := range ts {
		if len(opt.Only) > 0 && !contains(opt.Only, t.ident) {
			continue
		}
		start := time.Now()
		r := t.maintain(ctx, lh, opt.Policy(t.ident), opt)
		r.Elapsed = time.Since(start)
		if r.Err != nil {
			if ctx.Err() != nil {
				return reports, ctx.Err()
			}
			errs = append(errs, r.Err)
			opt.Log.Error("table maintenance failed; the other tables go on", "table", t.ident, "err", r.Err)
		}
		reports = append(reports, r)
	}
	if len(errs) > 0 {
		return reports, fmt.Errorf("maintain: %w", errors.Join(errs...))
	}
	return reports, nil
}

// work is one table to maintain and what its readers need kept.
type work struct {
	ident, layer string
	protect      []int64
	// bronzeSeq: Bronze files added at or before this sequence number have been read by
	// every consumer (0: not every consumer has read anything; nothing is compacted).
	bronzeSeq int64
}

// plan loads every table once and derives what each one's readers need kept. Readers
// only move forward, so a watermark read here that moves on before the expiry is kept
// anyway with everything after it.
func plan(ctx context.Context, lh *catalog.Lakehouse, entities []Entity, marts []Mart) ([]work, error) {
	load := func(ident string) (*table.Table, error) {
		if ident == "" {
			return nil, nil
		}
		tbl, err := lh.LoadTable(ctx, ident)
		if errors.Is(err, catalog.ErrNoSuchTable) {
			return nil, nil
		}
		return tbl, err
	}
	var out []work
	silverNeeds := map[string][]int64{} // Silver table -> snapshots marts start from
	for _, m := range marts {
		gt, err := load(m.Gold)
		if err != nil || gt == nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		for src, id := range gold.StartSnapshots(gt, m.Source) {
			silverNeeds[src] = append(silverNeeds[src], id)
		}
		out = append(out, work{ident: m.Gold, layer: LayerGold,
			protect: nonZero(catalog.NewestWithKey(gt, gold.PropSilverSnapshot))})
	}
	for _, e := range entities {
		bt, err := load(e.Bronze)
		if err != nil {
			return nil, err
		}
		bw := work{ident: e.Bronze, layer: LayerBronze}
		read, all := int64(math.MaxInt64), true // the oldest consumer's position
		for _, c := range []struct{ ident, layer string }{{e.Silver, LayerSilver}, {e.Quarantine, LayerQuarantine}, {e.Keys, LayerKeys}} {
			if c.ident == "" {
				continue
			}
			tbl, err := load(c.ident)
			if err != nil {
				return nil, err
			}
			if tbl == nil {
				all = false // a consumer that has read nothing yet
				continue
			}
			w := work{ident: c.ident, layer: c.layer, protect: nonZero(catalog.NewestWithKey(tbl, silver.PropBronzeSnapshot))}
			w.protect = append(w.protect, silverNeeds[c.ident]...)
			out = append(out, w)
			mark := silver.Watermark(tbl)
			bw.protect = append(bw.protect, nonZero(mark)...)
			if s := snapshot(bt, mark); s != nil {
				read = min(read, s.SequenceNumber)
			} else {
				all = false
			}
		}
		if bt != nil {
			if all && read != math.MaxInt64 {
				bw.bronzeSeq = read
			}
			out = append(out, bw)
		}
	}
	return out, nil
}

// snapshot is tbl's snapshot id, or nil (no table, no id, or expired).
func snapshot(tbl *table.Table, id int64) *table.Snapshot {
	if tbl == nil || id == 0 {
		return nil
	}
	return tbl.SnapshotByID(id)
}

func nonZero(id int64) []int64 {
	if id == 0 {
		return nil
	}
	return []int64{id}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// maintain runs the steps on one table.
func (w work) maintain(ctx context.Context, lh *catalog.Lakehouse, p Policy, opt Options) Report {
	r := Report{Table: w.ident, Layer: w.layer}
	step := func(name string, f func() error) bool {
		if r.Err != nil {
			return false
		}
		if err := f(); err != nil {
			r.Err = err // each step's error names its table
			return false
		}
		if opt.fault != nil {
			if err := opt.fault(w.ident, name); err != nil {
				r.Err = err
				return false
			}
		}
		return true
	}
	step("properties", func() (err error) {
		r.PropertiesSet, err = lh.EnsureProperties(ctx, w.ident, catalog.MetadataProperties(p.MetadataVersions))
		return err
	})
	step("compact", func() (err error) {
		r.Compacted, err = w.compact(ctx, lh, p, opt)
		return err
	})
	step("manifests", func() (err error) {
		r.ManifestsBefore, r.ManifestsAfter, err = lh.RewriteManifests(ctx, w.ident, p.MaxManifests)
		return err
	})
	step("expire", func() (err error) {
		var fold func(*table.Table) (iceberg.Properties, error)
		if w.layer == LayerBronze {
			fold = bronze.FoldBookkeeping
		}
		ret := catalog.Retention{Age: p.RetainAge, Min: p.RetainMin, Protect: w.protect, Batch: p.RetainMin}
		r.Expired, err = lh.Expire(ctx, w.ident, ret, fold)
		return err
	})
	step("stats", func() error {
		tbl, err := lh.LoadTable(ctx, w.ident)
		if err == nil {
			r.Stats, err = catalog.Stats(ctx, tbl)
		}
		if err != nil {
			return fmt.Errorf("stats of %s: %w", w.ident, err)
		}
		return nil
	})
	if r.Compacted.SnapshotID != 0 || r.ManifestsAfter != r.ManifestsBefore || r.Expired.Snapshots > 0 {
		opt.Log.Debug("table maintained", "table", w.ident, "compacted_files", r.Compacted.DataFilesRemoved,
			"compacted_into", r.Compacted.DataFilesAdded, "delete_files_removed", r.Compacted.DeleteFilesRemoved,
			"manifests_before", r.ManifestsBefore, "manifests_after", r.ManifestsAfter,
			"snapshots_expired", r.Expired.Snapshots, "snapshots_kept", r.Expired.Kept, "files_deleted", r.Expired.Files)
	}
	return r
}

// compact rewrites the table's small files as its layer allows.
func (w work) compact(ctx context.Context, lh *catalog.Lakehouse, p Policy, opt Options) (compact.Result, error) {
	id := uuid.NewString()
	co := compact.Options{MinFiles: p.MaxFiles}
	if opt.fault != nil {
		co.BeforeCommit = func(int) { _ = opt.fault(w.ident, "commit") }
	}
	switch w.layer {
	case LayerBronze:
		if w.bronzeSeq <= 0 {
			return compact.Result{}, nil
		}
		// Only files every consumer has read: Silver reads Bronze by the append snapshots
		// after its watermark, and a rewritten file belongs to a replace snapshot.
		co.Select = func(t table.FileScanTask) bool {
			return t.DataSequenceNumber != nil && *t.DataSequenceNumber <= w.bronzeSeq && t.File.FileSizeBytes() < SmallFile
		}
	case LayerQuarantine, LayerKeys:
		co.Select = func(t table.FileScanTask) bool { return t.File.FileSizeBytes() < SmallFile }
		co.Props = func(tbl *table.Table) iceberg.Properties { return silver.CompactionProps(tbl, id) }
	case LayerSilver:
		due, err := silverDebt(ctx, lh, w.ident, p)
		if err != nil || !due {
			return compact.Result{}, err
		}
		co.MinFiles = 2 // every partition with more than one file or with deletes: silver.Compact's rule
		co.Props = func(tbl *table.Table) iceberg.Properties { return silver.CompactionProps(tbl, id) }
	default:
		return compact.Result{}, nil // Gold: one file per partition, rewritten whole by each run
	}
	return compact.Run(ctx, lh, w.ident, co)
}

// silverDebt reports whether a Silver table's merge-on-read debt is due: a partition
// holding MaxFiles data files, or MaxDeleteFiles delete files applying to its data.
func silverDebt(ctx context.Context, lh *catalog.Lakehouse, ident string, p Policy) (bool, error) {
	tbl, err := lh.LoadTable(ctx, ident)
	if err != nil {
		return false, fmt.Errorf("compact %s: %w", ident, err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return false, fmt.Errorf("compact %s: plan files: %w", ident, err)
	}
	files, deletes := map[string]int{}, map[string]map[string]bool{}
	for _, t := range tasks {
		k := compact.PartitionKey(t.File)
		files[k]++
		if deletes[k] == nil {
			deletes[k] = map[string]bool{}
		}
		for _, d := range slices.Concat(t.DeleteFiles, t.EqualityDeleteFiles, t.DeletionVectorFiles) {
			deletes[k][d.FilePath()] = true
		}
		if files[k] >= p.MaxFiles || len(deletes[k]) >= p.MaxDeleteFiles {
			return true, nil
		}
	}
	return false, nil
}
