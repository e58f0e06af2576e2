package bronze

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"goldbridge/lakehouse/catalog"
)

// KafkaSource is a Kafka topic read by a consumer group.
//
// The group only mirrors progress for monitoring (lag dashboards, kafka-consumer-groups):
// partitions are assigned explicitly and the offsets Bronze resumes from are the ones
// recorded in the Bronze table's snapshot summaries.
type KafkaSource struct {
	Name   string // source name from the config (recorded in the snapshot summary)
	System string // _source_system, e.g. "shop_kafka"

	Brokers []string
	Topic   string
	Group   string // consumer group the consumed offsets are committed to after Iceberg; "" = none

	// StartOffset is where a partition starts when the table has no offset recorded for
	// the topic at all (the first run): "earliest" (the default when empty) or "latest".
	// A partition added to the topic later always starts at its earliest offset, so
	// nothing produced to it before the next run is skipped.
	StartOffset string
	// MaxRecords stops a run after this many records (0 = until caught up with the
	// end offsets observed when the run started).
	MaxRecords int64
	// PollTimeout is how long a poll that returns nothing waits before the run ends
	// (default 2s).
	PollTimeout time.Duration
	// Opts are extra client options (SASL, TLS, dialer) built by cmd/. They are applied
	// before the consuming options, which they cannot override.
	Opts []kgo.Opt
}

// Start offsets accepted in KafkaSource.StartOffset.
const (
	StartEarliest = "earliest"
	StartLatest   = "latest"
)

const defaultKafkaPollTimeout = 2 * time.Second

// groupCommitTimeout bounds the best-effort offset commit to the consumer group.
const groupCommitTimeout = 10 * time.Second

// ErrOffsetsMoved is wrapped by the error IngestKafka returns when the offsets recorded
// in the table changed while the run was reading: another writer ingested the same
// topic concurrently, and committing would duplicate its records.
var ErrOffsetsMoved = errors.New("kafka offsets recorded in the table moved during the run")

// KafkaResult summarises one Kafka ingestion run.
type KafkaResult struct {
	Table      string
	BatchID    string
	SnapshotID int64 // 0 when nothing was committed
	Rows       int64
	Offsets    map[string]int64 // "topic:partition" -> next offset, as recorded in the table
	Elapsed    time.Duration
}

func (s KafkaSource) validate() error {
	switch {
	case len(s.Brokers) == 0:
		return errors.New("brokers: at least one is required")
	case s.Topic == "":
		return errors.New("topic is required")
	case s.MaxRecords < 0:
		return fmt.Errorf("max records %d: must not be negative", s.MaxRecords)
	case s.PollTimeout < 0:
		return fmt.Errorf("poll timeout %v: must not be negative", s.PollTimeout)
	}
	switch s.StartOffset {
	case "", StartEarliest, StartLatest:
	default:
		return fmt.Errorf("start offset %q: want %q or %q", s.StartOffset, StartEarliest, StartLatest)
	}
	return nil
}

// IngestKafka runs one bounded read of src into the Bronze table ident, exactly once.
//
// It resumes every partition at the next offset recorded in the table (see KafkaOffsets)
// and reads until it reaches the end offsets observed when it started (the last stable
// offsets: only committed transactional records are read), or MaxRecords, or a poll
// that returns nothing for PollTimeout. Each record becomes one row: raw_payload is the
// record value (a tombstone, whose value is nil, lands as an empty payload like an empty
// value: nothing is filtered), _source_file is "topic:partition:offset" and _source_ts
// the record timestamp, _source_key and _source_headers the record's key and headers
// (see keys.go).
//
// The data files are written first and then committed in one snapshot whose summary
// holds the next offset of every partition of the topic (PropOffsets), so a crash before
// the commit leaves only unreferenced files and the next run reads the same records
// again. Only after the Iceberg commit are the offsets committed to the consumer group,
// best effort: Kafka's group offsets are never ahead of Iceberg, and a failure there is
// logged, not returned. A run that reads nothing commits nothing, unless it had to pin
// the start position of partitions the table did not know yet (then it commits a
// snapshot without data files, so that "latest" keeps meaning the first run's end).
//
// If it fails, the files it wrote are deleted (catalog.WriteAttempt).
func IngestKafka(ctx context.Context, lh *catalog.Lakehouse, ident string, src KafkaSource, opt Options) (KafkaResult, error) {
	w := lh.BeginWrite(ident)
	res, err := ingestKafka(ctx, lh, ident, src, opt)
	return res, w.End(ctx, err)
}

