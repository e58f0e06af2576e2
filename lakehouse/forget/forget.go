// Package forget erases one person (a subject) from every lakehouse table of an entity:
// Bronze, the quarantine table, Silver and its keys table, and the Gold marts the entity
// feeds. It is the cascade around bronze.Forget (docs/privacy.md):
//
//  1. Bronze: the rows whose payload matches are rewritten away and every older snapshot
//     is expired (bronze.Forget); its last snapshot F records the request.
//  2. Silver, quarantine and keys table: rebuilt from Bronze at F (silver.Replay: one
//     commit per table that also moves the table's Bronze watermark to F), then sealed
//     (a data-less snapshot that carries the watermark and records F) and every older
//     snapshot expired, so the next incremental run starts from F.
//  3. Each Gold mart: the partitions whose Silver rows differ between the mart's
//     watermark and the rebuilt Silver (gold.MartSpec.ChangedGrains, found before
//     Silver's history goes and recorded in Silver's seal) are recomputed from the sealed
//     Silver snapshot (gold.Run with ExactGrains; a mart that joins the entity, or whose
//     watermark is gone, in full), then sealed and expired the same way.
//
// Promise: when Run returns nil, no snapshot of those tables returns the subject's rows,
// the files only older snapshots used are deleted, every watermark points at a snapshot
// that exists, and Silver and Gold equal a fresh build of Bronze without the subject.
// On error (or a crash) some tables may be done and others not; running Run again with
// the same request finishes the job (a sealed table records F and is not rebuilt again).
// ClickHouse is the caller's: sync Result.Marts afterwards with sync.Options.Purge.
package forget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/silver"
)

// PropBronzeSnapshot is the summary key of a sealing snapshot: the Bronze forget
// snapshot the table was cleaned for. With bronze.PropForgetField and PropForgetHash it
// tells a rerun which tables are done.
const PropBronzeSnapshot = "goldbridge.forget.bronze-snapshot-id"

// Target is one entity and everything downstream of it.
type Target struct {
	Entity  string
	Bronze  string // bronze.<entity>
	Silver  silver.EntitySpec
	Lookups silver.LookupLoader // for the Silver replay
	// Decrypt is the entity's PII decrypter (crypto-shredding), for the Silver replay.
	Decrypt func([]byte) ([]byte, error)
	Marts   []gold.MartSpec // the marts whose source (or a join) is the entity
	Log     *slog.Logger
	// Operator and Host are recorded in AuditTable (who ran the forget, and where).
	Operator, Host string

	fault func(step string) error // test hook: called after each step; an error stops Run there
}

// step runs the test hook after a step.
func (t Target) step(name string) error {
	if t.fault == nil {
		return nil
	}
	return t.fault(name)
}

// Layers of a TableReport.
const (
	LayerBronze     = "bronze"
	LayerQuarantine = "quarantine"
	LayerSilver     = "silver"
	LayerKeys       = "keys"
	LayerGold       = "gold"
)

// TableReport is what the forget found (Plan) or did (Run) in one table.
type TableReport struct {
	Layer, Table string
	// Rows and Files: the subject's rows in the current snapshot and the data files
	// holding them, before the forget. -1 when they cannot be counted (see Note).
	Rows  int64
	Files int
	// Partitions: Gold partitions the subject's Silver rows fed (recomputed).
	Partitions []string
	// Snapshots is the number of snapshots expired (Plan: that would be expired);
	// DeletedFiles and DeletedMetadata the data and metadata files deleted.
	Snapshots       int
	DeletedFiles    int
	DeletedMetadata int
	Note            string
}

// Result reports a Plan or a Run.
type Result struct {
	Entity string
	// Found: the subject has rows in some table, or an unfinished forget of it is
	// pending. When false, nothing was (or would be) changed.
	Found          bool
	BronzeSnapshot int64 // the Bronze forget snapshot F (Run)
	Tables         []TableReport
	Marts          []string // marts recomputed: push them to ClickHouse again
	Unreachable    []string // what goldbridge cannot erase; the operator must
	// Shredded: a crypto-shredding run (Shred): Bronze was not touched.
	Shredded bool
	Elapsed  time.Duration

	plans map[string]goldPlan // per mart: the Gold partitions to recompute
}

