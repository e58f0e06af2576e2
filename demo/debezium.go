package demo

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Debezium 2.x change events of a customers table, as the PostgreSQL and MySQL
// connectors document them, for the tests of Silver's Debezium format: a snapshot, then
// streaming transactions (inserts, two updates of one row in one transaction, deletes, a
// delete and a re-insert of one key in one transaction), a purge of half the rows, and
// what delivery does to them (at-least-once redelivery, a connector restart that sends
// events again with a new envelope ts_ms, tombstones after deletes). The source table:
//
//	CREATE TABLE customers (id bigint PRIMARY KEY, name text NOT NULL, tier text,
//	  balance numeric(12,2), updated_at timestamp(6) DEFAULT now(), birth date, notes text);
//
// updated_at is the transaction's now() (equal for every change of a transaction),
// encoded as io.debezium.time.MicroTimestamp; birth as io.debezium.time.Date; balance
// per decimal.handling.mode. notes is long (TOASTed) for some rows: with Toast, a
// PostgreSQL update that leaves it unchanged carries __debezium_unavailable_value.

// DebeziumOptions choose the connector, the event shape and the stream's size.
type DebeziumOptions struct {
	Connector string // postgresql or mysql
	// Flattened writes the ExtractNewRecordState form (delete.handling.mode=rewrite,
	// drop.tombstones=false) with add.fields=op,<position fields>,source.ts_ms,ts_ms;
	// with NoAddFields, without add.fields (only __deleted).
	Flattened, NoAddFields bool
	Precise                bool // decimal.handling.mode=precise (Debezium's default), else string
	FullIdentity           bool // PostgreSQL REPLICA IDENTITY FULL (MySQL always has the full before image)
	Toast                  bool // PostgreSQL: unchanged long notes are __debezium_unavailable_value
	Seed                   uint64
	Customers              int // rows of the snapshot
	Txs                    int // streaming transactions (half before the purge, half after)
	Files                  int // files the streaming events are cut into (the snapshot, the restart and the purge have their own)
}

// Customer is one row of the source table.
type Customer struct {
	ID        int64
	Name      string
	Tier      string // "" is NULL
	Balance   int64  // cents
	UpdatedAt int64  // µs since the epoch
	Birth     int32  // days since the epoch
	Notes     string
}

// Change is one row change of the source, in commit order: the truth an oracle applies.
type Change struct {
	Op  byte     // c, u, d or r
	Row Customer // the row after (c, u, r), or the row deleted (d)
	// Lacks says what the event does not carry: "notes" (an unchanged TOASTed notes),
	// "row" (a delete with the key only: REPLICA IDENTITY DEFAULT), or "".
	Lacks string
}

// DebeziumFile is one landing file of the stream.
type DebeziumFile struct {
	Name  string
	What  string // snapshot, stream, restart or purge
	Lines []string
}

// DebeziumStream is a generated stream: its history and its files in production order.
type DebeziumStream struct {
	History    []Change
	Files      []DebeziumFile
	Restarted  int // events the restart sent again
	Purged     int // rows the purge deleted
	Tombstones int
}

// dbzEvent is one change as the connector saw it.
type dbzEvent struct {
	ch     Change
	before *Customer // the row before (updates and deletes), nil when unknown
	tx     int64
	lsn    int64  // postgresql
	file   int    // mysql: binlog file number
	pos    int64  // mysql
	row    int    // mysql
	srcTS  int64  // source.ts_ms: the commit time
	ts     int64  // envelope ts_ms: when the connector processed it
	snap   string // source.snapshot
	toast  bool   // notes unchanged and TOASTed: the placeholder
	toastB bool   // the before image's notes too
}

