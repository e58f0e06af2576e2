package silver

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/cespare/xxhash/v2"
	"github.com/zeebo/xxh3"

	"goldbridge/lakehouse/bronze"
)

// The parse workers and the merge: Bronze batches cut into chunks, parsed and typed
// in parallel, and offered to the merge shards.

// scanPoolIdle bounds the freed buffers the Bronze scan keeps for reuse.
const scanPoolIdle = 64 << 20

// maxParseWorkers bounds the parse workers whatever the core count: the merge, the
// Parquet reader and writer need cores too.
const maxParseWorkers = 4

// chunkRows is the number of Bronze rows a parse worker types at a time.
const chunkRows = 2048

// bronzeBatch is one Arrow batch read from Bronze, with the columns Silver reads.
type bronzeBatch struct {
	rec      arrow.RecordBatch
	payloads *array.String
	events   *array.String
	files    *array.String
	ingest   *array.Timestamp
	pos      *array.Int64 // _source_pos, nil when not read
}

func newBronzeBatch(rec arrow.RecordBatch) *bronzeBatch {
	b := &bronzeBatch{
		rec: rec, payloads: stringCol(rec, bronze.ColPayload), events: stringCol(rec, bronze.ColEventID),
		files: stringCol(rec, bronze.ColFile), ingest: rec.Column(rec.Schema().FieldIndices(bronze.ColIngestTS)[0]).(*array.Timestamp),
	}
	if ix := rec.Schema().FieldIndices(bronze.ColSourcePos); len(ix) > 0 {
		b.pos = rec.Column(ix[0]).(*array.Int64)
	}
	return b
}

// appendDeliveryID appends the delivery identity (ColDeliveryID) of Bronze row i of b,
// whose payload hashes to h; dated is false when the row has no position (ingested
// before Bronze recorded positions), whose identity is then its _event_id.
func appendDeliveryID(dst []byte, b *bronzeBatch, i int, h uint64) (out []byte, dated bool) {
	dst = append(dst, b.files.Value(i)...)
	if b.pos == nil || b.pos.IsNull(i) {
		return append(append(dst, "@event:"...), b.events.Value(i)...), false
	}
	dst = strconv.AppendInt(append(dst, '@'), b.pos.Value(i), 10)
	dst = append(dst, '#')
	for shift := 60; shift >= 0; shift -= 4 {
		dst = append(dst, "0123456789abcdef"[h>>shift&0xf])
	}
	return dst, true
}

// chunk is a run of rows of one Bronze batch, typed by a parse worker: per row the
// typed cells (strings pointing into arena), or the quarantine reason.
type chunk struct {
	b       *bronzeBatch
	lo, n   int
	row     int64   // the index of row lo among the rows the range's read yielded
	vals    []Value // n × len(cols)
	reason  []string
	key     []string       // the rendered business key (into arena)
	kh      []xxh3.Uint128 // its hash (keyHash)
	shard   []uint8        // the winners shard that owns it
	pending atomic.Int32   // shards still reading the chunk
	ver     []version
	op      []byte
	arena   []byte
	done    chan struct{}
	// A Debezium entity's: the columns row j lacks are ucols[uoff[j]:uoff[j+1]]
	// (debezium_toast.go).
	ucols []int
	uoff  []int32
	drift fieldTally // the chunk's undeclared fields (first pass only; drift.go)
}

// parseWorker types chunks; it owns a parser and a rule set (neither is safe for
// concurrent use).
type parseWorker struct {
	e      *engine
	parser *parser
	dbz    *dbzParser // a Debezium entity's, instead of parser
	rules  *ruleSet
	buf    []byte
}

func (e *engine) newParseWorker() (*parseWorker, error) {
	p, err := newParser(e.spec.Columns)
	if err != nil {
		return nil, err
	}
	w := &parseWorker{e: e, parser: p}
	if d := e.spec.Debezium; d != nil {
		if w.dbz, err = newDbzParser(e.spec.Columns, *d, e.seqIdx >= 0); err != nil {
			return nil, err
		}
		w.parser = w.dbz.parser
	}
	for _, f := range e.spec.IgnoredFields {
		w.parser.known[f] = struct{}{}
	}
	if e.rules != nil {
		w.rules = e.rules.clone()
	}
	return w, nil
}

