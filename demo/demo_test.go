package demo_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"goldbridge/demo"
)

var end = time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)

// generate runs Generate into a fresh directory and returns its stats and the
// lines of every file in order (newline included).
func generate(t testing.TB, opt demo.Options) (demo.Stats, [][][]byte) {
	t.Helper()
	if opt.OutDir == "" {
		opt.OutDir = t.TempDir()
	}
	if opt.End.IsZero() {
		opt.End = end
	}
	st, err := demo.Generate(context.Background(), opt)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	var files [][][]byte
	for _, path := range st.Files {
		files = append(files, splitLines(readFile(t, path)))
	}
	return st, files
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return b
}

func splitLines(b []byte) [][]byte {
	var lines [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			lines = append(lines, b) // unterminated: caught by the tests
			break
		}
		lines = append(lines, b[:i+1])
		b = b[i+1:]
	}
	return lines
}

func concat(files [][][]byte) []byte {
	var b []byte
	for _, f := range files {
		for _, l := range f {
			b = append(b, l...)
		}
	}
	return b
}

// row is a line decoded with encoding/json; amount is kept raw to check its text.
type row struct {
	OrderID   *string         `json:"order_id"`
	UserID    string          `json:"user_id"`
	Amount    json.RawMessage `json:"amount"`
	Currency  *string         `json:"currency"`
	Country   string          `json:"country"`
	Category  string          `json:"category"`
	Status    string          `json:"status"`
	CreatedAt string          `json:"created_at"`
	UpdatedAt string          `json:"updated_at"`
	Op        string          `json:"op"`
}

var (
	reAmount    = regexp.MustCompile(`^-?[0-9]+\.[0-9]{2}$`)
	reOrderID   = regexp.MustCompile(`^o-[0-9]{9}$`)
	reUserID    = regexp.MustCompile(`^u-[0-9]{7}$`)
	reCreatedAt = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$`)
	reUpdatedAt = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$`)
	reCountry   = regexp.MustCompile(`^[A-Z]{2}$`)
	reCurrency  = regexp.MustCompile(`^[A-Z]{3}$`)
	statusRank  = map[string]int{"created": 0, "paid": 1, "shipped": 2, "delivered": 3}
)

// decode parses a line the way a Silver reader would; a non-nil error means
// the line is bad (quarantined).
func decode(line []byte) (row, time.Time, error) {
	var r row
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, time.Time{}, err
	}
	if dec.More() {
		return r, time.Time{}, errors.New("trailing data")
	}
	if r.OrderID == nil || *r.OrderID == "" {
		return r, time.Time{}, errors.New("missing order_id")
	}
	if !reAmount.Match(r.Amount) {
		return r, time.Time{}, errors.New("amount is not a 2-decimal number")
	}
	if r.Amount[0] == '-' {
		return r, time.Time{}, errors.New("negative amount")
	}
	ts, err := time.Parse(time.RFC3339Nano, r.UpdatedAt)
	if err != nil {
		return r, time.Time{}, err
	}
	return r, ts, nil
}

// checkGood asserts the strict format of a line that decode accepted.
func checkGood(t *testing.T, line []byte, r row, updated time.Time, opt demo.Options) time.Time {
	t.Helper()
	fail := func(what string) { t.Fatalf("%s in good line %s", what, line) }
	var amount float64
	if err := json.Unmarshal(r.Amount, &amount); err != nil || amount < 0 {
		fail("amount")
	}
	switch {
	case !reOrderID.MatchString(*r.OrderID):
		fail("order_id")
	case !reUserID.MatchString(r.UserID):
		fail("user_id")
	case r.Currency != nil && !reCurrency.MatchString(*r.Currency):
		fail("currency")
	case !reCountry.MatchString(r.Country):
		fail("country")
	case r.Category == "":
		fail("category")
	case !slices.Contains([]string{"c", "u", "d", "r"}, r.Op):
		fail("op")
	case !reCreatedAt.MatchString(r.CreatedAt):
		fail("created_at format")
	case !reUpdatedAt.MatchString(r.UpdatedAt):
		fail("updated_at format")
	case updated.After(opt.End):
		fail("updated_at after End")
	}
	if _, ok := statusRank[r.Status]; !ok {
		fail("status")
	}
	created, err := time.Parse(time.RFC3339, r.CreatedAt)
	if err != nil || created.After(updated) || created.Before(opt.End.AddDate(0, 0, -opt.Days)) {
		fail("created_at range")
	}
	return created
}

