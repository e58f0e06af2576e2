package silver

import (
	"encoding/base64"
	"math/big"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"

	"goldbridge/demo"
)

func dbzTestParser(t testing.TB, connector, decimals string, byPosition bool) (*dbzParser, []ColumnSpec) {
	t.Helper()
	cols := customersSpec(connector, decimals).Columns
	d, err := newDbzParser(cols, DebeziumSpec{Connector: connector, DecimalHandling: decimals}, byPosition)
	if err != nil {
		t.Fatal(err)
	}
	return d, cols
}

// TestDebeziumDecode covers each shape, op, position and malformed envelope: the event
// read, or the quarantine reason.
func TestDebeziumDecode(t *testing.T) {
	pgSrc := `"source":{"connector":"postgresql","ts_ms":1,"txId":9,"lsn":%LSN%}`
	env := func(op, before, after, lsn string) string {
		return `{"before":` + before + `,"after":` + after + `,` + strings.ReplaceAll(pgSrc, "%LSN%", lsn) + `,"op":"` + op + `","ts_ms":5}`
	}
	row := `{"id":7,"name":"Ann","tier":"gold","balance":"Av1L","updated_at":1700000000123456,"birth":19000,"notes":"x"}`
	for _, tc := range []struct {
		name, conn, payload string
		op                  byte
		hi, lo              uint64
		reason              string // "" ok, "tombstone", or the reason's prefix
		check               func(t *testing.T, row []Value)
	}{
		{name: "create", conn: "postgresql", payload: env("c", "null", row, "100"), op: 'c', hi: 100, check: func(t *testing.T, r []Value) {
			if r[0].I != 7 || r[1].S != "Ann" || r[3].D != decimal128.FromI64(195915) || r[4].I != 1700000000123456 || r[5].I != 19000 {
				t.Errorf("row %+v", r)
			}
		}},
		{name: "key-only delete", conn: "postgresql", payload: env("d", `{"id":7}`, "null", "101"), op: 'd', hi: 101, check: func(t *testing.T, r []Value) {
			if r[0].I != 7 || !r[1].Null {
				t.Errorf("row %+v", r)
			}
		}},
		{name: "schema wrapper", conn: "postgresql", payload: `{"schema":{"type":"struct"},"payload":` + env("u", "null", row, "102") + `}`, op: 'u', hi: 102},
		{name: "wrapped tombstone", conn: "postgresql", payload: `{"schema":null,"payload":null}`, reason: "tombstone"},
		{name: "null line", conn: "postgresql", payload: ` null `, reason: "tombstone"},
		{name: "empty", conn: "postgresql", payload: ``, reason: "tombstone"},
		{name: "snapshot read", conn: "postgresql", payload: env("r", "null", row, `"103"`), op: 'r', hi: 103},
		{name: "truncate", conn: "postgresql", payload: env("t", "null", "null", "1"), reason: "invalid_op: t"},
		{name: "unknown op", conn: "postgresql", payload: env("x", "null", row, "1"), reason: "invalid_op: x"},
		{name: "delete without before", conn: "postgresql", payload: env("d", "null", "null", "1"), reason: "invalid_envelope: op d without before"},
		{name: "update without after", conn: "postgresql", payload: env("u", "null", "null", "1"), reason: "invalid_envelope: op u without after"},
		{name: "other connector", conn: "mysql", payload: env("c", "null", row, "1"), reason: "invalid_envelope: source.connector"},
		{name: "no position", conn: "postgresql", payload: strings.Replace(env("c", "null", row, "1"), `"lsn":1`, `"lsn":null`, 1), reason: "missing_position"},
		{name: "bad position", conn: "postgresql", payload: env("c", "null", row, `-4`), reason: "invalid_position: lsn"},
		{name: "required name missing", conn: "postgresql", payload: env("c", "null", `{"id":7}`, "1"), reason: "missing_name"},
		{name: "precise is not text", conn: "postgresql", payload: env("c", "null", strings.Replace(row, `"Av1L"`, `"12.5!"`, 1), "1"), reason: "invalid_balance: not a precise decimal"},
		{name: "variable scale", conn: "postgresql", payload: env("c", "null", strings.Replace(row, `"Av1L"`, `{"scale":3,"value":"Av1L"}`, 1), "1"), op: 'c', hi: 1, check: func(t *testing.T, r []Value) {
			if r[3].D != decimal128.FromI64(19592) { // 195.915 rounds half away from zero to 195.92
				t.Errorf("balance %v", r[3].D.ToString(2))
			}
		}},
		{name: "unavailable", conn: "postgresql", payload: env("u", "null", strings.Replace(row, `"x"`, `"__debezium_unavailable_value"`, 1), "1"), op: 'u', hi: 1, check: func(t *testing.T, r []Value) {
			if !r[6].Null {
				t.Errorf("notes %+v", r[6])
			}
		}},
		{name: "flattened", conn: "postgresql", payload: strings.TrimSuffix(row, "}") + `,"__op":"u","__lsn":55,"__source_ts_ms":1,"__deleted":"false"}`, op: 'u', hi: 55},
		{name: "flattened delete", conn: "postgresql", payload: `{"id":7,"name":null,"__op":"d","__source_lsn":56,"__deleted":"true"}`, op: 'd', hi: 56},
		{name: "flattened rewrite only", conn: "postgresql", payload: `{"id":7,"__deleted":true,"__lsn":57}`, op: 'd', hi: 57},
		{name: "flattened bad deleted", conn: "postgresql", payload: `{"id":7,"__deleted":"maybe","__lsn":57}`, reason: "invalid_envelope: __deleted"},
		{name: "mysql", conn: "mysql", payload: `{"before":null,"after":` + row + `,"source":{"connector":"mysql","file":"mysql-bin.000012","pos":4015,"row":3},"op":"c"}`, op: 'c', hi: 12<<40 | 4015, lo: 3},
		{name: "mysql bad file", conn: "mysql", payload: `{"before":null,"after":` + row + `,"source":{"file":"binlog","pos":4015},"op":"c"}`, reason: "invalid_position: file"},
		{name: "sqlserver", conn: "sqlserver", payload: `{"before":null,"after":` + row + `,"source":{"connector":"sqlserver","change_lsn":"0000002a:00000b18:0003","commit_lsn":"0000002a:00000b20:0001","event_serial_no":2},"op":"u"}`,
			op: 'u', hi: 0x2a<<32 | 0xb18, lo: 3<<48 | 2},
		{name: "sqlserver snapshot", conn: "sqlserver", payload: `{"before":null,"after":` + row + `,"source":{"change_lsn":null,"commit_lsn":"0000002a:00000b20:0001"},"op":"r"}`, op: 'r', hi: 0x2a<<32 | 0xb20, lo: 1 << 48},
		{name: "not an object", conn: "postgresql", payload: `[1]`, reason: "invalid_json"},
		{name: "broken", conn: "postgresql", payload: `{"before":`, reason: "invalid_json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, cols := dbzTestParser(t, tc.conn, DecimalPrecise, true)
			row := make([]Value, len(cols))
			ev, reason := d.parse([]byte(tc.payload), row)
			switch {
			case tc.reason == "tombstone":
				if !ev.tombstone || reason != "" {
					t.Errorf("want a tombstone, got %+v %q", ev, reason)
				}
			case tc.reason != "":
				if !strings.HasPrefix(reason, tc.reason) {
					t.Errorf("reason %q, want %q…", reason, tc.reason)
				}
			case reason != "" || ev.tombstone:
				t.Errorf("reason %q tombstone %v", reason, ev.tombstone)
			default:
				if ev.op != tc.op || ev.hi != tc.hi || ev.lo != tc.lo {
					t.Errorf("op %c pos (%d, %d), want %c (%d, %d)", ev.op, ev.hi, ev.lo, tc.op, tc.hi, tc.lo)
				}
				if tc.check != nil {
					tc.check(t, row)
				}
			}
		})
	}
}