func (pw *parseWorker) parse(c *chunk, width int) {
	e := pw.e
	c.vals = slices.Grow(c.vals[:0], c.n*width)[:c.n*width]
	c.reason = slices.Grow(c.reason[:0], c.n)[:c.n]
	c.key = slices.Grow(c.key[:0], c.n)[:c.n]
	c.kh = slices.Grow(c.kh[:0], c.n)[:c.n]
	c.shard = slices.Grow(c.shard[:0], c.n)[:c.n]
	c.ver = slices.Grow(c.ver[:0], c.n)[:c.n]
	c.op = slices.Grow(c.op[:0], c.n)[:c.n]
	pw.parser.arena = c.arena[:0]
	ncols := len(e.spec.Columns)
	groups := e.rowGroup // see engine.rowGroup
	if int64(len(groups)) < c.row+int64(c.n) {
		groups = nil
	}
	c.ucols, c.uoff = c.ucols[:0], c.uoff[:0]
	c.drift.reset()
	if e.group == 0 { // counted once, in the pass that does the accounting
		pw.parser.tally = &c.drift
		defer func() { pw.parser.tally = nil }()
	}
	for j := range c.n {
		i := c.lo + j
		if pw.dbz != nil {
			c.uoff = append(c.uoff, int32(len(c.ucols)))
		}
		if groups != nil && e.group > 0 && groups[c.row+int64(j)] != uint8(e.group) {
			c.reason[j], c.shard[j] = "", otherGroup // another group's, or quarantined
			continue
		}
		row := c.vals[j*width : (j+1)*width]
		raw := c.b.payloads.Value(i)
		var (
			payload []byte
			reason  string
		)
		if strings.HasPrefix(raw, bronze.BinaryPrefix) {
			var err error
			if payload, err = bronze.DecodePayload(raw); err != nil {
				reason = "invalid_payload_encoding"
			} else {
				reason = "invalid_utf8"
			}
		} else if strings.HasPrefix(raw, bronze.OversizedPrefix) {
			reason = recordTooLarge
		} else {
			payload = unsafe.Slice(unsafe.StringData(raw), len(raw)) // only read
		}
		if reason == "" && e.decrypt != nil {
			var err error
			if payload, err = e.decrypt(payload); err != nil {
				reason = "pii_undecryptable"
			}
		}
		var op byte = 'u'
		if reason == "" && pw.dbz != nil {
			var ev *dbzEvent
			if ev, reason = pw.dbz.parse(payload, row[:ncols]); ev.tombstone {
				c.reason[j] = reasonSkipped
				if groups != nil {
					groups[c.row+int64(j)] = otherGroup
				}
				continue
			}
			op = ev.op
			c.ucols = append(c.ucols, ev.unavailable...)
			if e.seqIdx >= 0 {
				row[e.uaIdx], row[e.seqIdx], row[e.carriedIdx] = Value{I: int64(ev.hi)}, Value{I: int64(ev.lo)}, Value{Null: true}
			}
		} else if reason == "" {
			reason = pw.parser.parse(payload, row[:ncols])
		}
		if reason == "" && pw.rules != nil {
			if pw.dbz != nil && op == 'd' {
				reason = pw.rules.applyToDelete(row)
			} else {
				reason = pw.rules.apply(row)
			}
		}
		var h uint64
		if reason == "" && e.deliveryIdx >= 0 {
			h = xxhash.Sum64(payload)
			pw.setDeliveryID(row, c.b, i, h)
		}
		if reason == "" {
			for _, k := range e.keyIdx {
				if row[k].Null {
					reason = "missing_" + e.cols[k].Name
					break
				}
			}
		}
		if reason == "" && e.uaIdx >= 0 && row[e.uaIdx].Null {
			reason = "missing_" + e.cols[e.uaIdx].Name
		}
		if reason == "" && e.etIdx >= 0 && row[e.etIdx].Null {
			reason = "missing_" + e.cols[e.etIdx].Name
		}
		if reason == "" && e.opIdx >= 0 && !row[e.opIdx].Null {
			o, ok := e.opMap[row[e.opIdx].S]
			if !ok {
				reason = "invalid_op: " + clip(row[e.opIdx].S)
			}
			op = o
		}
		c.reason[j] = reason
		if reason != "" {
			if groups != nil {
				groups[c.row+int64(j)] = otherGroup
			}
			continue
		}
		n := len(pw.parser.arena)
		pw.parser.arena = e.appendKey(pw.parser.arena, row)
		c.key[j] = unsafeString(pw.parser.arena[n:])
		c.kh[j] = keyHash(c.key[j])
		c.shard[j] = uint8(e.shardOfKey(c.key[j], c.kh[j].Lo))
		if g := e.groupOf(c.key[j], c.kh[j]); g != e.group {
			if groups != nil {
				groups[c.row+int64(j)] = uint8(g)
			}
			c.shard[j] = otherGroup
			continue
		} else if groups != nil {
			groups[c.row+int64(j)] = uint8(g)
		}
		if e.deliveryIdx < 0 {
			h = xxhash.Sum64(payload)
		}
		if e.append {
			c.ver[j], c.op[j] = version{hash: h}, 0
			continue
		}
		v := version{ua: orderValue(row[e.uaIdx], e.cols[e.uaIdx].Type), rank: opRank(op)}
		switch {
		case e.seqIdx >= 0: // Debezium by position: the event is its key and position
			v.seq = uint64(row[e.seqIdx].I)
			v.hash = dbzHash(c.key[j], uint64(v.ua), v.seq)
		case pw.dbz != nil: // Debezium by updated_at: the event is its values and op
			pw.buf, v.hash = dbzRowHash(pw.buf, row, e.cols, op)
		default:
			v.hash = h
		}
		c.ver[j] = v
		c.op[j] = op
	}
	if pw.dbz != nil {
		c.uoff = append(c.uoff, int32(len(c.ucols)))
	}
	c.arena = pw.parser.arena
	pw.parser.arena = nil
}