// Rows is the number of the subject's rows found in the tables of a layer.
func (r Result) Rows(layer string) int64 {
	var n int64
	for _, t := range r.Tables {
		if t.Layer == layer && t.Rows > 0 {
			n += t.Rows
		}
	}
	return n
}

// Plan counts, without changing anything, what Run would touch.
func Plan(ctx context.Context, lh *catalog.Lakehouse, t Target, req bronze.ForgetRequest) (Result, error) {
	start := time.Now()
	res := Result{Entity: t.Entity}
	tables, err := survey(ctx, lh, t, req)
	if err != nil {
		return res, fmt.Errorf("forget %s: %w", t.Entity, err)
	}
	res.Tables = tables
	pending, err := pendingForget(ctx, lh, t, req)
	if err != nil {
		return res, fmt.Errorf("forget %s: %w", t.Entity, err)
	}
	res.Found = found(tables) || pending
	res.Unreachable = unreachable(t)
	res.Elapsed = time.Since(start)
	return res, nil
}

// found reports whether some table holds the subject's rows.
func found(tables []TableReport) bool {
	return slices.ContainsFunc(tables, func(r TableReport) bool { return r.Rows > 0 })
}

// pendingForget reports whether Bronze records a forget of req that some downstream
// table has not been sealed for, or that AuditTable has no record of.
func pendingForget(ctx context.Context, lh *catalog.Lakehouse, t Target, req bronze.ForgetRequest) (bool, error) {
	bt, err := lh.LoadTable(ctx, t.Bronze)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	f := forgetSnapshot(bt, req)
	if f == 0 {
		return false, nil
	}
	for _, ident := range downstream(t) {
		tbl, err := lh.LoadTable(ctx, ident)
		if errors.Is(err, catalog.ErrNoSuchTable) {
			continue
		}
		if err != nil {
			return false, err
		}
		if sealedFor(tbl, req, f) == 0 {
			return true, nil
		}
	}
	done, err := recorded(ctx, lh, req, f)
	return !done, err
}