func ingestKafka(ctx context.Context, lh *catalog.Lakehouse, ident string, src KafkaSource, opt Options) (KafkaResult, error) {
	start := time.Now()
	if opt.Log == nil {
		opt.Log = slog.New(slog.DiscardHandler)
	}
	res := KafkaResult{Table: ident}
	if err := src.validate(); err != nil {
		return res, fmt.Errorf("bronze %s kafka source %s: %w", ident, src.Name, err)
	}
	if src.PollTimeout == 0 {
		src.PollTimeout = defaultKafkaPollTimeout
	}
	log := opt.Log.With("table", ident, "source", src.Name, "topic", src.Topic)
	wrap := func(err error) error { return fmt.Errorf("bronze %s kafka source %s: %w", ident, src.Name, err) }

	run, err := NewRun(ctx, lh, ident, opt)
	if err != nil {
		return res, err
	}
	res.BatchID = run.BatchID()
	recorded, err := KafkaOffsets(run.Table(), src.Topic)
	if err != nil {
		return res, wrap(err)
	}

	admCl, err := kgo.NewClient(src.baseOpts()...)
	if err != nil {
		return res, wrap(fmt.Errorf("kafka client: %w", err))
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	plan, err := planKafka(ctx, adm, src, recorded, log)
	if err != nil {
		return res, wrap(err)
	}
	next := maps.Clone(plan.from)
	if plan.pending() > 0 {
		var bytesRead int64
		err = run.WriteRecords(ctx, func(emit EmitRecord) error {
			return consumeKafka(ctx, src, plan, next, emit, func(n int64) {
				bytesRead += n
				if opt.Progress != nil {
					opt.Progress(bytesRead, run.Rows())
				}
			}, log)
		})
		if err != nil {
			return res, err
		}
	}
	res.Rows = run.Rows()
	res.Offsets = offsetKeys(src.Topic, next)

	offsetsJSON, err := json.Marshal(res.Offsets)
	if err != nil {
		return res, wrap(err)
	}
	props := iceberg.Properties{PropSource: src.Name, PropOffsets: string(offsetsJSON)}
	precheck := func(tbl *table.Table) error {
		// Iceberg is the truth: commit only if the table still says this run's start.
		now, err := KafkaOffsets(tbl, src.Topic)
		if err != nil {
			return err
		}
		if !maps.Equal(now, recorded) {
			return fmt.Errorf("%w: topic %s was ingested concurrently (offsets %v when the run started, now %v); not committing a duplicate",
				ErrOffsetsMoved, src.Topic, offsetKeys(src.Topic, recorded), offsetKeys(src.Topic, now))
		}
		return nil
	}
	switch {
	case res.Rows > 0:
		res.SnapshotID, err = run.Commit(ctx, props, precheck)
	case !maps.Equal(next, recorded):
		// Nothing read, but start positions of partitions the table did not know were
		// chosen: record them, or "latest" would move on with every empty run.
		res.SnapshotID, err = commitOffsetsOnly(ctx, lh, ident, run.BatchID(), props, precheck)
	}
	if err != nil {
		return res, err
	}

	// Iceberg holds the offsets now; mirror them to the group (also after a run that
	// read nothing, which repairs a group commit lost to an earlier failure).
	commitGroupOffsets(ctx, adm, src, next, log)

	res.Elapsed = time.Since(start)
	log.Info("kafka ingest done", "rows", res.Rows, "snapshot", res.SnapshotID, "batch", res.BatchID,
		"elapsed", res.Elapsed.Round(time.Millisecond))
	return res, nil
}

// baseOpts are the client options shared by the admin and the consuming client.
func (s KafkaSource) baseOpts() []kgo.Opt {
	return append([]kgo.Opt{kgo.SeedBrokers(s.Brokers...), kgo.ClientID("goldbridge")}, s.Opts...)
}

// kafkaPlan is where each partition of the topic starts and where the run stops.
type kafkaPlan struct {
	from   map[int32]int64 // next offset to read
	target map[int32]int64 // end (last stable) offset observed at the start
}

func (p kafkaPlan) pending() int {
	n := 0
	for part, from := range p.from {
		if from < p.target[part] {
			n++
		}
	}
	return n
}

// planKafka resolves the start offset of every partition: the offset recorded in the
// table, or (for partitions it does not know) StartOffset on the first run and the
// earliest offset afterwards.
func planKafka(ctx context.Context, adm *kadm.Client, src KafkaSource, recorded map[int32]int64, log *slog.Logger) (kafkaPlan, error) {
	ends, err := adm.ListCommittedOffsets(ctx, src.Topic)
	if err != nil {
		return kafkaPlan{}, fmt.Errorf("list end offsets of %s: %w", src.Topic, err)
	}
	if err := ends.Error(); err != nil {
		return kafkaPlan{}, fmt.Errorf("list end offsets of %s: %w", src.Topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, src.Topic)
	if err != nil {
		return kafkaPlan{}, fmt.Errorf("list start offsets of %s: %w", src.Topic, err)
	}
	if err := starts.Error(); err != nil {
		return kafkaPlan{}, fmt.Errorf("list start offsets of %s: %w", src.Topic, err)
	}
	if len(ends[src.Topic]) == 0 {
		return kafkaPlan{}, fmt.Errorf("topic %s has no partitions", src.Topic)
	}

	plan := kafkaPlan{from: map[int32]int64{}, target: map[int32]int64{}}
	for part, e := range ends[src.Topic] {
		end := e.Offset
		logStart := int64(0)
		if s, ok := starts.Lookup(src.Topic, part); ok {
			logStart = s.Offset
		}
		from, ok := recorded[part]
		switch {
		case ok && from > end:
			return kafkaPlan{}, fmt.Errorf("%s:%d: recorded next offset %d is past the end offset %d (topic recreated or truncated?); refusing to guess",
				src.Topic, part, from, end)
		case ok && from < logStart:
			log.Warn("kafka records were deleted by retention before Bronze read them; continuing at the log start",
				"partition", part, "recorded", from, "log_start", logStart, "lost", logStart-from)
			from = logStart
		case ok:
		case len(recorded) > 0:
			log.Info("new kafka partition; starting at its earliest offset", "partition", part, "offset", logStart)
			from = logStart
		case src.StartOffset == StartLatest:
			from = end
		default:
			from = logStart
		}
		plan.from[part], plan.target[part] = from, end
	}
	for part := range recorded {
		if _, ok := plan.from[part]; !ok {
			return kafkaPlan{}, fmt.Errorf("%s:%d has an offset recorded in the table but is not in the topic (topic recreated?); refusing to guess",
				src.Topic, part)
		}
	}
	return plan, nil
}

// consumeKafka reads the partitions of plan that are behind their target, from the
// offsets in next, and emits their records; next is advanced past every record read.
// Records at or past a partition's target are left for the next run.
func consumeKafka(ctx context.Context, src KafkaSource, plan kafkaPlan, next map[int32]int64, emit EmitRecord, progress func(bytes int64), log *slog.Logger) error {
	assign := map[int32]kgo.Offset{}
	prefix := map[int32]string{}
	for part, from := range next {
		if from < plan.target[part] {
			assign[part] = kgo.NewOffset().At(from)
			prefix[part] = src.Topic + ":" + strconv.FormatInt(int64(part), 10) + ":"
		}
	}
	opts := append(src.baseOpts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{src.Topic: assign}),
		// Aborted transactions never land; markers are kept so the position moves past them.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		// Start positions were checked against the log; a partition that falls out of
		// range while being read fails the run instead of jumping silently.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka consumer: %w", err)
	}
	defer cl.Close()

	var emitted int64
	var file []byte
	for len(assign) > 0 && (src.MaxRecords == 0 || emitted < src.MaxRecords) {
		maxPoll := 0
		if src.MaxRecords > 0 {
			maxPoll = int(min(src.MaxRecords-emitted, 1<<20))
		}
		pctx, cancel := context.WithTimeout(ctx, src.PollTimeout)
		fetches := cl.PollRecords(pctx, maxPoll)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		var fetchErr error
		fetches.EachError(func(topic string, part int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return // this poll's timeout
			}
			fetchErr = errors.Join(fetchErr, fmt.Errorf("fetch %s:%d: %w", topic, part, err))
		})
		if fetchErr != nil {
			return fetchErr
		}

		seen := 0
		var done []int32
		var headers []Header
		var polledBytes int64
	records:
		for _, f := range fetches {
			for _, ft := range f.Topics {
				if ft.Topic != src.Topic {
					continue
				}
				for _, fp := range ft.Partitions {
					part := fp.Partition
					if _, ok := assign[part]; !ok {
						continue // caught up already; what follows is for the next run
					}
					for _, r := range fp.Records {
						if r.Offset < next[part] {
							continue // never expected: the client re-delivered a record
						}
						seen++
						if r.Offset >= plan.target[part] {
							delete(assign, part)
							done = append(done, part)
							break
						}
						if !r.Attrs.IsControl() {
							file = strconv.AppendInt(append(file[:0], prefix[part]...), r.Offset, 10)
							value := r.Value
							if len(value) > MaxRecordBytes { // as for a landing file's line: a marker Silver quarantines
								value = oversizedPayload(int64(len(value)), value)
							}
							headers = headers[:0]
							for _, h := range r.Headers {
								headers = append(headers, Header{Key: h.Key, Value: h.Value})
							}
							if err := emit(value, r.Key, headers, src.System, string(file), r.Offset, recordTime(r)); err != nil {
								return err
							}
							emitted++
							polledBytes += int64(len(r.Value))
						}
						next[part] = r.Offset + 1
						if next[part] >= plan.target[part] {
							delete(assign, part)
							done = append(done, part)
							break
						}
						if src.MaxRecords > 0 && emitted >= src.MaxRecords {
							break records
						}
					}
				}
			}
		}
		if len(done) > 0 {
			cl.PauseFetchPartitions(map[string][]int32{src.Topic: done})
		}
		progress(polledBytes)
		if seen == 0 {
			// Nothing for PollTimeout: end the run with what was read. A partition can stay
			// short of its target when its last offsets hold no readable record (compacted).
			lagging := slices.Sorted(maps.Keys(assign))
			log.Warn("kafka poll returned nothing; ending the run before reaching the end offsets seen at its start",
				"partitions", lagging, "poll_timeout", src.PollTimeout)
			break
		}
	}
	return nil
}

