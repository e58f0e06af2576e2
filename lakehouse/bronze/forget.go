package bronze

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/jsonscan"
)

// The right to be forgotten is the one exception to "Bronze is append-only". It is the
// last resort, after tokenising PII before the lake and crypto-shredding (docs/bronze.md):
//
//  1. plan: scan the current snapshot and count, per data file, the rows whose payload
//     holds Field = Value;
//  2. rewrite: write every such file again without those rows (copy-on-write) and commit,
//     in one transaction, a snapshot that swaps the old files for the new ones and a
//     second, data-less one that sheds the manifest of DELETED entries the first leaves
//     (those entries keep the old files' column bounds: payload prefixes). Both record
//     the request (the field and a SHA-256 of the value, never the value), the ingest
//     file log and the Kafka offsets, so that exactly-once ingestion survives step 3;
//  3. expire: drop every snapshot older than the second one, delete the files only they
//     referenced (old data files, manifests, manifest lists) and check they are gone;
//     delete orphan files older than OrphanAge (leftovers of crashed writes).
//
// After step 3 no snapshot serves the rows any more: time travel to before the forget is
// no longer possible, by design.

// ErrNotConfirmed is returned by Forget without confirm: it counted the matching rows
// (the message says how many) and changed nothing.
var ErrNotConfirmed = errors.New("forget not confirmed")

// Snapshot summary keys of a forget snapshot. The value itself is never stored.
const (
	PropForgetField   = "goldbridge.forget.field"
	PropForgetHash    = "goldbridge.forget.value-sha256" // hex SHA-256 of the value's bytes
	PropForgetMatched = "goldbridge.forget.matched"      // rows removed
	PropForgetFiles   = "goldbridge.forget.files-rewritten"
	PropForgetTime    = "goldbridge.forget.time" // RFC 3339, UTC
)

// ForgetRequest selects the rows to forget: those whose JSON payload has Field equal to
// Value. Field is a top-level key or a dotted path into nested objects ("customer.email").
// A JSON string matches when its unescaped text equals Value; a number, true, false or
// null matches when its text as written equals Value ("42" matches 42 but not 42.0).
// Objects and arrays never match. When a key occurs twice in one object, either
// occurrence matches. A payload that is not a valid JSON object (a line cut short, text,
// an array: Silver quarantines it) has no fields to look at: it matches when Value
// occurs in its text as a whole token (see containsToken), whatever Field is. Such a
// payload that holds only part of the value, or the value escaped or encoded, is not
// found (docs/privacy.md).
//
// Value is personal data: String, GoString and LogValue print the field and a hash only.
type ForgetRequest struct {
	Field string
	Value string
}

// String describes the request without the value.
func (r ForgetRequest) String() string {
	return fmt.Sprintf("%s = <value sha256:%s>", r.Field, shortHash(r.Value))
}

// GoString describes the request without the value (for %#v).
func (r ForgetRequest) GoString() string { return "bronze.ForgetRequest{" + r.String() + "}" }

// LogValue logs the field and a hash of the value, never the value.
func (r ForgetRequest) LogValue() slog.Value {
	return slog.GroupValue(slog.String("field", r.Field), slog.String("value_sha256", ValueHash(r.Value)))
}

// ValueHash is the hex SHA-256 of value, as recorded in PropForgetHash. It lets an
// auditor check that a given value was forgotten (`printf %s VALUE | sha256sum`); note
// that a short or guessable value can be found again from its hash by trying candidates.
func ValueHash(value string) string {
	sum := sha256.Sum256([]byte(value))
	return hex.EncodeToString(sum[:])
}

func shortHash(v string) string { return ValueHash(v)[:12] }

// path splits and checks Field.
func (r ForgetRequest) path() ([]string, error) {
	if strings.TrimSpace(r.Field) == "" {
		return nil, errors.New("empty field")
	}
	path := strings.Split(r.Field, ".")
	for _, p := range path {
		if p == "" {
			return nil, fmt.Errorf("field %q has an empty path element", r.Field)
		}
	}
	if r.Value == "" {
		return nil, fmt.Errorf("empty value for field %q", r.Field)
	}
	return path, nil
}

