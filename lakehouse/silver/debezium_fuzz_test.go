package silver

import (
	"testing"
)

// FuzzDebeziumEvent feeds the Debezium decoder arbitrary payloads for each connector and
// decimal mode: it never panics, and what it reads is consistent: a tombstone has no
// reason, an event read has a canonical op and (ordered by position) a position whose
// high word fits a long, a delete aside every required column is set, every decimal fits
// its precision.
func FuzzDebeziumEvent(f *testing.F) {
	row := `{"id":7,"name":"Ann","tier":"gold","balance":"Av1L","updated_at":1700000000123456,"birth":19000,"notes":"x"}`
	for _, s := range []string{
		`{"before":null,"after":` + row + `,"source":{"connector":"postgresql","lsn":100,"txId":3},"op":"c","ts_ms":5}`,
		`{"before":{"id":7},"after":null,"source":{"lsn":"101"},"op":"d"}`,
		`{"schema":{},"payload":{"before":null,"after":` + row + `,"source":{"file":"mysql-bin.000003","pos":4,"row":1},"op":"u"}}`,
		`{"before":null,"after":` + row + `,"source":{"change_lsn":"0000002a:00000b18:0003","event_serial_no":2},"op":"u"}`,
		`{"id":7,"name":"A","balance":{"scale":40,"value":"/////w=="},"__op":"u","__lsn":5,"__deleted":"false"}`,
		`{"id":7,"__deleted":true,"__file":"b.000001","__pos":1}`,
		`null`, ``, `{"payload":null,"schema":1}`, `{"op":"t","source":{}}`,
	} {
		f.Add([]byte(s), uint8(0))
	}
	conns := []string{ConnectorPostgres, ConnectorMySQL, ConnectorSQLServer}
	decs := []string{DecimalPrecise, DecimalString, DecimalDouble}
	f.Fuzz(func(t *testing.T, payload []byte, mode uint8) {
		conn, dec, byPos := conns[int(mode)%3], decs[int(mode/3)%3], mode&0x80 == 0
		d, cols := dbzTestParser(t, conn, dec, byPos)
		row := make([]Value, len(cols))
		ev, reason := d.parse(payload, row)
		if ev.tombstone {
			if reason != "" {
				t.Fatalf("a tombstone with a reason %q", reason)
			}
			return
		}
		if reason != "" {
			return
		}
		switch ev.op {
		case 'c', 'u', 'd', 'r':
		default:
			t.Fatalf("op %q", ev.op)
		}
		if byPos && (!ev.hasPos || ev.hi > maxPositionHi) {
			t.Fatalf("position %+v", ev)
		}
		for i, c := range cols {
			v := row[i]
			if c.Required && ev.op != 'd' && v.Null {
				t.Fatalf("required %s is NULL", c.Name)
			}
			if c.Type.Kind == Decimal && !v.Null && !v.D.FitsInPrecision(int32(c.Type.Precision)) {
				t.Fatalf("%s = %s does not fit", c.Name, v.D.ToString(int32(c.Type.Scale)))
			}
		}
	})
}