// recordTime is the record timestamp in UTC, or zero (a null _source_ts) when unset.
func recordTime(r *kgo.Record) time.Time {
	if r.Timestamp.UnixMilli() < 0 {
		return time.Time{}
	}
	return r.Timestamp.UTC()
}

// commitOffsetsOnly commits a snapshot with no data files whose summary holds props.
func commitOffsetsOnly(ctx context.Context, lh *catalog.Lakehouse, ident, batchID string, props iceberg.Properties, precheck func(*table.Table) error) (int64, error) {
	all := iceberg.Properties{PropBatchID: batchID, PropRows: "0"}
	maps.Copy(all, props)
	committed, err := lh.Commit(ctx, ident, func(ctx context.Context, tbl *table.Table) (*table.Table, error) {
		if err := precheck(tbl); err != nil {
			return nil, err
		}
		rdr, err := array.NewRecordReader(arrowSchema, nil)
		if err != nil {
			return nil, err
		}
		defer rdr.Release()
		tx := tbl.NewTransaction()
		if err := tx.Append(ctx, rdr, all); err != nil {
			return nil, err
		}
		return tx.Commit(ctx)
	})
	if err != nil {
		return 0, fmt.Errorf("bronze %s: %w", ident, err)
	}
	if snap := committed.CurrentSnapshot(); snap != nil {
		return snap.SnapshotID, nil
	}
	return 0, nil
}