// Run erases the subject from the entity's tables (see the package doc). A subject who
// is not there (and no unfinished forget of them) changes nothing: Result.Found is false.
func Run(ctx context.Context, lh *catalog.Lakehouse, t Target, req bronze.ForgetRequest) (Result, error) {
	if t.Log == nil {
		t.Log = slog.New(slog.DiscardHandler)
	}
	res, err := Plan(ctx, lh, t, req)
	if err != nil || !res.Found {
		return res, err
	}
	start := time.Now()
	fail := func(err error) (Result, error) {
		res.Elapsed = time.Since(start)
		return res, fmt.Errorf("forget %s: %w", t.Entity, err)
	}
	// 1. Bronze.
	br, err := bronze.Forget(ctx, lh, t.Bronze, req, true)
	if err != nil {
		return fail(err)
	}
	bt, err := lh.LoadTable(ctx, t.Bronze)
	if err != nil {
		return fail(err)
	}
	res.BronzeSnapshot = forgetSnapshot(bt, req)
	if res.BronzeSnapshot == 0 {
		// Nothing in Bronze: the rows are downstream only. Rebuild from Bronze as it is.
		if cur := bt.CurrentSnapshot(); cur != nil {
			res.BronzeSnapshot = cur.SnapshotID
		}
	}
	res.report(LayerBronze, t.Bronze, func(r *TableReport) {
		r.Snapshots, r.DeletedFiles, r.DeletedMetadata = br.ExpiredSnapshots, br.RemovedFiles+br.RemovedOrphanFiles, br.RemovedMetadataFiles
	})
	t.Log.Info("forget: bronze done", "table", t.Bronze, "rows", br.Matched, "snapshot", res.BronzeSnapshot)
	if err := t.step("bronze"); err != nil {
		return fail(err)
	}
	seal := iceberg.Properties{
		bronze.PropForgetField: req.Field,
		bronze.PropForgetHash:  bronze.ValueHash(req.Value),
		PropBronzeSnapshot:     strconv.FormatInt(res.BronzeSnapshot, 10),
		bronze.PropForgetTime:  time.Now().UTC().Format(time.RFC3339),
	}

	// 2. Silver, quarantine, keys: one replay, then each table sealed and expired.
	if err := res.silverLayer(ctx, lh, t, req, seal); err != nil {
		return fail(err)
	}
	// 3. Gold.
	for _, m := range t.Marts {
		if err := res.goldMart(ctx, lh, t, m, req, seal); err != nil {
			return fail(err)
		}
	}
	// 4. The audit record, once everything is clean (a rerun adds it if this fails).
	if done, err := recorded(ctx, lh, req, res.BronzeSnapshot); err != nil {
		return fail(err)
	} else if !done {
		if err := appendRecord(ctx, lh, res.record(t, req)); err != nil {
			return fail(fmt.Errorf("the subject is erased, but the audit record failed (run forget again to write it): %w", err))
		}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// silverTables are the Silver-side tables of the entity, with their layer.
func silverTables(t Target) [][2]string {
	out := [][2]string{{LayerSilver, t.Silver.Table}, {LayerQuarantine, t.Silver.QuarantineTable}}
	if t.Silver.Mode == silver.ModeAppend && t.Silver.KeysTable != "" {
		out = append(out, [2]string{LayerKeys, t.Silver.KeysTable})
	}
	return out
}

// downstream lists every table below Bronze.
func downstream(t Target) []string {
	var out []string
	for _, st := range silverTables(t) {
		out = append(out, st[1])
	}
	for _, m := range t.Marts {
		out = append(out, m.Table)
	}
	return out
}

func (res *Result) silverLayer(ctx context.Context, lh *catalog.Lakehouse, t Target, req bronze.ForgetRequest, seal iceberg.Properties) error {
	f := res.BronzeSnapshot
	pending := false
	exists := false
	for _, st := range silverTables(t) {
		tbl, err := lh.LoadTable(ctx, st[1])
		if errors.Is(err, catalog.ErrNoSuchTable) {
			continue
		}
		if err != nil {
			return err
		}
		exists = true
		if sealedFor(tbl, req, f) == 0 {
			pending = true
		}
	}
	if !exists {
		return nil // Silver never ran
	}
	// The Gold partitions to recompute are found before Silver's history goes (they
	// compare each mart's watermark snapshot with the rebuilt Silver) and recorded in
	// Silver's seal, so that a rerun after a crash recomputes the same ones.
	silverSeal := maps.Clone(seal)
	sealed, plans, err := recordedPlans(ctx, lh, t, req, f)
	if err != nil {
		return err
	}
	if pending {
		r, err := silver.Replay(ctx, lh, t.Silver, t.Bronze, silver.Options{Log: t.Log, Lookups: t.Lookups, Decrypt: t.Decrypt})
		if err != nil {
			return err
		}
		t.Log.Info("forget: silver rebuilt", "table", t.Silver.Table, "bronze_rows", r.Read, "snapshot", r.SnapshotID)
		if err := t.step("replay"); err != nil {
			return err
		}
		if !res.Shredded {
			tables, err := survey(ctx, lh, Target{Entity: t.Entity, Silver: t.Silver}, req)
			if err != nil {
				return err
			}
			for _, tr := range tables {
				if tr.Rows > 0 {
					return fmt.Errorf("%s still holds %d rows of the subject after the rebuild from Bronze (does a rule or lookup bring them in?)", tr.Table, tr.Rows)
				}
			}
		}
	}
	if !sealed {
		if plans, err = goldPlans(ctx, lh, t); err != nil {
			return err
		}
	}
	res.plans = plans
	maps.Copy(silverSeal, encodePlans(plans))
	for _, st := range silverTables(t) {
		props := seal
		if st[0] == LayerSilver {
			props = silverSeal
		}
		if err := res.sealAndExpire(ctx, lh, st[0], st[1], req, props); err != nil {
			return err
		}
		if err := t.step("seal " + st[1]); err != nil {
			return err
		}
	}
	return nil
}

func (res *Result) goldMart(ctx context.Context, lh *catalog.Lakehouse, t Target, m gold.MartSpec, req bronze.ForgetRequest, seal iceberg.Properties) error {
	tbl, err := lh.LoadTable(ctx, m.Table)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil
	}
	if err != nil {
		return err
	}
	if sealedFor(tbl, req, res.BronzeSnapshot) == 0 {
		opt := gold.Options{Full: true, Log: t.Log.With("mart", m.Name)}
		if p, ok := res.plans[m.Name]; ok && !p.full {
			opt.Full, opt.ExactGrains, opt.Grains = false, true, p.grains
		}
		r, err := gold.Run(ctx, lh, m, opt)
		if err != nil {
			return fmt.Errorf("recompute %s (the subject's contributions stay in Gold until it passes; run forget again then): %w", m.Name, err)
		}
		res.report(LayerGold, m.Table, func(tr *TableReport) {
			tr.Partitions = r.Partitions
			if r.Full {
				tr.Note = "recomputed in full"
			}
		})
		t.Log.Info("forget: gold recomputed", "mart", m.Name, "partitions", len(r.Partitions), "full", r.Full, "snapshot", r.SnapshotID)
		if err := t.step("gold " + m.Name); err != nil {
			return err
		}
	}
	res.Marts = append(res.Marts, m.Name)
	return res.sealAndExpire(ctx, lh, LayerGold, m.Table, req, seal)
}

// sealAndExpire seals ident for the forget (unless a sealing snapshot for it exists),
// expires every older snapshot and deletes old orphan files.
func (res *Result) sealAndExpire(ctx context.Context, lh *catalog.Lakehouse, layer, ident string, req bronze.ForgetRequest, seal iceberg.Properties) error {
	tbl, err := lh.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil
	}
	if err != nil {
		return err
	}
	keep := sealedFor(tbl, req, res.BronzeSnapshot)
	if keep == 0 {
		if keep, err = lh.Seal(ctx, ident, seal); err != nil {
			return err
		}
	}
	exp, err := lh.ExpireBefore(ctx, ident, keep)
	if err != nil {
		return err
	}
	orphans, _, err := lh.RemoveOrphans(ctx, ident, bronze.OrphanAge)
	if err != nil {
		return err
	}
	res.report(layer, ident, func(r *TableReport) {
		r.Snapshots, r.DeletedFiles, r.DeletedMetadata = exp.Snapshots, exp.DataFiles+orphans, exp.MetadataFiles
	})
	return nil
}