// ParseForgetWhere parses `field = value`. The value may be quoted with '...' or "..."
// (needed when it holds spaces); inside quotes it is taken as is, without escapes.
// Errors never repeat the value.
func ParseForgetWhere(s string) (ForgetRequest, error) {
	field, value, ok := strings.Cut(s, "=")
	if !ok {
		return ForgetRequest{}, errors.New(`--where: want "field = value"`)
	}
	field = strings.TrimSpace(field)
	value = strings.TrimSpace(value)
	switch {
	case field == "":
		return ForgetRequest{}, errors.New(`--where: missing field before "="`)
	case strings.HasSuffix(field, "!") || strings.HasSuffix(field, "<") || strings.HasSuffix(field, ">"):
		return ForgetRequest{}, errors.New(`--where: only "=" is supported`)
	case strings.ContainsAny(field, " \t\r\n'\""):
		return ForgetRequest{}, fmt.Errorf("--where: field %q: no spaces or quotes allowed (dotted paths like a.b are)", field)
	case strings.HasPrefix(value, "="):
		return ForgetRequest{}, errors.New(`--where: use a single "="`)
	case value == "":
		return ForgetRequest{}, fmt.Errorf("--where: missing value after %q", field+" =")
	}
	if q := value[0]; q == '\'' || q == '"' {
		if len(value) < 2 || value[len(value)-1] != q {
			return ForgetRequest{}, fmt.Errorf("--where: the value of %s lacks its closing %c quote", field, q)
		}
		value = value[1 : len(value)-1]
		if strings.IndexByte(value, q) >= 0 {
			return ForgetRequest{}, fmt.Errorf("--where: the value of %s holds its own quote character; quote it with the other kind", field)
		}
	} else if strings.ContainsAny(value, " \t\r\n'\"") {
		return ForgetRequest{}, fmt.Errorf("--where: quote the value of %s: it holds spaces or quotes", field)
	}
	req := ForgetRequest{Field: field, Value: value}
	if _, err := req.path(); err != nil {
		return ForgetRequest{}, fmt.Errorf("--where: %w", err)
	}
	return req, nil
}

// ForgetResult reports what Forget found and did.
type ForgetResult struct {
	Table string
	// Matched is the number of rows whose payload matched, in the current snapshot.
	Matched int64
	// FilesRewritten is the number of data files holding them (rewritten without them,
	// or dropped when every row matched).
	FilesRewritten int
	// DeleteSnapshotID is the snapshot that records the forget in its summary
	// (PropForget*) and, once the older ones are expired, the oldest one left. 0 in a
	// dry run or when nothing matched.
	DeleteSnapshotID int64
	// ExpiredSnapshots is the number of snapshots expired: all older than DeleteSnapshotID.
	ExpiredSnapshots int
	// RemovedFiles is the number of data files deleted from the warehouse because no
	// remaining snapshot references them; RemovedMetadataFiles counts manifests and
	// manifest lists.
	RemovedFiles         int
	RemovedMetadataFiles int
	// RemovedOrphanFiles counts unreferenced files older than OrphanAge under the
	// table's data location (left by crashed writes; they may hold the value) that were
	// deleted. OrphanFilesKept counts younger ones, left alone because they may belong
	// to a write in progress.
	RemovedOrphanFiles int
	OrphanFilesKept    int
	Elapsed            time.Duration
}

// errReplan is returned from the commit when the table moved since the plan.
var errReplan = errors.New("table changed since the forget was planned")

const forgetAttempts = 3

// OrphanAge is the age above which an unreferenced file in the table's data location is
// taken for the leftover of a crashed write and deleted by Forget (Iceberg's default for
// orphan cleanup: younger files may belong to a write that has not committed yet).
const OrphanAge = 72 * time.Hour