// commitGroupOffsets commits next to the source's consumer group, best effort: the table
// already holds these offsets, so a failure only leaves the group's lag stale.
func commitGroupOffsets(ctx context.Context, adm *kadm.Client, src KafkaSource, next map[int32]int64, log *slog.Logger) {
	if src.Group == "" || len(next) == 0 {
		return
	}
	// The Iceberg commit is done; try to mirror it even if ctx was just cancelled.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupCommitTimeout)
	defer cancel()
	var offs kadm.Offsets
	for part, at := range next {
		offs.Add(kadm.Offset{Topic: src.Topic, Partition: part, At: at, LeaderEpoch: -1})
	}
	if err := adm.CommitAllOffsets(ctx, src.Group, offs); err != nil {
		log.Warn("committing offsets to the kafka consumer group failed; Bronze is unaffected (its snapshot holds them)",
			"group", src.Group, "err", err)
	}
}

// KafkaOffsets returns the next offset of every partition of topic as recorded in the
// newest snapshot, in the current snapshot's ancestry, whose summary has offsets for
// topic (every Kafka commit records the full map of its topic). It returns an empty map
// when the topic was never ingested.
//
// When no snapshot left has offsets for topic, the PropOffsets table property (what
// expired snapshots recorded: FoldBookkeeping) is read. Snapshot expiry must keep that
// snapshot, or fold its PropOffsets into the property: without it the next run would
// start the topic over from KafkaSource.StartOffset.
func KafkaOffsets(tbl *table.Table, topic string) (map[int32]int64, error) {
	meta := tbl.Metadata()
	snap := meta.CurrentSnapshot()
	for range len(meta.Snapshots()) { // bounded: a broken history cannot loop
		if snap == nil {
			break
		}
		if snap.Summary != nil {
			if raw, ok := snap.Summary.Properties[PropOffsets]; ok {
				offsets, err := parseOffsets(raw, topic)
				if err != nil {
					return nil, fmt.Errorf("snapshot %d: bad %s: %w", snap.SnapshotID, PropOffsets, err)
				}
				if len(offsets) > 0 {
					return offsets, nil
				}
			}
		}
		if snap.ParentSnapshotID == nil {
			break
		}
		snap = meta.SnapshotByID(*snap.ParentSnapshotID)
	}
	if raw, ok := tbl.Properties()[PropOffsets]; ok {
		offsets, err := parseOffsets(raw, topic)
		if err != nil {
			return nil, fmt.Errorf("bad table property %s: %w", PropOffsets, err)
		}
		return offsets, nil
	}
	return map[int32]int64{}, nil
}

// parseOffsets returns the entries of a PropOffsets value that belong to topic.
func parseOffsets(raw, topic string) (map[int32]int64, error) {
	var all map[string]int64
	if err := json.Unmarshal([]byte(raw), &all); err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for key, next := range all {
		i := strings.LastIndexByte(key, ':')
		if i < 0 {
			return nil, fmt.Errorf("key %q is not topic:partition", key)
		}
		if key[:i] != topic {
			continue
		}
		part, err := strconv.ParseInt(key[i+1:], 10, 32)
		if err != nil || part < 0 || next < 0 {
			return nil, fmt.Errorf("entry %q: %d is not partition: next offset", key, next)
		}
		out[int32(part)] = next
	}
	return out, nil
}

// offsetKeys is the PropOffsets form of a topic's offsets: "topic:partition" -> next.
func offsetKeys(topic string, offsets map[int32]int64) map[string]int64 {
	out := make(map[string]int64, len(offsets))
	for part, next := range offsets {
		out[topic+":"+strconv.FormatInt(int64(part), 10)] = next
	}
	return out
}
