package silver

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/cespare/xxhash/v2"
	"github.com/valyala/fastjson"
)

// Debezium change events (docs/silver.md, "Debezium").
//
// An entity with a DebeziumSpec reads each Bronze payload as one Debezium 2.x change
// event, in either of its documented JSON shapes:
//
//   - the envelope {"before", "after", "source": {...}, "op", "ts_ms"}, also wrapped in
//     the JsonConverter's {"schema", "payload"} (schemas.enable=true);
//   - the ExtractNewRecordState form: the row itself, with the metadata add.fields adds
//     (__op, __lsn, __source_ts_ms, ...) and __deleted (delete.handling.mode=rewrite).
//
// The columns are read from the row image: after for c, u and r, before for d (the
// flattened form is the image). The op comes from the event, never from a column. The
// versions of a key are ordered by the connector's position in its log (see
// dbzPosition), not by a clock: a redelivered event (same key and position) is a
// duplicate whatever its envelope ts_ms. An entity that sets UpdatedAt (a flattened
// stream without positions) is ordered by that column instead, as any other entity.
//
// Tombstones (a null value: an empty payload or the JSON null) are skipped and counted
// (Counts.Skipped): never quarantined, never in the quarantine gate's ratio.

// DebeziumSpec reads an entity's payloads as Debezium change events.
type DebeziumSpec struct {
	// Connector is postgresql, mysql or sqlserver: which source fields are the position.
	Connector string
	// DecimalHandling is the connector's decimal.handling.mode: precise (its default:
	// a decimal column's JSON string is the base64 of the unscaled value, at the
	// column's declared scale), string or double (the text or number is read as is).
	DecimalHandling string
}

// Debezium connectors and decimal handling modes.
const (
	ConnectorPostgres  = "postgresql"
	ConnectorMySQL     = "mysql"
	ConnectorSQLServer = "sqlserver"

	DecimalPrecise = "precise"
	DecimalString  = "string"
	DecimalDouble  = "double"
)

// DebeziumConnectors are the connectors whose positions Silver orders by.
var DebeziumConnectors = []string{ConnectorPostgres, ConnectorMySQL, ConnectorSQLServer}

// DebeziumDecimalModes are the decimal.handling.mode values Silver reads.
var DebeziumDecimalModes = []string{DecimalPrecise, DecimalString, DecimalDouble}

// Columns a Debezium entity ordered by position adds to its Silver table (after the
// entity's and the rules' columns): the position of the stored version, high and low
// word (see dbzPosition), read back to order later events against it; and the columns
// the stored version lacks with the position of the version whose value the row holds
// (debezium_toast.go), NULL when it lacks none.
const (
	ColCDCPosition = "_cdc_position"
	ColCDCSequence = "_cdc_sequence"
	ColCDCCarried  = "_cdc_carried"
)

var debeziumPositionCols = []ColumnSpec{
	{Name: ColCDCPosition, Type: Type{Kind: Int64}},
	{Name: ColCDCSequence, Type: Type{Kind: Int64}},
	{Name: ColCDCCarried, Type: Type{Kind: String}},
}

// UnavailableValue is Debezium's default unavailable.value.placeholder: the value of a
// column the event does not carry (an unchanged TOASTed column of a Postgres update).
const UnavailableValue = "__debezium_unavailable_value"

// unavailableBase64 is the placeholder as a binary column carries it.
var unavailableBase64 = base64.StdEncoding.EncodeToString([]byte(UnavailableValue))

// reasonSkipped marks, in chunk.reason, a Bronze row that is skipped (a tombstone):
// neither quarantined nor offered to the winners.
const reasonSkipped = "\x00skipped"

// dbzEvent is what the decoder reads besides the columns.
type dbzEvent struct {
	op        byte // c, u, d or r
	tombstone bool
	hasPos    bool
	hi, lo    uint64 // the position (see dbzPosition)
	// unavailable lists the columns (indexes into the declared columns) whose value
	// the event does not carry: they keep the value stored before (docs/silver.md).
	unavailable []int
}

// dbzParser types Debezium change events; like parser it is not safe for concurrent
// use (it is one).
type dbzParser struct {
	*parser
	spec       DebeziumSpec
	byPosition bool // the entity is ordered by the position (no updated_at)
	ev         dbzEvent
	b64        []byte
}

func newDbzParser(cols []ColumnSpec, spec DebeziumSpec, byPosition bool) (*dbzParser, error) {
	ps, err := newParser(cols)
	if err != nil {
		return nil, err
	}
	if err := spec.check(); err != nil {
		return nil, err
	}
	return &dbzParser{parser: ps, spec: spec, byPosition: byPosition}, nil
}

