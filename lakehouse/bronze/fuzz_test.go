package bronze

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
)

// FuzzReadCSV reads fuzzed CSV: no panic, and every record emitted is a JSON object whose
// values are strings or null (a parse error is the file's quarantine reason, not a crash).
func FuzzReadCSV(f *testing.F) {
	for _, s := range []string{"id,note\n1,\"a, \"\"b\"\"\"\n2,\n", "\ufeffid\n1\n", "a,b\n1,\"open\n", "a\n1 \"bare\" q\n", "x;y\n1;2\n", ""} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, semicolon bool) {
		delim := ','
		if semicolon {
			delim = ';'
		}
		r, bom := skipBOM(bytes.NewReader(data))
		last := int64(-1)
		_ = readCSV(context.Background(), r, int64(bom), delim, map[string]bool{"": true, "NA": true}, func(p []byte, pos int64) error {
			if pos <= last || pos >= int64(len(data)) {
				t.Fatalf("%q: a record at %d after one at %d", data, pos, last)
			}
			last = pos
			var m map[string]*string
			if err := json.Unmarshal(p, &m); err != nil {
				t.Fatalf("%q: emitted %q, not a JSON object of strings: %v", data, p, err)
			}
			return nil
		})
	})
}

// FuzzReadLines reads fuzzed JSON Lines: every emitted line is non-blank, holds no "\n",
// is the input's bytes at its position, and the lines with the blank count account for
// every line of the input.
func FuzzReadLines(f *testing.F) {
	for _, s := range []string{"{\"a\":1}\n{\"a\":2}", "\n\n  \n", "\ufeff{}\r\n", "no newline"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var n int64
		blank, err := readLines(context.Background(), bytes.NewReader(data), 0, func(p []byte, pos int64) error {
			if bytes.IndexByte(p, '\n') >= 0 || len(bytes.TrimSpace(p)) == 0 {
				t.Fatalf("emitted %q", p)
			}
			if pos < 0 || pos+int64(len(p)) > int64(len(data)) || !bytes.Equal(data[pos:pos+int64(len(p))], p) ||
				pos > 0 && data[pos-1] != '\n' {
				t.Fatalf("%q: emitted %q at %d", data, p, pos)
			}
			n++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		lines := int64(bytes.Count(data, []byte{'\n'}))
		if len(data) > 0 && data[len(data)-1] != '\n' {
			lines++
		}
		if n+blank != lines {
			t.Fatalf("%q: %d records + %d blank, %d lines", data, n, blank, lines)
		}
	})
}