// GenerateDebezium generates a stream; it depends only on o.
func GenerateDebezium(o DebeziumOptions) DebeziumStream {
	g := &dbzGen{o: o, r: rand.New(rand.NewPCG(o.Seed, 0xdeb)), live: map[int64]*Customer{},
		clock: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC).UnixMicro(), lsn: 24023128, file: 3, pos: 4, tx: 770}
	var st DebeziumStream
	var snap []string
	// The snapshot: every row read at one position.
	g.tick()
	for i := range o.Customers {
		c := g.newCustomer(int64(i + 1))
		ev := g.event(Change{Op: 'r', Row: *c}, nil)
		ev.snap = "true"
		if i == o.Customers-1 {
			ev.snap = "last"
		}
		snap = append(snap, g.render(ev))
		st.History = append(st.History, ev.ch)
	}
	st.Files = append(st.Files, DebeziumFile{Name: "000_snapshot.jsonl", What: "snapshot", Lines: snap})
	g.snapshotDone()

	files := max(o.Files, 2)
	perFile := max(o.Txs/files, 1)
	var lines, pending []string // pending: redeliveries due later
	var recent []*dbzEvent
	flush := func(name string) {
		st.Files = append(st.Files, DebeziumFile{Name: name, What: "stream", Lines: lines})
		lines = nil
	}
	emit := func(ev *dbzEvent) {
		line := g.render(ev)
		lines = append(lines, line)
		if g.r.IntN(100) < 4 { // at-least-once: the same bytes again, a little later
			pending = append(pending, line)
		}
		if len(pending) > 0 && g.r.IntN(100) < 30 {
			lines = append(lines, pending[0])
			pending = pending[1:]
		}
		if ev.ch.Op == 'd' {
			lines = append(lines, "null") // the tombstone a Kafka→file sink writes
			st.Tombstones++
		}
		recent = append(recent, ev)
	}
	file := 1
	for t := range o.Txs {
		if t == o.Txs/2 {
			// The purge: half of the live rows in one transaction (MySQL: one statement).
			flush(fmt.Sprintf("%03d_stream.jsonl", file))
			file++
			ids := g.liveIDs()
			g.begin()
			var purge []string
			stmt := g.pos + 1 // MySQL: one DELETE statement, one rows event, a row per customer
			for i, id := range ids {
				if i%2 == 1 {
					continue
				}
				ev := g.remove(id)
				if o.Connector == "mysql" {
					ev.pos, ev.row = stmt, st.Purged
				}
				purge = append(purge, g.render(ev), "null")
				st.Tombstones++
				st.History = append(st.History, ev.ch)
				st.Purged++
			}
			g.pos += 200
			st.Files = append(st.Files, DebeziumFile{Name: fmt.Sprintf("%03d_purge.jsonl", file), What: "purge", Lines: purge})
			file++
		}
		g.begin()
		for _, ev := range g.transaction() {
			emit(ev)
			st.History = append(st.History, ev.ch)
		}
		if (t+1)%perFile == 0 && t+1 < o.Txs {
			if o.Connector == "mysql" && file == 3 {
				g.file, g.pos = 4, 4 // the binlog rotates: a smaller pos in a later file
			}
			flush(fmt.Sprintf("%03d_stream.jsonl", file))
			file++
		}
		if t == o.Txs/3 {
			// A connector restart: the events since the last offset commit are sent
			// again, same source position, new envelope ts_ms, in a file of their own.
			flush(fmt.Sprintf("%03d_stream.jsonl", file))
			file++
			n := min(len(recent), 12)
			var again []string
			for _, ev := range recent[len(recent)-n:] {
				re := *ev
				re.ts += 90_000
				again = append(again, g.render(&re))
			}
			st.Restarted = n
			st.Files = append(st.Files, DebeziumFile{Name: fmt.Sprintf("%03d_restart.jsonl", file), What: "restart", Lines: again})
			file++
		}
	}
	lines = append(lines, pending...)
	flush(fmt.Sprintf("%03d_stream.jsonl", file))
	return st
}

type dbzGen struct {
	o     DebeziumOptions
	r     *rand.Rand
	live  map[int64]*Customer
	next  int64
	clock int64 // µs
	txTS  int64 // the current transaction's now()
	lsn   int64
	file  int
	pos   int64
	tx    int64
}

var tiers = []string{"bronze", "silver", "gold", "platinum"}

func (g *dbzGen) tick() { g.clock += int64(g.r.IntN(900_000)) + 1000 }

func (g *dbzGen) newCustomer(id int64) *Customer {
	if id > g.next {
		g.next = id
	}
	c := &Customer{ID: id, Name: fmt.Sprintf("Customer %d", id), Balance: int64(g.r.IntN(2_000_000)) - 200_000,
		UpdatedAt: g.clock, Birth: int32(-3000 + g.r.IntN(15000))}
	if g.r.IntN(10) > 0 {
		c.Tier = tiers[g.r.IntN(len(tiers))]
	}
	if g.r.IntN(3) == 0 {
		c.Notes = strings.Repeat(fmt.Sprintf("note %d; ", id), 300) // TOASTed (> 2 kB)
	} else {
		c.Notes = fmt.Sprintf("short note %d", id)
	}
	g.live[id] = c
	return c
}

