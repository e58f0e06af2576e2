package forget

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/lakehousetest"
	"goldbridge/lakehouse/pii"
	"goldbridge/lakehouse/silver"
)

// dataFileSums hashes every file under the table's data directory.
func dataFileSums(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = sha256.Sum256(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestShred is crypto-shredding end to end: the PII fields never land in Bronze in
// clear, Silver reads them decrypted; after Shred the Bronze data files are
// byte-identical, the subject's PII fields are NULL in Silver (and in no snapshot of it),
// every other value of every row is intact, and the record is in the audit log.
func TestShred(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	lh := lakehousetest.OpenDir(t, dir)
	store, err := pii.NewSQLStore(ctx, lh.DB())
	if err != nil {
		t.Fatal(err)
	}
	codec, err := pii.NewCodec(pii.Spec{Subject: "user_id", Fields: []string{"email"}}, store)
	if err != nil {
		t.Fatal(err)
	}
	encrypt := func(b []byte) ([]byte, error) { return codec.Encrypt(ctx, b) }
	decrypt := func(b []byte) ([]byte, error) {
		c, err := pii.NewCodec(pii.Spec{Subject: "user_id", Fields: []string{"email"}}, store) // a fresh cache per run
		if err != nil {
			return nil, err
		}
		return c.Decrypt(ctx, b)
	}
	tg := eventsTarget()
	tg.Silver.Columns = append(tg.Silver.Columns, silver.ColumnSpec{Name: "email", Path: "$.email", Type: silver.Type{Kind: silver.String}})
	tg.Decrypt = decrypt
	var lines []string
	for i, l := range events(true) {
		lines = append(lines, strings.TrimSuffix(l, "}")+fmt.Sprintf(`,"email":"mail-%02d@example.com"}`, i))
	}
	landing := filepath.Join(dir, "landing")
	if err := os.MkdirAll(landing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(landing, "a.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := bronze.FileSource{Name: "landing", System: "test_file", Dir: landing}
	if _, err := bronze.IngestFiles(ctx, lh, tg.Bronze, []bronze.FileSource{src}, bronze.Options{Transform: encrypt}); err != nil {
		t.Fatal(err)
	}
	if _, err := silver.Run(ctx, lh, tg.Silver, tg.Bronze, silver.Options{Decrypt: decrypt}); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows(t, lh, tg.Bronze, 0) {
		if strings.Contains(r, "@example.com") {
			t.Fatalf("bronze holds an email in clear: %s", r)
		}
	}
	before := rows(t, lh, tg.Silver.Table, 0)
	subjectRows := 0
	for _, r := range before {
		if !strings.Contains(r, "email=mail-") {
			t.Fatalf("silver did not decrypt: %s", r)
		}
		if strings.Contains(r, subject) {
			subjectRows++
		}
	}
	bronzeDir := filepath.Join(dir, "warehouse", "bronze.db", "events", "data")
	sums := dataFileSums(t, bronzeDir)
	if len(sums) == 0 {
		t.Fatal("no bronze data files")
	}

	res, err := Shred(ctx, lh, tg, req, func(ctx context.Context) (bool, error) { return pii.Shred(ctx, store, subject) })
	if err != nil || !res.Found {
		t.Fatalf("shred: found %v, %v", res.Found, err)
	}
	if after := dataFileSums(t, bronzeDir); !mapsEqual(after, sums) {
		t.Errorf("bronze data files changed: %d before, %d after", len(sums), len(after))
	}
	// Silver: the subject's emails NULL, every other value as before.
	var want []string
	for _, r := range before {
		if strings.Contains(r, subject) {
			i := strings.Index(r, "email=")
			j := strings.IndexByte(r[i:], '|')
			r = r[:i] + "email=(null)" + r[i+j:]
		}
		want = append(want, r)
	}
	slices.Sort(want)
	got := rows(t, lh, tg.Silver.Table, 0)
	if !slices.Equal(got, want) {
		t.Errorf("silver after shred:\n got %q\nwant %q", got, want)
	}
	tbl, _ := lh.LoadTable(ctx, tg.Silver.Table)
	for _, s := range tbl.Metadata().Snapshots() {
		for _, r := range rows(t, lh, tg.Silver.Table, s.SnapshotID) {
			if strings.Contains(r, subject) && !strings.Contains(r, "email=(null)") {
				t.Errorf("silver@%d still holds the subject's email: %s", s.SnapshotID, r)
			}
		}
	}
	if subjectRows == 0 {
		t.Fatal("the subject has no silver rows")
	}
	log, err := Log(ctx, lh)
	if err != nil || len(log) != 1 || log[0].Field != ShredField("user_id") {
		t.Fatalf("audit log: %+v, %v", log, err)
	}
	if res, err := Shred(ctx, lh, tg, req, func(ctx context.Context) (bool, error) { return pii.Shred(ctx, store, subject) }); err != nil || res.Found {
		t.Errorf("second shred: found %v, %v", res.Found, err)
	}
}

func mapsEqual(a, b map[string][32]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