// check validates the spec (the config does it with paths first).
func (s DebeziumSpec) check() error {
	switch s.Connector {
	case ConnectorPostgres, ConnectorMySQL, ConnectorSQLServer:
	default:
		return fmt.Errorf("debezium connector %q: want one of %s", s.Connector, strings.Join(DebeziumConnectors, ", "))
	}
	switch s.DecimalHandling {
	case "", DecimalPrecise, DecimalString, DecimalDouble:
	default:
		return fmt.Errorf("debezium decimal_handling %q: want one of %s", s.DecimalHandling, strings.Join(DebeziumDecimalModes, ", "))
	}
	return nil
}

// parse reads one change event into row (the declared columns) and returns the event,
// or the quarantine reason. The event's unavailable slice is reused by the next call.
func (d *dbzParser) parse(payload []byte, row []Value) (*dbzEvent, string) {
	ev := &d.ev
	*ev = dbzEvent{unavailable: ev.unavailable[:0]}
	if len(payload) > MaxPayloadBytes {
		return ev, payloadTooLarge
	}
	t := bytes.TrimSpace(payload)
	if len(t) == 0 || string(t) == "null" {
		ev.tombstone = true
		return ev, ""
	}
	if t[0] != '{' {
		return ev, "invalid_json: not a JSON object"
	}
	doc, err := d.p.ParseBytes(t)
	if err != nil {
		if strings.Contains(err.Error(), "too big depth") {
			return ev, payloadDepthReason
		}
		return ev, "invalid_json: " + firstLine(err.Error())
	}
	if doc.Type() != fastjson.TypeObject {
		return ev, "invalid_json: not a JSON object"
	}
	v := doc
	if p := v.Get("payload"); p != nil && v.Exists("schema") {
		// JsonConverter with schemas.enable=true: {"schema": ..., "payload": event}.
		switch p.Type() {
		case fastjson.TypeNull:
			ev.tombstone = true
			return ev, ""
		case fastjson.TypeObject:
			v = p
		default:
			return ev, "invalid_envelope: payload is not an object"
		}
	}
	var (
		image  *fastjson.Value
		reason string
	)
	src := v.Get("source")
	flat := src == nil || src.Type() != fastjson.TypeObject || !v.Exists("op")
	if flat {
		image, reason = d.flattened(v)
	} else {
		image, reason = d.envelope(v, src)
	}
	if reason != "" {
		return ev, reason
	}
	if d.byPosition && !ev.hasPos {
		return ev, "missing_position: " + d.positionFields()
	}
	reason, present := d.columns(image, row)
	if d.tally != nil { // the row's fields, not the envelope's or add.fields' (drift.go)
		d.noteFields(image.GetObject(), present, flat)
	}
	return ev, reason
}

// envelope reads the op, the image and the position of an envelope.
func (d *dbzParser) envelope(v, src *fastjson.Value) (*fastjson.Value, string) {
	ev := &d.ev
	opv := v.Get("op")
	if opv.Type() != fastjson.TypeString {
		return nil, "invalid_op: not a string"
	}
	op := opv.GetStringBytes()
	var image *fastjson.Value
	switch string(op) {
	case "c", "u", "r":
		ev.op, image = op[0], v.Get("after")
	case "d":
		ev.op, image = 'd', v.Get("before")
	case "t":
		return nil, "invalid_op: t (a truncate names no key: not applied)"
	default:
		return nil, "invalid_op: " + clip(string(op))
	}
	if image == nil || image.Type() != fastjson.TypeObject {
		side := "after"
		if ev.op == 'd' {
			side = "before"
		}
		return nil, fmt.Sprintf("invalid_envelope: op %c without %s", ev.op, side)
	}
	if c := src.Get("connector"); c != nil && c.Type() == fastjson.TypeString && string(c.GetStringBytes()) != d.spec.Connector {
		return nil, fmt.Sprintf("invalid_envelope: source.connector %q, the entity reads %s", clip(string(c.GetStringBytes())), d.spec.Connector)
	}
	if r := d.position(func(name string) *fastjson.Value { return src.Get(name) }); r != "" {
		return nil, r
	}
	return image, ""
}