func (g *dbzGen) liveIDs() []int64 {
	ids := make([]int64, 0, len(g.live))
	for id := int64(1); id <= g.next; id++ {
		if _, ok := g.live[id]; ok {
			ids = append(ids, id)
		}
	}
	return ids
}

func (g *dbzGen) snapshotDone() { g.lsn += 1000; g.pos += 1000 }

// begin starts a transaction: a new id, commit time and now().
func (g *dbzGen) begin() {
	g.tick()
	g.tx++
	g.txTS = g.clock
	g.lsn += int64(g.r.IntN(100)) + 40
	g.pos += int64(g.r.IntN(300)) + 100
}

// event places a change at the next position of the current transaction.
func (g *dbzGen) event(ch Change, before *Customer) *dbzEvent {
	if ch.Op != 'r' { // a snapshot reads every row at one position
		g.lsn += int64(g.r.IntN(300)) + 56
		g.pos += int64(g.r.IntN(400)) + 60
	}
	commitMS := g.txTS / 1000
	return &dbzEvent{ch: ch, before: before, tx: g.tx, lsn: g.lsn, file: g.file, pos: g.pos, srcTS: commitMS,
		ts: commitMS + int64(g.r.IntN(400)) + 5, snap: "false"}
}

func (g *dbzGen) remove(id int64) *dbzEvent {
	old := *g.live[id]
	delete(g.live, id)
	ch := Change{Op: 'd', Row: old}
	if !g.fullBefore() {
		ch.Lacks = "row"
	}
	return g.event(ch, &old)
}

// transaction is one streaming transaction's changes.
func (g *dbzGen) transaction() []*dbzEvent {
	var evs []*dbzEvent
	update := func(id int64) {
		c := g.live[id]
		old := *c
		c.UpdatedAt = g.txTS
		switch g.r.IntN(3) {
		case 0:
			c.Tier = tiers[g.r.IntN(len(tiers))]
		case 1:
			c.Balance += int64(g.r.IntN(100_000)) - 30_000
		default:
			c.Tier, c.Balance = tiers[g.r.IntN(len(tiers))], c.Balance+int64(g.r.IntN(5000))
		}
		ev := g.event(Change{Op: 'u', Row: *c}, &old)
		ev.toast = g.o.Toast && len(c.Notes) > 2000
		ev.toastB = ev.toast
		if ev.toast {
			ev.ch.Lacks = "notes"
		}
		evs = append(evs, ev)
	}
	ids := g.liveIDs()
	pick := func() int64 { return ids[g.r.IntN(len(ids))] }
	for range 1 + g.r.IntN(4) {
		if len(ids) == 0 {
			break
		}
		switch k := g.r.IntN(100); {
		case k < 25: // insert
			c := g.newCustomer(g.next + 1)
			c.UpdatedAt = g.txTS
			evs = append(evs, g.event(Change{Op: 'c', Row: *c}, nil))
			ids = g.liveIDs()
		case k < 65: // update
			update(pick())
		case k < 80: // two updates of one row in one transaction: one now(), one commit ms
			id := pick()
			update(id)
			update(id)
		case k < 90: // delete
			evs = append(evs, g.remove(pick()))
			ids = g.liveIDs()
		default: // delete and insert the key again in one transaction
			id := pick()
			evs = append(evs, g.remove(id))
			c := g.newCustomer(id)
			c.UpdatedAt = g.txTS
			evs = append(evs, g.event(Change{Op: 'c', Row: *c}, nil))
			ids = g.liveIDs()
		}
	}
	return evs
}

