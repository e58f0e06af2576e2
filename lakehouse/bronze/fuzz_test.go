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
		_ = readCSV(context.Background(), skipBOM(bytes.NewReader(data)), delim, map[string]bool{"": true, "NA": true}, func(p []byte) error {
			var m map[string]*string
			if err := json.Unmarshal(p, &m); err != nil {
				t.Fatalf("%q: emitted %q, not a JSON object of strings: %v", data, p, err)
			}
			return nil
		})
	})
}

// FuzzReadLines reads fuzzed JSON Lines: every emitted line is non-blank, holds no "\n",
// and the lines with the blank count account for every line of the input.
func FuzzReadLines(f *testing.F) {
	for _, s := range []string{"{\"a\":1}\n{\"a\":2}", "\n\n  \n", "\ufeff{}\r\n", "no newline"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var n int64
		blank, err := readLines(context.Background(), bytes.NewReader(data), func(p []byte) error {
			if bytes.IndexByte(p, '\n') >= 0 || len(bytes.TrimSpace(p)) == 0 {
				t.Fatalf("emitted %q", p)
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