// Forget removes from the Bronze table ident every row whose payload matches req, then
// expires all history that still holds them and deletes the files only that history
// referenced. Without confirm it only counts the matches and returns an error wrapping
// ErrNotConfirmed (with the counts in the message).
//
// It refuses tables with branches or tags other than main (they would keep old
// snapshots alive) and tables with delete files. A concurrent ingest is tolerated: the
// rewrite is re-planned when the table moved before the commit. If Forget fails after
// the rewrite committed, running it again with the same request finishes the expiry.
func Forget(ctx context.Context, lh *catalog.Lakehouse, ident string, req ForgetRequest, confirm bool) (ForgetResult, error) {
	start := time.Now()
	res := ForgetResult{Table: ident}
	path, err := req.path()
	if err != nil {
		return res, fmt.Errorf("bronze forget %s: %w", ident, err)
	}
	m := newPayloadMatcher(path, req.Value)
	hash := ValueHash(req.Value)

	for attempt := 1; ; attempt++ {
		tbl, err := lh.LoadTable(ctx, ident)
		if err != nil {
			return res, fmt.Errorf("bronze forget: %w", err)
		}
		if err := checkForgettable(tbl); err != nil {
			return res, fmt.Errorf("bronze forget %s: %w", ident, err)
		}
		plan, err := planForget(ctx, tbl, m)
		if err != nil {
			return res, fmt.Errorf("bronze forget %s: %w", ident, err)
		}
		res.Matched, res.FilesRewritten = plan.matched, len(plan.files)
		if !confirm {
			plan.close()
			res.Elapsed = time.Since(start)
			return res, fmt.Errorf("bronze forget %s: %w: %d rows in %d data files match %s; nothing was changed (confirm to delete them and expire the table's history)",
				ident, ErrNotConfirmed, plan.matched, len(plan.files), req.Field)
		}
		if plan.matched == 0 {
			plan.close()
			// Nothing left in the current snapshot. If an earlier forget of the same value
			// removed the rows but did not finish expiring the history, finish it.
			res.DeleteSnapshotID = lastForgetSnapshot(tbl, req.Field, hash)
			if res.DeleteSnapshotID == 0 {
				res.Elapsed = time.Since(start)
				return res, nil
			}
			break
		}
		if beforeForgetCommit != nil {
			beforeForgetCommit()
		}
		res.DeleteSnapshotID, err = rewriteWithout(ctx, lh, ident, tbl, plan, m, iceberg.Properties{
			PropForgetField:   req.Field,
			PropForgetHash:    hash,
			PropForgetMatched: strconv.FormatInt(plan.matched, 10),
			PropForgetFiles:   strconv.Itoa(len(plan.files)),
			PropForgetTime:    time.Now().UTC().Format(time.RFC3339),
		})
		plan.close()
		if errors.Is(err, errReplan) && attempt < forgetAttempts {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("bronze forget %s: %w", ident, err)
		}
		break
	}

	exp, err := lh.ExpireBefore(ctx, ident, res.DeleteSnapshotID)
	res.ExpiredSnapshots, res.RemovedFiles, res.RemovedMetadataFiles = exp.Snapshots, exp.DataFiles, exp.MetadataFiles
	if err == nil {
		res.RemovedOrphanFiles, res.OrphanFilesKept, err = lh.RemoveOrphans(ctx, ident, OrphanAge)
	}
	res.Elapsed = time.Since(start)
	if err != nil {
		return res, fmt.Errorf("bronze forget %s: rows removed in snapshot %d, but cleaning the history failed (run forget again to finish): %w",
			ident, res.DeleteSnapshotID, err)
	}
	return res, nil
}

// beforeForgetCommit is a test hook run between planning and committing a rewrite.
var beforeForgetCommit func()