// render writes the event as the connector (and the SMT) would.
func (g *dbzGen) render(ev *dbzEvent) string {
	o := g.o
	var b strings.Builder
	if o.Flattened {
		img := ev.ch.Row
		if ev.ch.Op == 'd' && !g.fullBefore() {
			img = Customer{ID: img.ID}
			b.WriteString(g.rowJSON(&img, true, false))
		} else {
			b.WriteString(g.rowJSON(&img, false, ev.toast && ev.ch.Op == 'u'))
		}
		s := strings.TrimSuffix(b.String(), "}")
		b.Reset()
		b.WriteString(s)
		if !o.NoAddFields {
			fmt.Fprintf(&b, `,"__op":"%c"`, ev.ch.Op)
			if o.Connector == "mysql" {
				fmt.Fprintf(&b, `,"__file":"mysql-bin.%06d","__pos":%d,"__row":%d`, ev.file, ev.pos, ev.row)
			} else {
				fmt.Fprintf(&b, `,"__lsn":%d`, ev.lsn)
			}
			fmt.Fprintf(&b, `,"__source_ts_ms":%d,"__ts_ms":%d`, ev.srcTS, ev.ts)
		}
		fmt.Fprintf(&b, `,"__deleted":"%t"}`, ev.ch.Op == 'd')
		return b.String()
	}
	b.WriteString(`{"before":`)
	switch {
	case ev.ch.Op == 'd' && !g.fullBefore():
		fmt.Fprintf(&b, `{"id":%d}`, ev.ch.Row.ID)
	case ev.ch.Op == 'd':
		b.WriteString(g.rowJSON(&ev.ch.Row, false, false))
	case ev.ch.Op == 'u' && g.fullBefore() && ev.before != nil:
		b.WriteString(g.rowJSON(ev.before, false, ev.toastB))
	default:
		b.WriteString("null")
	}
	b.WriteString(`,"after":`)
	if ev.ch.Op == 'd' {
		b.WriteString("null")
	} else {
		b.WriteString(g.rowJSON(&ev.ch.Row, false, ev.toast && ev.ch.Op == 'u'))
	}
	if o.Connector == "mysql" {
		fmt.Fprintf(&b, `,"source":{"version":"2.7.3.Final","connector":"mysql","name":"shop","ts_ms":%d,"snapshot":"%s","db":"shop","sequence":null,"ts_us":%d,"ts_ns":%d,"table":"customers","server_id":223344,"gtid":null,"file":"mysql-bin.%06d","pos":%d,"row":%d,"thread":%s,"query":null}`,
			ev.srcTS, ev.snap, ev.srcTS*1000, ev.srcTS*1000000, ev.file, ev.pos, ev.row, map[bool]string{true: "null", false: "7"}[ev.snap != "false"])
	} else {
		fmt.Fprintf(&b, `,"source":{"version":"2.7.3.Final","connector":"postgresql","name":"shop","ts_ms":%d,"snapshot":"%s","db":"shop","sequence":"[\"%d\",\"%d\"]","ts_us":%d,"ts_ns":%d,"schema":"public","table":"customers","txId":%d,"lsn":%d,"xmin":null}`,
			ev.srcTS, ev.snap, ev.lsn-500, ev.lsn, ev.srcTS*1000, ev.srcTS*1000000, ev.tx, ev.lsn)
	}
	fmt.Fprintf(&b, `,"transaction":null,"op":"%c","ts_ms":%d,"ts_us":%d,"ts_ns":%d}`, ev.ch.Op, ev.ts, ev.ts*1000, ev.ts*1000000)
	return b.String()
}

func (g *dbzGen) fullBefore() bool { return g.o.Connector == "mysql" || g.o.FullIdentity }

// rowJSON writes a row image; keyOnly: only the key (the other columns absent).
func (g *dbzGen) rowJSON(c *Customer, keyOnly, toast bool) string {
	if keyOnly {
		return fmt.Sprintf(`{"id":%d}`, c.ID)
	}
	tier := "null"
	if c.Tier != "" {
		tier = strconv.Quote(c.Tier)
	}
	notes := strconv.Quote(c.Notes)
	if toast {
		notes = `"__debezium_unavailable_value"`
	}
	return fmt.Sprintf(`{"id":%d,"name":%q,"tier":%s,"balance":%s,"updated_at":%d,"birth":%d,"notes":%s}`,
		c.ID, c.Name, tier, g.decimal(c.Balance), c.UpdatedAt, c.Birth, notes)
}

// decimal writes cents as decimal.handling.mode does: precise is the base64 of the
// unscaled value's minimal big-endian two's-complement bytes (Java's
// BigInteger.toByteArray), string its text.
func (g *dbzGen) decimal(cents int64) string {
	if !g.o.Precise {
		sign, a := "", cents
		if a < 0 {
			sign, a = "-", -a
		}
		return fmt.Sprintf(`"%s%d.%02d"`, sign, a/100, a%100)
	}
	return `"` + base64.StdEncoding.EncodeToString(TwosComplement(cents)) + `"`
}

// TwosComplement is v's minimal big-endian two's-complement bytes.
func TwosComplement(v int64) []byte {
	n := 1
	for n < 8 && (v < -(1<<(8*n-1)) || v >= 1<<(8*n-1)) {
		n++
	}
	out := make([]byte, n)
	for i := n - 1; i >= 0; i-- {
		out[i] = byte(v)
		v >>= 8
	}
	return out
}