// setDeliveryID sets the ColDeliveryID cell of row, typed from Bronze row i of b whose
// payload hashes to h (the string is in the parser's arena, like the parsed ones).
func (pw *parseWorker) setDeliveryID(row []Value, b *bronzeBatch, i int, h uint64) {
	e := pw.e
	n := len(pw.parser.arena)
	var dated bool
	pw.parser.arena, dated = appendDeliveryID(pw.parser.arena, b, i, h)
	row[e.deliveryIdx] = Value{S: unsafeString(pw.parser.arena[n:])}
	if !dated && e.group == 0 {
		e.undated.Add(1)
	}
}

// merge does the accounting of a typed chunk, the quarantine and the keys table, row by
// row in scan order; offerShard then merges the rows into the winners.
func (e *engine) merge(c *chunk, sinks sink, width int) {
	toSilver, toQuarantine, toKeys := sinks&sinkSilver != 0, sinks&sinkQuarantine != 0, sinks&sinkKeys != 0 && e.keys != nil
	b := c.b
	if toSilver {
		e.drift.absorb(&c.drift)
	}
	for j := range c.n {
		i := c.lo + j
		if toSilver {
			e.counts.Read++
		}
		if reason := c.reason[j]; reason == reasonSkipped {
			if toSilver {
				e.counts.Skipped++
			}
			continue
		} else if reason != "" {
			if toSilver {
				e.counts.Quarantined++
				class, _, _ := strings.Cut(reason, ": ")
				if e.reasons == nil {
					e.reasons = map[string]int64{}
				}
				e.reasons[class]++
			}
			if toQuarantine {
				e.addQuarantine(b.payloads.Value(i), b.events.Value(i), reason, b.ingest, i, b.files.Value(i))
			}
			continue
		}
		if toKeys {
			e.keys.add(c.kh[j], c.vals[j*width:(j+1)*width], e.keyIdx, !toSilver)
		}
	}
}