// lastForgetSnapshot returns the newest snapshot on main recording a forget of field
// with the value hash, if some snapshot outside its line of descent remains; else 0.
func lastForgetSnapshot(tbl *table.Table, field, hash string) int64 {
	cur := tbl.CurrentSnapshot()
	if cur == nil {
		return 0
	}
	lookup := func(id int64) *table.Snapshot { return tbl.SnapshotByID(id) }
	line := 0
	for _, s := range table.AncestorsOf(cur.SnapshotID, lookup) {
		line++
		if s.Summary != nil && s.Summary.Properties[PropForgetHash] == hash && s.Summary.Properties[PropForgetField] == field {
			if len(tbl.Metadata().Snapshots()) > line {
				return s.SnapshotID
			}
			return 0
		}
	}
	return 0
}

// checkForgettable refuses tables whose layout Forget cannot fully clean.
func checkForgettable(tbl *table.Table) error { return catalog.CheckMainOnly(tbl) }

// forgetPlan is the outcome of scanning one snapshot.
type forgetPlan struct {
	snapshotID int64
	scan       *table.Scan
	files      []forgetFile // data files with at least one matching row
	matched    int64
}

func (p *forgetPlan) close() {
	if p.scan != nil {
		_ = p.scan.Close()
	}
}

type forgetFile struct {
	file    iceberg.DataFile
	tasks   []table.FileScanTask
	matched int64
}

// planForget scans the current snapshot of tbl, one data file at a time.
func planForget(ctx context.Context, tbl *table.Table, m *payloadMatcher) (_ *forgetPlan, err error) {
	plan := &forgetPlan{}
	defer func() {
		if err != nil {
			plan.close()
		}
	}()
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return plan, nil
	}
	plan.snapshotID = snap.SnapshotID
	plan.scan = tbl.Scan(table.WithSnapshotID(snap.SnapshotID))
	tasks, err := plan.scan.PlanFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("plan scan: %w", err)
	}
	byFile := map[string]*forgetFile{}
	var order []string
	for _, t := range tasks {
		if len(t.DeleteFiles) > 0 || len(t.EqualityDeleteFiles) > 0 || len(t.DeletionVectorFiles) > 0 {
			return nil, fmt.Errorf("data file %s has delete files; forget supports copy-on-write tables only", t.File.FilePath())
		}
		p := t.File.FilePath()
		f, ok := byFile[p]
		if !ok {
			f = &forgetFile{file: t.File}
			byFile[p] = f
			order = append(order, p)
		}
		f.tasks = append(f.tasks, t)
	}
	for _, p := range order {
		f := byFile[p]
		_, recs, err := plan.scan.ReadTasks(ctx, f.tasks)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		for rec, err := range recs {
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			n, err := m.count(rec)
			rec.Release()
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			f.matched += n
		}
		if f.matched > 0 {
			plan.files = append(plan.files, *f)
			plan.matched += f.matched
		}
	}
	return plan, nil
}

