package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestImportsPointDown checks the layout's one-way data flow on the imports of every
// non-test file of the module: nothing outside cmd imports cmd; the lakehouse imports
// neither serving nor sync; serving does not import sync; and sync reaches the hot tier
// through its contract (serving/hot) and the fingerprint, never through the ClickHouse
// push or DDL packages (issue 38). A violation names the file and the import.
func TestImportsPointDown(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rules := []struct {
		from   string // package path prefix (module-relative) the rule applies to
		denied []string
	}{
		{"lakehouse/", []string{"goldbridge/serving", "goldbridge/sync", "goldbridge/cmd"}},
		{"serving/", []string{"goldbridge/sync", "goldbridge/cmd"}},
		{"sync/", []string{"goldbridge/cmd"}},
		{"demo/", []string{"goldbridge/cmd"}},
		{"bench/", []string{"goldbridge/cmd"}},
	}
	syncDenied := []string{"goldbridge/serving/push", "goldbridge/serving/ddl", "goldbridge/serving/chconn", "goldbridge/serving/chtarget"}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || rel == "third_party" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		dir := filepath.ToSlash(filepath.Dir(rel)) + "/"
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, r := range rules {
				if strings.HasPrefix(dir, r.from) && slices.ContainsFunc(r.denied, func(d string) bool { return p == d || strings.HasPrefix(p, d+"/") }) {
					t.Errorf("%s imports %s", rel, p)
				}
			}
			if dir == "sync/" && slices.Contains(syncDenied, p) {
				t.Errorf("%s imports %s: sync reaches the hot tier through serving/hot", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d files: not the module", files)
	}
}