// offerShard offers the valid rows of a chunk whose keys shard s owns to its winners.
func (e *engine) offerShard(w *winners, s int, c *chunk, width int) {
	b := c.b
	w.warm(c, s)
	for j := range c.n {
		if c.reason[j] != "" || int(c.shard[j]) != s {
			continue
		}
		i := c.lo + j
		var ts int64
		if !b.ingest.IsNull(i) {
			ts = int64(b.ingest.Value(i))
		}
		if !e.append {
			w.hashes = append(w.hashes, c.ver[j].hash)
		}
		w.offered++
		if w.toast != nil {
			w.toast.pending = c.ucols[c.uoff[j]:c.uoff[j+1]]
		}
		w.offer(c.kh[j], c.key[j], c.vals[j*width:(j+1)*width], c.ver[j], c.op[j], b.events.Value(i), ts)
	}
}

func stringCol(rec arrow.RecordBatch, name string) *array.String {
	return rec.Column(rec.Schema().FieldIndices(name)[0]).(*array.String)
}

// orderValue maps the updated_at value (timestamp, date or integer; the config checks
// that) to an int64 that orders versions.
func orderValue(v Value, _ Type) int64 { return v.I }

// appendKey appends the business key of a row rendered as one string (values joined
// by 0x1f).
func (e *engine) appendKey(b []byte, row []Value) []byte {
	for i, k := range e.keyIdx {
		if i > 0 {
			b = append(b, 0x1f)
		}
		b = appendKeyText(b, row[k], e.cols[k].Type)
	}
	return b
}

// key renders the business key of a row; the string is valid until the next call.
func (e *engine) key(row []Value) string {
	e.keyBuf = e.appendKey(e.keyBuf[:0], row)
	return unsafeString(e.keyBuf)
}

func appendKeyText(b []byte, v Value, t Type) []byte {
	switch t.Kind {
	case String:
		return append(b, v.S...)
	case Decimal:
		return append(b, v.D.ToString(int32(t.Scale))...)
	case Bool:
		return strconv.AppendBool(b, v.B)
	default:
		return strconv.AppendInt(b, v.I, 10)
	}
}

func (e *engine) addQuarantine(raw, eventID, reason string, ingest *array.Timestamp, i int, file string) {
	f := e.quar.Fields()
	f[0].(*array.StringBuilder).Append(raw)
	f[1].(*array.StringBuilder).Append(eventID)
	f[2].(*array.StringBuilder).Append(reason)
	f[3].(*array.TimestampBuilder).Append(arrow.Timestamp(e.now.UnixMicro()))
	f[4].(*array.StringBuilder).Append(e.runID)
	if ingest.IsNull(i) {
		f[5].AppendNull()
	} else {
		f[5].(*array.TimestampBuilder).Append(ingest.Value(i))
	}
	f[6].(*array.StringBuilder).Append(file)
}

// quarantineGate fails the run, before anything is committed, when it quarantined more
// than spec.FailQuarantinePct of the Bronze rows it read.
func (e *engine) quarantineGate() error {
	c, limit := e.counts, e.spec.FailQuarantinePct
	read := c.Read - c.Skipped // tombstones are no part of the ratio
	if limit <= 0 || read == 0 || pct(c.Quarantined, read) <= limit {
		return nil
	}
	classes := slices.Collect(maps.Keys(e.reasons))
	slices.SortFunc(classes, func(a, b string) int {
		if d := cmp64(e.reasons[b], e.reasons[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var top []string
	for _, r := range classes[:min(len(classes), 3)] {
		top = append(top, fmt.Sprintf("%s (%d)", r, e.reasons[r]))
	}
	return fmt.Errorf("%w: %d of %d bronze rows quarantined (%.2f%%), above fail_quarantine_pct %g%%; nothing committed; top reasons: %s",
		ErrQuarantineGate, c.Quarantined, read, pct(c.Quarantined, read), limit, strings.Join(top, ", "))
}
