package silver

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"testing"
	"time"
)

// oracleHash is the documented form of hash(), written out by hand.
func oracleHash(canonical string) string {
	s := sha256.Sum256([]byte(canonical))
	return hex.EncodeToString(s[:16])
}

// TestRuleHash is issue 19's "Why" 1 (part): a key can be derived with hash(), whose text
// form is the documented one and which tells NULL from "".
func TestRuleHash(t *testing.T) {
	rs, extra := mustCompile(t, []RuleSpec{{ID: "E0", Kind: "derive", Column: "k", Type: "string",
		Expr: "hash(order_id, amount, country, qty, created_at)"}}, nil)
	if len(extra) != 1 || extra[0].Name != "k" {
		t.Fatalf("extra %v", extra)
	}
	k := len(ruleCols)
	for _, tc := range []struct {
		cells     []string
		canonical string
	}{
		{[]string{"o1", "10.50", "DE", "", "3", "2024-01-02T03:04:05.123Z"},
			"2:o1,4:10.5,2:DE,1:3,30:2024-01-02T03:04:05.123000000Z"},
		{[]string{"o1", "<null>", "", "", "<null>", "2024-01-02T05:04:05+02:00"},
			"2:o1,-,0:,-,30:2024-01-02T03:04:05.000000000Z"},
		{[]string{"o1", "-0.1", "<null>", "", "-7", "<null>"}, "2:o1,4:-0.1,-,2:-7,-"},
	} {
		row := ruleRow(t, 1, tc.cells...)
		if r := rs.apply(row); r != "" {
			t.Fatalf("%v: quarantined %s", tc.cells, r)
		}
		if got, want := row[k].S, oracleHash(tc.canonical); got != want || row[k].Null {
			t.Errorf("%v: hash %q (null %v), want %q = digest of %q", tc.cells, got, row[k].Null, want, tc.canonical)
		}
	}
	// NULL and "" differ; so do shifted boundaries.
	a, _ := ruleHash(nil)
	b, _ := ruleHash("")
	c, _ := ruleHash("ab", "c")
	d, _ := ruleHash("a", "bc")
	if a == b || c == d {
		t.Errorf("hash(nil)=%v hash(\"\")=%v hash(ab,c)=%v hash(a,bc)=%v", a, b, c, d)
	}
	x, y := 0.1, 0.2
	if f, _ := ruleHash(x + y); f != oracleHash("19:0.30000000000000004") {
		t.Errorf("float text: %v", f)
	}
	if _, err := ruleHash(); err == nil {
		t.Error("hash() without arguments: no error")
	}
	if _, err := ruleHash([]any{1}); err == nil {
		t.Error("hash of a list: no error")
	}
}

// TestHashTimeMatchesFormat: the hand-written time text of hash() is time.Format's with
// hashTimeLayout, byte for byte, over random instants of years 1-9999 in any zone (and
// the years outside, which go through time.Format itself).
func TestHashTimeMatchesFormat(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	zones := []*time.Location{time.UTC, time.FixedZone("", 5*3600+30*60), time.FixedZone("", -8*3600)}
	check := func(ts time.Time) {
		t.Helper()
		if got, want := string(appendHashTime(nil, ts)), ts.UTC().Format(hashTimeLayout); got != want {
			t.Fatalf("%v: %q, time.Format %q", ts, got, want)
		}
	}
	for range 200_000 {
		sec := rng.Int64N(253402300799+62135596800) - 62135596800
		check(time.Unix(sec, rng.Int64N(1e9)).In(zones[rng.IntN(len(zones))]))
	}
	for _, ts := range []time.Time{{}, time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(-5, 6, 7, 8, 9, 10, 11, time.UTC), time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)} {
		check(ts)
	}
}