// flattened reads the op and the position of an ExtractNewRecordState record: __op
// (add.fields=op), __deleted (delete.handling.mode=rewrite; "true" is a delete), and
// the position fields as add.fields names them (__lsn, or __source_lsn when written
// source.lsn).
func (d *dbzParser) flattened(v *fastjson.Value) (*fastjson.Value, string) {
	ev := &d.ev
	ev.op = 'u' // without __op: an upsert
	if opv := v.Get("__op"); opv != nil && opv.Type() != fastjson.TypeNull {
		if opv.Type() != fastjson.TypeString {
			return nil, "invalid_op: __op is not a string"
		}
		switch op := string(opv.GetStringBytes()); op {
		case "c", "u", "r", "d":
			ev.op = op[0]
		case "t":
			return nil, "invalid_op: t (a truncate names no key: not applied)"
		default:
			return nil, "invalid_op: " + clip(op)
		}
	}
	if del := v.Get("__deleted"); del != nil {
		switch del.Type() {
		case fastjson.TypeTrue:
			ev.op = 'd'
		case fastjson.TypeString:
			if s := string(del.GetStringBytes()); s == "true" {
				ev.op = 'd'
			} else if s != "false" {
				return nil, "invalid_envelope: __deleted " + strconv.Quote(clip(s))
			}
		case fastjson.TypeFalse, fastjson.TypeNull:
		default:
			return nil, "invalid_envelope: __deleted is not a boolean"
		}
	}
	if r := d.position(func(name string) *fastjson.Value {
		if f := v.Get("__" + name); f != nil {
			return f
		}
		return v.Get("__source_" + name)
	}); r != "" {
		return nil, r
	}
	return v, ""
}

// positionFields names the source fields of the connector's position.
func (d *dbzParser) positionFields() string {
	switch d.spec.Connector {
	case ConnectorMySQL:
		return "file, pos (source or add.fields)"
	case ConnectorSQLServer:
		return "change_lsn or commit_lsn (source or add.fields)"
	}
	return "lsn (source or add.fields)"
}

// maxPositionHi bounds the high word: it is stored in a long and compared as one.
const maxPositionHi = math.MaxInt64

// position reads the connector's position through get into d.ev (hasPos false when
// the fields are absent); a present but malformed field is the returned reason.
//
// The position is a pair of words (hi, lo) compared as one 128-bit number:
//
//   - postgresql: (lsn, 0). Each change of a transaction has its own LSN, and the
//     changes of one row are serialised by its lock, so their LSNs follow commit order.
//   - mysql: (n<<40 | pos, row), n the number of the binlog file (mysql-bin.000003: 3),
//     pos the event's offset in it, row the row within a multi-row event.
//   - sqlserver: the change_lsn (commit_lsn for a snapshot read, which has none) as its
//     80 bits (hi: the VLF and block, lo's top 16 bits: the slot), then the low 48 bits
//     of lo: event_serial_no.
func (d *dbzParser) position(get func(string) *fastjson.Value) string {
	ev := &d.ev
	present := func(v *fastjson.Value) bool { return v != nil && v.Type() != fastjson.TypeNull }
	switch d.spec.Connector {
	case ConnectorPostgres:
		f := get("lsn")
		if !present(f) {
			return ""
		}
		lsn, ok := jsonUint(f)
		if !ok || lsn > maxPositionHi {
			return "invalid_position: lsn " + clip(f.String())
		}
		ev.hi, ev.lo, ev.hasPos = lsn, 0, true
	case ConnectorMySQL:
		file, pos := get("file"), get("pos")
		if !present(file) || !present(pos) {
			return ""
		}
		if file.Type() != fastjson.TypeString {
			return "invalid_position: file is not a string"
		}
		name := string(file.GetStringBytes())
		dot := strings.LastIndexByte(name, '.')
		n, err := strconv.ParseUint(name[dot+1:], 10, 64)
		if dot < 0 || err != nil || n >= 1<<23 {
			return "invalid_position: file " + strconv.Quote(clip(name))
		}
		p, ok := jsonUint(pos)
		if !ok || p >= 1<<40 {
			return "invalid_position: pos " + clip(pos.String())
		}
		var row uint64
		if r := get("row"); present(r) {
			if row, ok = jsonUint(r); !ok {
				return "invalid_position: row " + clip(r.String())
			}
		}
		ev.hi, ev.lo, ev.hasPos = n<<40|p, row, true
	case ConnectorSQLServer:
		f := get("change_lsn")
		if !present(f) {
			f = get("commit_lsn")
		}
		if !present(f) {
			return ""
		}
		hi, slot, ok := sqlServerLSN(f)
		if !ok || hi > maxPositionHi {
			return "invalid_position: lsn " + clip(f.String())
		}
		var serial uint64
		if s := get("event_serial_no"); present(s) {
			if serial, ok = jsonUint(s); !ok || serial >= 1<<48 {
				return "invalid_position: event_serial_no " + clip(s.String())
			}
		}
		ev.hi, ev.lo, ev.hasPos = hi, uint64(slot)<<48|serial, true
	}
	return ""
}