// keyTrack is what the stream check remembers per order.
type keyTrack struct {
	last    row       // last in-order version
	max     time.Time // newest updated_at written so far
	deleted bool
	file    int
}

// audit recounts a stream from its bytes, independently of the generator.
type audit struct {
	demo.Stats
	moves, crossFileDups, hotLines int64
	perCountry, perCategory        map[string]int64
	ordersPerUser                  map[string]int64
	noCurrency                     int64
}

// auditStream checks every invariant of the stream and recounts it.
func auditStream(t *testing.T, files [][][]byte, opt demo.Options) audit {
	t.Helper()
	a := audit{perCountry: map[string]int64{}, perCategory: map[string]int64{}, ordersPerUser: map[string]int64{}}
	seen := map[[32]byte]int{} // good line hash -> file index
	keys := map[string]*keyTrack{}
	for fi, lines := range files {
		for _, line := range lines {
			a.Events++
			if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
				t.Fatalf("line without exactly one trailing newline: %q", line)
			}
			r, updated, err := decode(line)
			if err != nil {
				a.Bad++
				continue
			}
			h := sha256.Sum256(line)
			if f, ok := seen[h]; ok {
				a.Duplicates++
				if f < fi {
					a.crossFileDups++
				}
				continue
			}
			seen[h] = fi
			created := checkGood(t, line, r, updated, opt)
			id := *r.OrderID
			if id == "o-000000001" {
				a.hotLines++
			}
			k := keys[id]
			if k == nil {
				if r.Op != "c" {
					t.Fatalf("first good line of %s has op %s: %s", id, r.Op, line)
				}
				keys[id] = &keyTrack{last: r, max: updated, file: fi}
				a.Creates++
				a.Keys++
				a.perCountry[r.Country]++
				a.perCategory[r.Category]++
				a.ordersPerUser[r.UserID]++
				if r.Currency == nil {
					a.noCurrency++
				}
				continue
			}
			if updated.Before(k.max) { // late: older than a version already written
				if r.Op != "u" {
					t.Fatalf("late line with op %s: %s", r.Op, line)
				}
				if statusRank[r.Status] > statusRank[k.last.Status] {
					t.Fatalf("late line has a newer status than %s: %s", k.last.Status, line)
				}
				a.Updates++
				a.Late++
				continue
			}
			if k.deleted {
				t.Fatalf("in-order event after delete: %s", line)
			}
			prev := k.last
			switch r.Op {
			case "c":
				t.Fatalf("second create: %s", line)
			case "r":
				if !sameRow(r, prev) || r.UpdatedAt != prev.UpdatedAt {
					t.Fatalf("snapshot differs from current row %+v: %s", prev, line)
				}
				a.Snapshots++
				continue
			case "d":
				if !sameRow(r, prev) || !updated.After(k.max) {
					t.Fatalf("delete is not the last row with a newer updated_at %+v: %s", prev, line)
				}
				k.deleted = true
				a.Deletes++
			case "u":
				if !updated.After(k.max) {
					t.Fatalf("in-order update without newer updated_at: %s", line)
				}
				if statusRank[r.Status] < statusRank[prev.Status] {
					t.Fatalf("status regressed from %s: %s", prev.Status, line)
				}
				if r.CreatedAt != prev.CreatedAt {
					prevCreated, _ := time.Parse(time.RFC3339, prev.CreatedAt)
					if prevCreated.Format(time.DateOnly) == created.Format(time.DateOnly) {
						t.Fatalf("created_at moved within its day: %s", line)
					}
					a.moves++
				}
				a.Updates++
			}
			if r.UserID != prev.UserID || r.Country != prev.Country || r.Category != prev.Category ||
				!equalPtr(r.Currency, prev.Currency) {
				t.Fatalf("stable attributes changed from %+v: %s", prev, line)
			}
			k.last, k.max = r, updated
		}
	}
	return a
}