// rewriteWithout writes the planned files again without the matching rows and commits
// them in place of the old ones. It returns the new snapshot id.
func rewriteWithout(ctx context.Context, lh *catalog.Lakehouse, ident string, tbl *table.Table, plan *forgetPlan, m *payloadMatcher, props iceberg.Properties) (int64, error) {
	// Each file is read again; the first reader is opened here for the schema the
	// rewritten files are written with: the columns exactly as the scan returns them.
	outSchema, first, err := plan.scan.ReadTasks(ctx, plan.files[0].tasks)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", plan.files[0].file.FilePath(), err)
	}
	var kept int64
	records := func(yield func(arrow.RecordBatch, error) bool) {
		for i, f := range plan.files {
			recs := first
			if i > 0 {
				var err error
				if _, recs, err = plan.scan.ReadTasks(ctx, f.tasks); err != nil {
					yield(nil, fmt.Errorf("read %s: %w", f.file.FilePath(), err))
					return
				}
			}
			var removed int64
			for rec, err := range recs {
				if err != nil {
					yield(nil, fmt.Errorf("read %s: %w", f.file.FilePath(), err))
					return
				}
				out, n, err := m.filter(ctx, rec)
				rec.Release()
				if err != nil {
					yield(nil, fmt.Errorf("filter %s: %w", f.file.FilePath(), err))
					return
				}
				removed += n
				if out == nil {
					continue
				}
				kept += out.NumRows()
				if !yield(out, nil) {
					return
				}
			}
			if removed != f.matched {
				yield(nil, fmt.Errorf("%s: %d rows matched when planning, %d when rewriting", f.file.FilePath(), f.matched, removed))
				return
			}
		}
	}
	added, err := catalog.WriteDataFiles(ctx, tbl, outSchema, iter.Seq2[arrow.RecordBatch, error](records))
	if err == nil {
		err = catalog.HoldAll(added, kept) // the rows planned, not only those handed over
	}
	if err != nil {
		removeFiles(ctx, tbl, added)
		return 0, fmt.Errorf("write rewritten data files: %w", err)
	}
	old := make([]iceberg.DataFile, len(plan.files))
	for i, f := range plan.files {
		old[i] = f.file
	}

	committed, err := lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		if cur := tbl.CurrentSnapshot(); cur == nil || cur.SnapshotID != plan.snapshotID {
			// A concurrent write may have added matching rows: plan again.
			return nil, errReplan
		}
		all := maps.Clone(props)
		if err := carryBookkeeping(tbl, all); err != nil {
			return nil, err
		}
		tx := tbl.NewTransaction()
		if err := tx.ReplaceDataFilesWithDataFiles(ctx, old, added, all); err != nil {
			return nil, err
		}
		// The replace leaves a manifest of DELETED entries for the old files, and those
		// entries keep the old files' column bounds: up to 16 characters of the smallest
		// and largest raw_payload, which may be the forgotten value. A second snapshot in
		// the same commit, a seal ("replace", no row changed), drops that manifest, so
		// once the first one is expired nothing references it.
		return lh.CommitSealed(ctx, tx, all)
	})
	if err != nil {
		if errors.Is(err, errReplan) {
			removeFiles(ctx, tbl, added)
		}
		return 0, err
	}
	return committed.CurrentSnapshot().SnapshotID, nil
}

// FoldBookkeeping returns, as table properties, what exactly-once ingestion reads from
// tbl's snapshot summaries (carryBookkeeping), so that it survives the expiry of the
// snapshots that wrote it: routine maintenance sets them in the commit that expires
// them. IngestedFiles and KafkaOffsets read the properties below the summaries.
func FoldBookkeeping(tbl *table.Table) (iceberg.Properties, error) {
	props := iceberg.Properties{}
	if err := carryBookkeeping(tbl, props); err != nil {
		return nil, fmt.Errorf("fold bookkeeping: %w", err)
	}
	return props, nil
}

// carryBookkeeping copies into props what exactly-once ingestion reads from snapshot
// summaries (and the table properties an earlier fold left), so that it survives the
// expiry of the snapshots that wrote it: every
// ingested landing file (PropFileLog) and the latest Kafka offset of every partition
// (PropOffsets, "topic:partition" -> next offset; each Kafka commit records its whole
// topic, so the newest value of each key along the current snapshot's ancestry is the
// position KafkaOffsets would resume from).
func carryBookkeeping(tbl *table.Table, props iceberg.Properties) error {
	files, err := IngestedFiles(tbl)
	if err != nil {
		return err
	}
	recs := slices.Collect(maps.Values(files))
	slices.SortFunc(recs, func(a, b FileRecord) int { return strings.Compare(a.Path, b.Path) })
	if recs == nil {
		recs = []FileRecord{}
	}
	b, err := json.Marshal(recs)
	if err != nil {
		return err
	}
	props[PropFileLog] = string(b)

	offsets := map[string]json.RawMessage{}
	found := false
	if raw, ok := tbl.Properties()[PropOffsets]; ok { // folded by an earlier expiry: the oldest values
		if err := json.Unmarshal([]byte(raw), &offsets); err != nil {
			return fmt.Errorf("bad table property %s: %w", PropOffsets, err)
		}
		found = true
	}
	var ancestry []table.Snapshot
	if cur := tbl.CurrentSnapshot(); cur != nil {
		ancestry = table.AncestorsOf(cur.SnapshotID, func(id int64) *table.Snapshot { return tbl.SnapshotByID(id) })
	}
	for _, s := range slices.Backward(ancestry) { // oldest first: newer offsets win
		if s.Summary == nil {
			continue
		}
		raw, ok := s.Summary.Properties[PropOffsets]
		if !ok {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			return fmt.Errorf("snapshot %d: bad %s: %w", s.SnapshotID, PropOffsets, err)
		}
		maps.Copy(offsets, m)
		found = true
	}
	if found {
		b, err := json.Marshal(offsets)
		if err != nil {
			return err
		}
		props[PropOffsets] = string(b)
	}
	return nil
}