// report updates the TableReport of ident (adding one if the survey had none).
func (res *Result) report(layer, ident string, fn func(*TableReport)) {
	for i := range res.Tables {
		if res.Tables[i].Table == ident {
			fn(&res.Tables[i])
			return
		}
	}
	res.Tables = append(res.Tables, TableReport{Layer: layer, Table: ident})
	fn(&res.Tables[len(res.Tables)-1])
}

// forgetSnapshot is the newest Bronze snapshot recording a forget of req, or 0.
func forgetSnapshot(bt *table.Table, req bronze.ForgetRequest) int64 {
	return tagged(bt, req, "")
}

// sealedFor is the snapshot of tbl sealed for the Bronze forget snapshot f, or 0.
func sealedFor(tbl *table.Table, req bronze.ForgetRequest, f int64) int64 {
	return tagged(tbl, req, strconv.FormatInt(f, 10))
}

func tagged(tbl *table.Table, req bronze.ForgetRequest, bronzeSnap string) int64 {
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return 0
	}
	hash := bronze.ValueHash(req.Value)
	for _, s := range table.AncestorsOf(cur.SnapshotID, tbl.SnapshotByID) {
		if s.Summary == nil {
			continue
		}
		p := s.Summary.Properties
		if p[bronze.PropForgetHash] == hash && p[bronze.PropForgetField] == req.Field && (bronzeSnap == "" || p[PropBronzeSnapshot] == bronzeSnap) {
			return s.SnapshotID
		}
	}
	return 0
}

// unreachable lists what a forget of the entity cannot erase.
func unreachable(t Target) []string {
	out := []string{
		"the landing files and Kafka topics the entity was ingested from (delete the subject there too, or a --reingest or consumer reset brings them back)",
		"backups and copies of the warehouse, and ClickHouse replicas or backups outside goldbridge; on a ClickHouse cluster, the replaced parts until ClickHouse deletes them (old_parts_lifetime)",
		"Bronze and quarantine rows that are not a JSON object are matched by the value as a whole token of their text; one that holds only part of the value (a line cut inside it) or the value escaped or encoded is not found",
	}
	for _, m := range t.Marts {
		if m.IsSnapshot() {
			out = append(out, fmt.Sprintf("mart %s is a snapshot mart: only the current period is recomputed; past periods keep the subject's contributions", m.Name))
		}
	}
	return out
}