// sqlServerLSN reads an LSN as Debezium writes it, "0000002a:00000b18:0003" (VLF
// sequence, log block, slot; hex).
func sqlServerLSN(v *fastjson.Value) (hi uint64, slot uint16, ok bool) {
	if v.Type() != fastjson.TypeString {
		return 0, 0, false
	}
	parts := strings.Split(string(v.GetStringBytes()), ":")
	if len(parts) != 3 || len(parts[0]) > 8 || len(parts[1]) > 8 || len(parts[2]) > 4 {
		return 0, 0, false
	}
	vlf, e1 := strconv.ParseUint(parts[0], 16, 32)
	blk, e2 := strconv.ParseUint(parts[1], 16, 32)
	sl, e3 := strconv.ParseUint(parts[2], 16, 16)
	if e1 != nil || e2 != nil || e3 != nil {
		return 0, 0, false
	}
	return vlf<<32 | blk, uint16(sl), true
}

// jsonUint reads a non-negative integer written as a JSON number or a numeric string.
func jsonUint(v *fastjson.Value) (uint64, bool) {
	var s string
	switch v.Type() {
	case fastjson.TypeNumber:
		s = v.String()
	case fastjson.TypeString:
		s = string(v.GetStringBytes())
	default:
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// columns types the declared columns from the row image; present is as parser.columns'.
func (d *dbzParser) columns(image *fastjson.Value, row []Value) (reason string, present int) {
	ev := &d.ev
	for i := range d.cols {
		c := &d.cols[i]
		v := image.Get(d.paths[i]...)
		if v != nil && d.topCol[i] {
			present++
		}
		if v != nil && v.Type() == fastjson.TypeString {
			if s := v.GetStringBytes(); string(s) == UnavailableValue || string(s) == unavailableBase64 {
				ev.unavailable = append(ev.unavailable, i)
				row[i] = Value{Null: true}
				continue
			}
		}
		if v == nil || v.Type() == fastjson.TypeNull {
			switch {
			case ev.op == 'd':
				// A delete's before image lacks what REPLICA IDENTITY DEFAULT does not
				// log: the deleted row keeps the values it had (debezium_toast.go).
				ev.unavailable = append(ev.unavailable, i)
				row[i] = Value{Null: true}
			case d.hasDf[i]:
				row[i] = d.defs[i]
			case c.Required:
				return "missing_" + c.Name, -1
			default:
				row[i] = Value{Null: true}
			}
			continue
		}
		val, err := d.convert(c, v)
		if err != nil {
			return "invalid_" + c.Name + ": " + err.Error(), -1
		}
		row[i] = val
	}
	return "", present
}

// convert types one value as the connector writes it: decimals as decimal_handling
// says, and Debezium's VariableScaleDecimal struct {"scale", "value"}; everything else
// as any payload's (epoch formats read io.debezium.time values: docs/silver.md).
func (d *dbzParser) convert(c *ColumnSpec, v *fastjson.Value) (Value, error) {
	if c.Type.Kind == Decimal {
		switch {
		case v.Type() == fastjson.TypeObject:
			sc, val := v.Get("scale"), v.Get("value")
			if sc == nil || val == nil || sc.Type() != fastjson.TypeNumber || val.Type() != fastjson.TypeString {
				return Value{}, errors.New("not a Debezium variable-scale decimal {scale, value}")
			}
			scale, err := strconv.Atoi(sc.String())
			if err != nil || scale < -maxDbzScale || scale > maxDbzScale {
				return Value{}, fmt.Errorf("decimal scale %s out of range", clip(sc.String()))
			}
			return d.precise(c, val.GetStringBytes(), scale)
		case v.Type() == fastjson.TypeString && d.spec.DecimalHandling != DecimalString && d.spec.DecimalHandling != DecimalDouble:
			return d.precise(c, v.GetStringBytes(), c.Type.Scale)
		}
	}
	return d.parser.convert(c, v)
}

// maxDbzScale bounds the scale of a variable-scale decimal (a decimal128 has 38 digits).
const maxDbzScale = 76

// maxDbzDecimalBytes bounds the unscaled bytes of a precise decimal: 38 digits fit in
// 16 bytes; a few more leave room for a value that rounds into range.
const maxDbzDecimalBytes = 32

// precise reads a base64 big-endian two's-complement unscaled value at scale into the
// column's decimal(p,s), rounding half away from zero when s is smaller.
func (d *dbzParser) precise(c *ColumnSpec, b64 []byte, scale int) (Value, error) {
	bad := func() (Value, error) {
		return Value{}, fmt.Errorf("not a precise decimal (base64 unscaled bytes; set decimal_handling for text) %q", clip(string(b64)))
	}
	if len(b64) == 0 || base64.StdEncoding.DecodedLen(len(b64)) > maxDbzDecimalBytes+2 || !utf8.Valid(b64) {
		return bad()
	}
	raw := d.b64[:cap(d.b64)]
	if len(raw) < base64.StdEncoding.DecodedLen(len(b64)) {
		raw = make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
	}
	n, err := base64.StdEncoding.Decode(raw, b64)
	d.b64 = raw
	if err != nil || n == 0 || n > maxDbzDecimalBytes {
		return bad()
	}
	raw = raw[:n]
	prec := int32(c.Type.Precision)
	if scale == c.Type.Scale && n <= 8 {
		var buf [8]byte
		if raw[0]&0x80 != 0 {
			buf = [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		}
		copy(buf[8-n:], raw)
		num := decimal128.FromI64(int64(binary.BigEndian.Uint64(buf[:])))
		if !num.FitsInPrecision(prec) {
			return Value{}, fmt.Errorf("%s does not fit decimal(%d,%d)", num.ToString(int32(scale)), c.Type.Precision, c.Type.Scale)
		}
		return Value{D: num}, nil
	}
	// The general path: any length and scale, through big.Int (bounded by the limits).
	u := new(big.Int).SetBytes(raw)
	if raw[0]&0x80 != 0 {
		u.Sub(u, new(big.Int).Lsh(big.NewInt(1), uint(8*n)))
	}
	shown := func() string { return new(big.Float).SetInt(u).Text('g', 40) }
	switch diff := c.Type.Scale - scale; {
	case diff > 0:
		u.Mul(u, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(diff)), nil))
	case diff < 0:
		div := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-diff)), nil)
		q, r := new(big.Int).QuoRem(u, div, new(big.Int))
		if r.Sign() != 0 && new(big.Int).Lsh(new(big.Int).Abs(r), 1).Cmp(div) >= 0 {
			q.Add(q, big.NewInt(int64(u.Sign())))
		}
		u = q
	}
	if u.BitLen() > 127 {
		return Value{}, fmt.Errorf("%s (scale %d) does not fit decimal(%d,%d)", shown(), scale, c.Type.Precision, c.Type.Scale)
	}
	num := decimal128.FromBigInt(u)
	if !num.FitsInPrecision(prec) {
		return Value{}, fmt.Errorf("%s does not fit decimal(%d,%d)", num.ToString(int32(c.Type.Scale)), c.Type.Precision, c.Type.Scale)
	}
	return Value{D: num}, nil
}