// removeFiles deletes data files that were written but never committed.
func removeFiles(ctx context.Context, tbl *table.Table, files []iceberg.DataFile) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return
	}
	for _, df := range files {
		_ = fs.Remove(df.FilePath())
	}
}

// payloadMatcher finds the rows whose payload has path = value.
type payloadMatcher struct {
	path  []string
	value string
	mem   memory.Allocator
}

func newPayloadMatcher(path []string, value string) *payloadMatcher {
	return &payloadMatcher{path: path, value: value, mem: memory.DefaultAllocator}
}

// payloads returns an accessor for the raw_payload column of rec.
func payloads(rec arrow.RecordBatch) (func(int) string, error) {
	idx := rec.Schema().FieldIndices(ColPayload)
	if len(idx) != 1 {
		return nil, fmt.Errorf("no %s column", ColPayload)
	}
	switch a := rec.Column(idx[0]).(type) {
	case *array.String:
		return a.Value, nil
	case *array.LargeString:
		return a.Value, nil
	case *array.StringView:
		return a.Value, nil
	default:
		return nil, fmt.Errorf("column %s has type %s", ColPayload, a.DataType())
	}
}

func (m *payloadMatcher) count(rec arrow.RecordBatch) (int64, error) {
	get, err := payloads(rec)
	if err != nil {
		return 0, err
	}
	var n int64
	for i := range int(rec.NumRows()) {
		if m.match(get(i)) {
			n++
		}
	}
	return n, nil
}

// filter returns rec without the matching rows (nil when none is left) and how many
// rows it removed.
func (m *payloadMatcher) filter(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, int64, error) {
	get, err := payloads(rec)
	if err != nil {
		return nil, 0, err
	}
	rows := int(rec.NumRows())
	b := array.NewBooleanBuilder(m.mem)
	defer b.Release()
	b.Reserve(rows)
	var removed int64
	for i := range rows {
		hit := m.match(get(i))
		if hit {
			removed++
		}
		b.UnsafeAppend(!hit)
	}
	if removed == 0 {
		rec.Retain()
		return rec, 0, nil
	}
	if removed == int64(rows) {
		return nil, removed, nil
	}
	mask := b.NewBooleanArray()
	defer mask.Release()
	out, err := compute.FilterRecordBatch(compute.WithAllocator(ctx, m.mem), rec, mask, compute.DefaultFilterOptions())
	if err != nil {
		return nil, 0, err
	}
	return out, removed, nil
}

// match reports whether one raw_payload matches.
func (m *payloadMatcher) match(raw string) bool {
	doc := raw
	if strings.HasPrefix(raw, BinaryPrefix) {
		if b, err := DecodePayload(raw); err == nil {
			doc = string(b)
		}
	}
	if jsonPathEquals(doc, m.path, m.value) && json.Valid([]byte(doc)) {
		return true // the lookup only reads up to the match; the payload must be valid
	}
	// Not a JSON object (a cut line, text, an array): the value as a whole token.
	if !strings.Contains(doc, m.value) || isJSONObject(doc) {
		return false
	}
	return containsToken(doc, m.value)
}