// sameRow compares two rows ignoring updated_at and op.
func sameRow(a, b row) bool {
	a.UpdatedAt, a.Op, b.UpdatedAt, b.Op = "", "", "", ""
	return equalPtr(a.OrderID, b.OrderID) && equalPtr(a.Currency, b.Currency) && bytes.Equal(a.Amount, b.Amount) &&
		a.UserID == b.UserID && a.Country == b.Country && a.Category == b.Category && a.Status == b.Status &&
		a.CreatedAt == b.CreatedAt
}

func equalPtr(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func checkIdentity(t *testing.T, st demo.Stats) {
	t.Helper()
	if sum := st.Creates + st.Updates + st.Deletes + st.Snapshots + st.Duplicates + st.Bad; sum != st.Events {
		t.Errorf("Creates+Updates+Deletes+Snapshots+Duplicates+Bad = %d, Events = %d", sum, st.Events)
	}
	if st.Late > st.Updates {
		t.Errorf("Late %d > Updates %d", st.Late, st.Updates)
	}
	if st.Keys != st.Creates {
		t.Errorf("Keys %d != Creates %d", st.Keys, st.Creates)
	}
}

func TestStream(t *testing.T) {
	opt := demo.Options{Events: 200_000, Seed: 42, Files: 4, End: end, Days: 120}
	st, files := generate(t, opt)
	checkIdentity(t, st)
	if len(files) != 4 || len(st.Files) != 4 {
		t.Fatalf("got %d files, want 4", len(files))
	}
	for i, f := range files {
		if len(f) != 50_000 {
			t.Errorf("file %d has %d lines, want 50000", i, len(f))
		}
		if want := filepath.Join(filepath.Dir(st.Files[0]), "orders-0000"+string(rune('1'+i))+".jsonl"); st.Files[i] != want {
			t.Errorf("file %d is %s, want %s", i, st.Files[i], want)
		}
	}
	var size int64
	for _, p := range st.Files {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		size += fi.Size()
	}
	if size != st.Bytes {
		t.Errorf("Stats.Bytes = %d, files hold %d", st.Bytes, size)
	}

	a := auditStream(t, files, opt)
	if a.Events != opt.Events || st.Events != opt.Events {
		t.Fatalf("lines = %d, Stats.Events = %d, want %d", a.Events, st.Events, opt.Events)
	}
	// The generator's counters match a recount from the bytes, kind by kind.
	got, want := a.Stats, st
	got.Files, got.Bytes = want.Files, want.Bytes
	if !statsEqual(got, want) {
		t.Errorf("recount %+v\nStats   %+v", got, want)
	}

	t.Logf("stats %+v moves=%d hot=%d crossFileDups=%d", func() demo.Stats { s := st; s.Files = nil; return s }(), a.moves, a.hotLines, a.crossFileDups)
	ev := float64(opt.Events)
	for _, c := range []struct {
		name     string
		got      float64
		min, max float64
	}{
		{"duplicates/events", float64(st.Duplicates) / ev, 0.04, 0.06},
		{"late/events", float64(st.Late) / ev, 0.02, 0.04},
		{"bad/events", float64(st.Bad) / ev, 0.007, 0.013},
		{"snapshots/events", float64(st.Snapshots) / ev, 0.007, 0.013},
		{"deletes/keys", float64(st.Deletes) / float64(st.Keys), 0.02, 0.04},
		{"keys/(events/3.3)", float64(st.Keys) / (ev / 3.3), 0.98, 1.0},
		{"hot key lines/events", float64(a.hotLines) / ev, 0.008, 0.015},
		{"created_at moves/in-order updates", float64(a.moves) / float64(st.Updates-st.Late), 0.003, 0.007},
		{"currency missing or null/keys", float64(a.noCurrency) / float64(st.Keys), 0.08, 0.12},
		{"duplicates of a line in an earlier file", float64(a.crossFileDups), 1, 1000},
	} {
		if c.got < c.min || c.got > c.max {
			t.Errorf("%s = %.4f, want within [%v, %v]", c.name, c.got, c.min, c.max)
		}
	}

	// Skew: US and electronics lead, the top user has many orders.
	if top := topKey(a.perCountry); top != "US" || len(a.perCountry) < 15 {
		t.Errorf("top country %s of %d, want US of ~20", top, len(a.perCountry))
	}
	if top := topKey(a.perCategory); top != "electronics" || len(a.perCategory) != 10 {
		t.Errorf("top category %s of %d, want electronics of 10", top, len(a.perCategory))
	}
	if top := a.ordersPerUser[topKey(a.ordersPerUser)]; top < st.Keys/200 {
		t.Errorf("top user has %d orders, want at least %d (Zipf-like)", top, st.Keys/200)
	}

	// Bad lines cover every kind.
	var kinds []string
	for _, f := range files {
		for _, line := range f {
			if _, _, err := decode(line); err != nil {
				kinds = append(kinds, badKind(line))
			}
		}
	}
	for _, k := range []string{"truncated", "no order_id", "null order_id", "negative amount", "string amount", "bad updated_at", "not json"} {
		if !slices.Contains(kinds, k) {
			t.Errorf("no bad line of kind %q", k)
		}
	}
}

func badKind(line []byte) string {
	s := string(line)
	switch {
	case !strings.HasPrefix(s, "{"):
		return "not json"
	case !strings.HasSuffix(s, "}\n"):
		return "truncated"
	case !strings.Contains(s, `"order_id"`):
		return "no order_id"
	case strings.Contains(s, `"order_id":null`):
		return "null order_id"
	case strings.Contains(s, `"amount":-`):
		return "negative amount"
	case strings.Contains(s, `"amount":"abc"`):
		return "string amount"
	case strings.Contains(s, `"updated_at":"not-a-date"`):
		return "bad updated_at"
	}
	return "unknown: " + s
}

func topKey(m map[string]int64) string {
	var best string
	for k, v := range m {
		if v > m[best] || (v == m[best] && k < best) {
			best = k
		}
	}
	return best
}

func statsEqual(a, b demo.Stats) bool {
	return a.Events == b.Events && a.Creates == b.Creates && a.Updates == b.Updates && a.Deletes == b.Deletes &&
		a.Snapshots == b.Snapshots && a.Duplicates == b.Duplicates && a.Late == b.Late && a.Bad == b.Bad &&
		a.Keys == b.Keys && a.Bytes == b.Bytes && slices.Equal(a.Files, b.Files)
}

func TestDeterministic(t *testing.T) {
	base := demo.Options{Events: 30_000, Seed: 7, End: end, Days: 30}
	_, first := generate(t, base)
	for _, c := range []struct {
		name string
		opt  func(*demo.Options)
		same bool
	}{
		{"same options", func(*demo.Options) {}, true},
		{"other file split", func(o *demo.Options) { o.Files = 3 }, true},
		{"gzip", func(o *demo.Options) { o.Gzip, o.Files = true, 2 }, true},
		{"other seed", func(o *demo.Options) { o.Seed = 8 }, false},
		{"other end", func(o *demo.Options) { o.End = end.Add(time.Hour) }, false},
		{"other keys", func(o *demo.Options) { o.Keys = 5000 }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			opt := base
			c.opt(&opt)
			st, files := generate(t, opt)
			checkIdentity(t, st)
			if same := bytes.Equal(concat(files), concat(first)); same != c.same {
				t.Errorf("stream equal to the base stream: %v, want %v", same, c.same)
			}
		})
	}
}