// survey counts the subject's rows in every table of the target that exists.
func survey(ctx context.Context, lh *catalog.Lakehouse, t Target, req bronze.ForgetRequest) ([]TableReport, error) {
	var out []TableReport
	load := func(ident string) (*table.Table, bool, error) {
		if ident == "" {
			return nil, false, nil
		}
		tbl, err := lh.LoadTable(ctx, ident)
		if errors.Is(err, catalog.ErrNoSuchTable) {
			return nil, false, nil
		}
		return tbl, err == nil, err
	}
	if tbl, ok, err := load(t.Bronze); err != nil {
		return nil, err
	} else if ok {
		r := TableReport{Layer: LayerBronze, Table: t.Bronze, Snapshots: len(tbl.Metadata().Snapshots())}
		if r.Rows, r.Files, err = countPayloads(ctx, tbl, bronze.ColPayload, req); err != nil {
			return nil, fmt.Errorf("count %s: %w", t.Bronze, err)
		}
		out = append(out, r)
	}
	if tbl, ok, err := load(t.Silver.QuarantineTable); err != nil {
		return nil, err
	} else if ok {
		r := TableReport{Layer: LayerQuarantine, Table: t.Silver.QuarantineTable, Snapshots: len(tbl.Metadata().Snapshots())}
		if r.Rows, r.Files, err = countPayloads(ctx, tbl, silver.QColPayload, req); err != nil {
			return nil, fmt.Errorf("count %s: %w", t.Silver.QuarantineTable, err)
		}
		out = append(out, r)
	}
	st, ok, err := load(t.Silver.Table)
	if err != nil {
		return nil, err
	}
	if ok {
		r := TableReport{Layer: LayerSilver, Table: t.Silver.Table, Snapshots: len(st.Metadata().Snapshots()), Rows: -1}
		filter, note := silverFilter(t.Silver, req)
		r.Note = note
		if filter != nil {
			if r.Rows, r.Files, err = countRows(ctx, st, filter, nil); err != nil {
				return nil, fmt.Errorf("count %s: %w", t.Silver.Table, err)
			}
		}
		out = append(out, r)
		for _, m := range t.Marts {
			g := TableReport{Layer: LayerGold, Table: m.Table, Rows: -1}
			if gt, ok, err := load(m.Table); err != nil {
				return nil, err
			} else if ok {
				g.Snapshots = len(gt.Metadata().Snapshots())
			}
			if filter != nil && m.SourceTable == t.Silver.Table && !m.IsSnapshot() {
				if g.Partitions, err = partitions(ctx, st, filter, m); err != nil {
					return nil, fmt.Errorf("partitions of %s: %w", m.Name, err)
				}
			}
			out = append(out, g)
		}
	}
	if t.Silver.Mode == silver.ModeAppend && t.Silver.KeysTable != "" {
		if kt, ok, err := load(t.Silver.KeysTable); err != nil {
			return nil, err
		} else if ok {
			out = append(out, TableReport{Layer: LayerKeys, Table: t.Silver.KeysTable, Rows: -1, Snapshots: len(kt.Metadata().Snapshots()),
				Note: "rebuilt from Bronze with Silver"})
		}
	}
	return out, nil
}

// silverFilter is the Silver row filter for req: the column named like the payload
// field, when it is a string column.
func silverFilter(spec silver.EntitySpec, req bronze.ForgetRequest) (iceberg.BooleanExpression, string) {
	for _, c := range spec.Columns {
		if c.Name != req.Field {
			continue
		}
		if c.Type.Kind != silver.String {
			return nil, fmt.Sprintf("column %s is not a string: rows not counted (rebuilt from Bronze all the same)", c.Name)
		}
		return iceberg.EqualTo(iceberg.Reference(c.Name), req.Value), ""
	}
	return nil, fmt.Sprintf("no column named %s: rows not counted (rebuilt from Bronze all the same)", req.Field)
}

// countPayloads counts the rows (and data files) of tbl whose payload column matches req.
func countPayloads(ctx context.Context, tbl *table.Table, col string, req bronze.ForgetRequest) (int64, int, error) {
	return countRows(ctx, tbl, iceberg.AlwaysTrue{}, func(rec arrow.RecordBatch) (int64, error) {
		idx := rec.Schema().FieldIndices(col)
		if len(idx) != 1 {
			return 0, fmt.Errorf("no %s column", col)
		}
		a, ok := rec.Column(idx[0]).(*array.String)
		if !ok {
			return 0, fmt.Errorf("column %s has type %s", col, rec.Column(idx[0]).DataType())
		}
		var n int64
		for i := range a.Len() {
			if !a.IsNull(i) && req.Matches(a.Value(i)) {
				n++
			}
		}
		return n, nil
	}, col)
}