// dbzHash is the version hash of a Debezium event ordered by position: the key and
// the position, so a redelivery (the same event, whatever its envelope ts_ms) is a
// duplicate, and events of different keys never share one.
func dbzHash(key string, hi, lo uint64) uint64 {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	d := xxhash.New()
	_, _ = d.WriteString(key)
	_, _ = d.Write([]byte{0x1f})
	_, _ = d.Write(b[:])
	return d.Sum64()
}

// dbzRowHash is the version hash of a Debezium event ordered by updated_at: the typed
// columns and the op, so an event sent again with other metadata (a connector
// restart's new ts_ms) is a duplicate.
func dbzRowHash(buf []byte, row []Value, cols []ColumnSpec, op byte) ([]byte, uint64) {
	buf = append(buf[:0], op)
	for i, c := range cols {
		buf = append(buf, 0x1f)
		if row[i].Null {
			buf = append(buf, 0)
			continue
		}
		if c.Type.Kind == Float64 {
			buf = strconv.AppendUint(buf, math.Float64bits(row[i].F), 16)
			continue
		}
		buf = appendKeyText(buf, row[i], c.Type)
	}
	return buf, xxhash.Sum64(buf)
}

// applyToDelete runs the rules on a Debezium delete: the normalisations and derives (a
// key may be derived), not the filters. A delete removes the row whatever its values,
// and a key-only delete (REPLICA IDENTITY DEFAULT) has none but the key.
func (r *ruleSet) applyToDelete(row []Value) string {
	r.noFilters = true
	defer func() { r.noFilters = false }()
	return r.apply(row)
}

// checkDelete is the row-level check of a Debezium delete written to Silver: only the
// key and the position must be set (see applyToDelete).
func (e *engine) checkDelete(row []Value, t *rowTally) {
	for _, i := range append(e.keyIdx[:len(e.keyIdx):len(e.keyIdx)], e.uaIdx) {
		if row[i].Null {
			t.addNull(e.cols[i].Name)
		}
	}
}