func TestGzipMatchesPlain(t *testing.T) {
	opt := demo.Options{Events: 20_000, Seed: 3, Files: 2, End: end}
	plainSt, plain := generate(t, opt)
	opt.Gzip = true
	gzSt, gz := generate(t, opt)
	for i, p := range gzSt.Files {
		if want := strings.TrimSuffix(filepath.Base(plainSt.Files[i]), ".jsonl") + ".jsonl.gz"; filepath.Base(p) != want {
			t.Errorf("gzip file %s, want %s", filepath.Base(p), want)
		}
	}
	for i := range plain {
		if !bytes.Equal(concat(plain[i:i+1]), concat(gz[i:i+1])) {
			t.Errorf("file %d: gzip content differs from plain", i)
		}
	}
	if gzSt.Bytes >= plainSt.Bytes/3 {
		t.Errorf("gzip Bytes %d not much smaller than plain %d", gzSt.Bytes, plainSt.Bytes)
	}
}

func TestSmallStreams(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  demo.Options
	}{
		{"one event", demo.Options{Events: 1}},
		{"one key", demo.Options{Events: 5000, Keys: 1}},
		{"every line a key", demo.Options{Events: 1000, Keys: 1000}},
		{"one day", demo.Options{Events: 20_000, Days: 1}},
		{"many files", demo.Options{Events: 100, Files: 100}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opt.End = end
			st, files := generate(t, c.opt)
			checkIdentity(t, st)
			opt := c.opt
			if opt.Days == 0 {
				opt.Days = demo.DefaultDays
			}
			a := auditStream(t, files, opt)
			if a.Events != c.opt.Events || st.Events != c.opt.Events {
				t.Errorf("lines = %d, Stats.Events = %d, want %d", a.Events, st.Events, c.opt.Events)
			}
			if c.opt.Keys > 0 && st.Keys > c.opt.Keys {
				t.Errorf("Keys = %d, want at most %d", st.Keys, c.opt.Keys)
			}
		})
	}
}