// countRows counts the rows of tbl's current snapshot that pass filter and (when not
// nil) match, and the data files holding them.
func countRows(ctx context.Context, tbl *table.Table, filter iceberg.BooleanExpression, match func(arrow.RecordBatch) (int64, error), fields ...string) (rows int64, files int, err error) {
	if tbl.CurrentSnapshot() == nil {
		return 0, 0, nil
	}
	opts := []table.ScanOption{table.WithRowFilter(filter)}
	if len(fields) > 0 {
		opts = append(opts, table.WithSelectedFields(fields...))
	}
	scan := tbl.Scan(opts...)
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, task := range tasks {
		_, recs, err := scan.ReadTasks(ctx, []table.FileScanTask{task})
		if err != nil {
			return 0, 0, err
		}
		var n int64
		for rec, err := range recs {
			if err != nil {
				return 0, 0, err
			}
			if match == nil {
				n += rec.NumRows()
			} else {
				k, err := match(rec)
				if err != nil {
					rec.Release()
					return 0, 0, err
				}
				n += k
			}
			rec.Release()
		}
		if n > 0 {
			rows += n
			files++
		}
	}
	return rows, files, nil
}

// partitions lists the Gold partitions of m that the Silver rows passing filter feed.
func partitions(ctx context.Context, st *table.Table, filter iceberg.BooleanExpression, m gold.MartSpec) ([]string, error) {
	if st.CurrentSnapshot() == nil {
		return nil, nil
	}
	typ := m.SourceColumns[m.GrainColumn]
	_, recs, err := st.Scan(table.WithRowFilter(filter), table.WithSelectedFields(m.GrainColumn)).ToArrowRecords(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for rec, err := range recs {
		if err != nil {
			return nil, err
		}
		col := rec.Column(rec.Schema().FieldIndices(m.GrainColumn)[0])
		for i := range int(rec.NumRows()) {
			if p := m.PartitionOf(silver.ValueAt(col, i, typ)); p != "" {
				seen[p] = true
			}
		}
		rec.Release()
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, nil
}

// ShredField is the field an audit record and the seals of a crypto-shredding run name:
// the subject field with a " (shred)" suffix.
func ShredField(subject string) string { return subject + " (shred)" }

// Shred is crypto-shredding's erasure: deleteKey deletes the subject's key (reporting
// whether there was one); then Silver, the quarantine and keys tables are rebuilt from
// the untouched Bronze (the subject's PII fields now read as null; t.Decrypt must be
// set), the marts recomputed, and every one of those tables sealed and its older
// snapshots expired (they hold the decrypted values). req names the subject field and
// value. A subject with no key and nothing pending changes nothing (Found false).
// Running it again after an error finishes the job.
func Shred(ctx context.Context, lh *catalog.Lakehouse, t Target, req bronze.ForgetRequest, deleteKey func(context.Context) (bool, error)) (Result, error) {
	start := time.Now()
	if t.Log == nil {
		t.Log = slog.New(slog.DiscardHandler)
	}
	if t.Decrypt == nil {
		return Result{Entity: t.Entity}, fmt.Errorf("shred %s: the entity has no pii section", t.Entity)
	}
	res, err := Plan(ctx, lh, t, req)
	if err != nil {
		return res, err
	}
	res.Shredded = true
	for i := range res.Tables {
		if res.Tables[i].Layer == LayerBronze {
			res.Tables[i].Snapshots, res.Tables[i].Note = 0, "untouched: the rows stay, their PII fields can no longer be decrypted"
		}
	}
	fail := func(err error) (Result, error) {
		res.Elapsed = time.Since(start)
		return res, fmt.Errorf("shred %s: %w", t.Entity, err)
	}
	sreq := bronze.ForgetRequest{Field: ShredField(req.Field), Value: req.Value}
	deleted, err := deleteKey(ctx)
	if err != nil {
		return fail(err)
	}
	bt, err := lh.LoadTable(ctx, t.Bronze)
	if err != nil {
		return fail(err)
	}
	if cur := bt.CurrentSnapshot(); cur != nil {
		res.BronzeSnapshot = cur.SnapshotID
	}
	// Pending after a crash: the key is gone, Silver still has the subject's rows and no
	// audit record says the rebuild finished.
	done, err := recordedAny(ctx, lh, sreq)
	if err != nil {
		return fail(err)
	}
	res.Found = deleted || res.Rows(LayerSilver) > 0 && !done
	if !res.Found {
		res.Elapsed = time.Since(start)
		return res, nil
	}
	if deleted && done {
		done = false // a new key was made for new data since, and is shredded now
	}
	seal := iceberg.Properties{
		bronze.PropForgetField: sreq.Field,
		bronze.PropForgetHash:  bronze.ValueHash(req.Value),
		PropBronzeSnapshot:     strconv.FormatInt(res.BronzeSnapshot, 10),
		bronze.PropForgetTime:  time.Now().UTC().Format(time.RFC3339),
	}
	if err := res.silverLayer(ctx, lh, t, sreq, seal); err != nil {
		return fail(err)
	}
	for _, m := range t.Marts {
		if err := res.goldMart(ctx, lh, t, m, sreq, seal); err != nil {
			return fail(err)
		}
	}
	if err := appendRecord(ctx, lh, res.record(t, sreq)); err != nil {
		return fail(fmt.Errorf("the key is deleted and the tables rebuilt, but the audit record failed: %w", err))
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// PropGoldGrains prefixes the keys of Silver's sealing snapshot that record, per mart,
// the Gold partitions the forget recomputes: a JSON list of grains, or "full".
const PropGoldGrains = "goldbridge.forget.gold-grains."

// goldPlan is what a forget recomputes of one mart: every partition, or grains.
type goldPlan struct {
	full   bool
	grains []int64
}

// goldPlans finds, for each mart fed by the entity, the partitions whose Silver rows
// differ between the mart's watermark (what Gold was computed from) and Silver's
// current snapshot (the rebuild): only those can change. A mart that joins the entity,
// a snapshot mart, or one whose watermark snapshot is gone is recomputed in full.
func goldPlans(ctx context.Context, lh *catalog.Lakehouse, t Target) (map[string]goldPlan, error) {
	out := map[string]goldPlan{}
	src, err := lh.LoadTable(ctx, t.Silver.Table)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	cur := src.CurrentSnapshot()
	for _, m := range t.Marts {
		gt, err := lh.LoadTable(ctx, m.Table)
		if errors.Is(err, catalog.ErrNoSuchTable) {
			continue
		}
		if err != nil {
			return nil, err
		}
		w := gold.Watermark(gt)
		if m.SourceTable != t.Silver.Table || m.IsSnapshot() || cur == nil || src.SnapshotByID(w) == nil {
			out[m.Name] = goldPlan{full: true}
			continue
		}
		g, err := m.ChangedGrains(ctx, src, w, cur.SnapshotID)
		if err != nil {
			return nil, fmt.Errorf("changed partitions of %s: %w", m.Name, err)
		}
		out[m.Name] = goldPlan{grains: g}
	}
	return out, nil
}

// encodePlans is the PropGoldGrains record of plans.
func encodePlans(plans map[string]goldPlan) iceberg.Properties {
	out := iceberg.Properties{}
	for name, p := range plans {
		v := "full"
		if !p.full {
			b, _ := json.Marshal(append([]int64{}, p.grains...))
			v = string(b)
		}
		out[PropGoldGrains+name] = v
	}
	return out
}

// recordedPlans reads the plans from Silver's sealing snapshot for the Bronze forget
// snapshot f; sealed is false when Silver is not sealed for it yet. A mart the seal
// does not name is recomputed in full.
func recordedPlans(ctx context.Context, lh *catalog.Lakehouse, t Target, req bronze.ForgetRequest, f int64) (sealed bool, plans map[string]goldPlan, err error) {
	tbl, err := lh.LoadTable(ctx, t.Silver.Table)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	id := sealedFor(tbl, req, f)
	if id == 0 {
		return false, nil, nil
	}
	plans = map[string]goldPlan{}
	s := tbl.SnapshotByID(id)
	for _, m := range t.Marts {
		p := goldPlan{full: true}
		if v, ok := s.Summary.Properties[PropGoldGrains+m.Name]; ok && v != "full" {
			if err := json.Unmarshal([]byte(v), &p.grains); err != nil {
				return false, nil, fmt.Errorf("%s snapshot %d: bad %s%s: %w", t.Silver.Table, id, PropGoldGrains, m.Name, err)
			}
			p.full = false
		}
		plans[m.Name] = p
	}
	return true, plans, nil
}