// TestPreciseDecimals compares the precise decoder with math/big on random values and
// scales: the generator's encoding (Java's BigInteger.toByteArray) read back exactly,
// rescaled half away from zero, refused when out of the precision.
func TestPreciseDecimals(t *testing.T) {
	d, _ := dbzTestParser(t, "postgresql", DecimalPrecise, true)
	col := ColumnSpec{Name: "v", Type: Type{Kind: Decimal, Precision: 12, Scale: 2}}
	for i := range 20000 {
		v := int64(uint64(i)*0x9e3779b97f4a7c15>>uint(i%64)) * []int64{1, -1}[i%2]
		scale := i % 6
		b64 := base64.StdEncoding.EncodeToString(demo.TwosComplement(v))
		got, err := d.precise(&col, []byte(b64), scale)
		// The oracle: v / 10^scale, rounded half away from zero to 2 decimals.
		r := new(big.Rat).SetFrac(big.NewInt(v), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil))
		r.Mul(r, big.NewRat(100, 1))
		q, rem := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
		if new(big.Int).Lsh(new(big.Int).Abs(rem), 1).Cmp(r.Denom()) >= 0 {
			q.Add(q, big.NewInt(int64(r.Sign())))
		}
		fits := new(big.Int).Abs(q).Cmp(new(big.Int).Exp(big.NewInt(10), big.NewInt(12), nil)) < 0
		switch {
		case fits && err != nil:
			t.Fatalf("%d scale %d: %v", v, scale, err)
		case !fits && err == nil:
			t.Fatalf("%d scale %d: %s fits no decimal(12,2)", v, scale, got.D.ToString(2))
		case fits && got.D.BigInt().Cmp(q) != 0:
			t.Fatalf("%d scale %d: %s, want %s", v, scale, got.D.BigInt(), q)
		}
	}
}

// TestEpochFormats reads Debezium's io.debezium.time values exactly.
func TestEpochFormats(t *testing.T) {
	for _, tc := range []struct {
		format, in string
		kind       Kind
		want       int64
	}{
		{"epoch_ns", "1700000000123456789", Timestamp, 1700000000123457},
		{"epoch_ns", "-1500", Timestamp, -2},
		{"epoch_us", "1700000000123456", Timestamp, 1700000000123456},
		{"epoch_ms", "1700000000123", Timestamp, 1700000000123000},
		{"epoch_days", "19000", Date, 19000},
		{"epoch_days", "-3000", Date, -3000},
		{"epoch_days", "19000", Timestamp, 19000 * 86400e6},
	} {
		v, err := convertString(&ColumnSpec{Name: "c", Type: Type{Kind: tc.kind}, Format: tc.format}, tc.in)
		if err != nil || v.I != tc.want {
			t.Errorf("%s %s: %v %v, want %d", tc.format, tc.in, v.I, err, tc.want)
		}
	}
	if _, err := convertString(&ColumnSpec{Name: "c", Type: Type{Kind: Date}, Format: "epoch_days"}, "99999999999999"); err == nil {
		t.Error("epoch_days out of range was read")
	}
}