// isJSONObject reports whether doc is a valid JSON object.
func isJSONObject(doc string) bool {
	i := jsonscan.SkipWS(doc, 0)
	return i < len(doc) && doc[i] == '{' && json.Valid([]byte(doc))
}

// containsToken reports whether value occurs in doc as a whole token: neither preceded
// nor followed by a letter, a digit, a byte of a multi-byte character or one of _-.@+
// (so "u-1" is not found in "u-12", nor "a@b.c" in "xa@b.c").
func containsToken(doc, value string) bool {
	for from := 0; ; {
		i := strings.Index(doc[from:], value)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(value)
		if (i == 0 || !wordByte(doc[i-1])) && (end == len(doc) || !wordByte(doc[end])) {
			return true
		}
		from = i + 1
	}
}

func wordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80 ||
		c == '_' || c == '-' || c == '.' || c == '@' || c == '+'
}

// jsonPathEquals reports whether doc is a JSON object in which path leads to a value
// whose text equals want (see ForgetRequest). It scans without allocating, skipping
// the values it does not need; malformed input gives false.
func jsonPathEquals(doc string, path []string, want string) bool {
	i := jsonscan.SkipWS(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return false
	}
	ok, _ := objectPathEquals(doc, i, path, want)
	return ok
}

// objectPathEquals scans the object starting at doc[i] == '{'. It returns whether path
// matched and the index just after the object (-1 when malformed).
func objectPathEquals(doc string, i int, path []string, want string) (bool, int) {
	i = jsonscan.SkipWS(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return false, i + 1
	}
	found := false
	for {
		if i >= len(doc) || doc[i] != '"' {
			return false, -1
		}
		kEnd := jsonscan.SkipString(doc, i)
		if kEnd < 0 {
			return false, -1
		}
		keyMatches := stringTokenEquals(doc[i:kEnd], path[0])
		i = jsonscan.SkipWS(doc, kEnd)
		if i >= len(doc) || doc[i] != ':' {
			return false, -1
		}
		i = jsonscan.SkipWS(doc, i+1)
		if i >= len(doc) {
			return false, -1
		}
		var end int
		switch {
		case keyMatches && len(path) > 1 && doc[i] == '{':
			var ok bool
			ok, end = objectPathEquals(doc, i, path[1:], want)
			found = found || ok
		default:
			end = jsonscan.SkipValue(doc, i)
			if keyMatches && len(path) == 1 && end > 0 && tokenEquals(doc[i:end], want) {
				found = true
			}
		}
		if end < 0 {
			return false, -1
		}
		if found {
			return true, end // no need to read further; validity is checked by the caller
		}
		i = jsonscan.SkipWS(doc, end)
		if i >= len(doc) {
			return false, -1
		}
		switch doc[i] {
		case ',':
			i = jsonscan.SkipWS(doc, i+1)
		case '}':
			return false, i + 1
		default:
			return false, -1
		}
	}
}

// tokenEquals compares one scalar JSON token with want.
func tokenEquals(tok, want string) bool {
	switch tok[0] {
	case '"':
		return stringTokenEquals(tok, want)
	case '{', '[':
		return false
	default:
		return tok == want
	}
}

// stringTokenEquals compares a JSON string token (with its quotes) with want.
func stringTokenEquals(tok, want string) bool {
	inner := tok[1 : len(tok)-1]
	if strings.IndexByte(inner, '\\') < 0 {
		return inner == want
	}
	var s string
	if err := json.Unmarshal([]byte(tok), &s); err != nil {
		return false
	}
	return s == want
}

// Matches reports whether one raw_payload matches the request (see ForgetRequest); an
// invalid request matches nothing.
func (r ForgetRequest) Matches(raw string) bool {
	path, err := r.path()
	if err != nil {
		return false
	}
	return newPayloadMatcher(path, r.Value).match(raw)
}