func TestOptionsValidation(t *testing.T) {
	for _, c := range []struct {
		name string
		opt  demo.Options
		want string
	}{
		{"no dir", demo.Options{Events: 1, End: end}, "OutDir"},
		{"no events", demo.Options{OutDir: "x", End: end}, "Events"},
		{"no end", demo.Options{OutDir: "x", Events: 1}, "End"},
		{"more files than events", demo.Options{OutDir: "x", Events: 2, Files: 3, End: end}, "Files"},
		{"negative days", demo.Options{OutDir: "x", Events: 2, Days: -1, End: end}, "Days"},
		{"more keys than events", demo.Options{OutDir: "x", Events: 2, Keys: 3, End: end}, "Keys"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := demo.Generate(context.Background(), c.opt)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want mention of %s", err, c.want)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	const events, perFile = 1 << 40, 1 << 13
	for _, c := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"cancelled before", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, context.Canceled},
		{"deadline during", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 300*time.Millisecond)
		}, context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := c.ctx()
			defer cancel()
			dir := t.TempDir()
			start := time.Now()
			st, err := demo.Generate(ctx, demo.Options{OutDir: dir, Events: events, Files: events / perFile, End: end})
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("returned after %v", el)
			}
			// Only completed files are left, and Stats describe exactly them.
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names, want []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			for _, p := range st.Files {
				want = append(want, filepath.Base(p))
			}
			if !slices.Equal(names, want) {
				t.Errorf("dir holds %v, want the completed files %v", names, want)
			}
			if st.Events != perFile*int64(len(st.Files)) {
				t.Errorf("Stats.Events = %d for %d completed files of %d lines", st.Events, len(st.Files), perFile)
			}
			checkIdentity(t, st)
			t.Logf("completed %d files", len(st.Files))
		})
	}
}

func BenchmarkGenerate(b *testing.B) {
	const events = 1_000_000
	for _, gz := range []bool{false, true} {
		name := "plain"
		if gz {
			name = "gzip"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				st, err := demo.Generate(context.Background(), demo.Options{OutDir: b.TempDir(), Events: events, Seed: 1, Gzip: gz, End: end})
				if err != nil {
					b.Fatal(err)
				}
				if !gz {
					b.SetBytes(st.Bytes)
				}
			}
			b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
