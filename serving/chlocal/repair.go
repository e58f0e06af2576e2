package chlocal

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// brokenSuffix is what a broken metadata file is renamed to: ClickHouse skips
// "*.sql.bak" files when it loads a database's metadata directory.
const brokenSuffix = ".bak"

// repairMetadata moves aside every table or view definition under path that ClickHouse
// cannot parse — empty, or not an ATTACH statement: what a full disk leaves when a
// CREATE OR REPLACE rewrites it — so that the server starts without the object instead
// of failing every start with "Cannot parse definition from metadata file"; goldbridge
// then recreates a missing _final table, and a missing table of data is recreated and refilled by sync
// and check --repair. It returns the files it moved (to <file>.bak).
func repairMetadata(path string) ([]string, error) {
	var files []string
	for _, pattern := range []string{
		filepath.Join(path, "store", "*", "*", "*.sql"), // Atomic databases (the default)
		filepath.Join(path, "metadata", "*", "*.sql"),   // Ordinary ones, and the links to store/
	} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	moved, err := repairDatabases(path)
	if err != nil {
		return moved, err
	}
	seen := map[string]bool{}
	for _, f := range files {
		real, err := filepath.EvalSymlinks(f)
		if err != nil || seen[real] {
			continue
		}
		seen[real] = true
		if ok, err := definitionReadable(real); err != nil || ok {
			continue
		}
		if err := os.Rename(real, real+brokenSuffix); err != nil {
			return moved, fmt.Errorf("move aside broken metadata %s: %w", real, err)
		}
		moved = append(moved, real)
	}
	return moved, nil
}

// repairDatabases rewrites every database definition (metadata/<db>.sql) that a full
// disk left unreadable during CREATE DATABASE, which made every later start fail with
// "Empty query: while loading database": an Atomic database whose directory link
// metadata/<db> -> store/xxx/<uuid> exists gets back the definition ClickHouse writes
// for it; one without is moved aside (goldbridge creates the database again). It returns
// the files it rewrote or moved.
func repairDatabases(path string) ([]string, error) {
	defs, err := filepath.Glob(filepath.Join(path, "metadata", "*.sql"))
	if err != nil {
		return nil, err
	}
	var fixed []string
	for _, f := range defs {
		if ok, err := definitionReadable(f); err != nil || ok {
			continue
		}
		link, err := os.Readlink(strings.TrimSuffix(f, ".sql"))
		if id := filepath.Base(link); err == nil && uuidRE.MatchString(id) {
			def := fmt.Sprintf("ATTACH DATABASE _ UUID '%s'\nENGINE = Atomic\n", id)
			if err := writeFileAtomic(f, []byte(def)); err != nil {
				return fixed, fmt.Errorf("rewrite broken database definition %s: %w", f, err)
			}
		} else if err := os.Rename(f, f+brokenSuffix); err != nil {
			return fixed, fmt.Errorf("move aside broken database definition %s: %w", f, err)
		}
		fixed = append(fixed, f)
	}
	return fixed, nil
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// writeFileAtomic replaces file with data: a temporary file beside it, synced, renamed.
func writeFileAtomic(file string, data []byte) error {
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	f, err := os.Open(tmp)
	if err == nil {
		err = f.Sync()
		f.Close()
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, file)
}

// definitionReadable says whether file starts like a definition ClickHouse wrote.
func definitionReadable(file string) (bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return false, err
	}
	defer f.Close()
	head := make([]byte, 64)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return false, err
	}
	return bytes.HasPrefix(bytes.TrimSpace(head[:n]), []byte("ATTACH ")), nil
}

// MetadataBroken reports whether the server at path has a database, table or view
// definition it could not load (what repairMetadata moves aside at the next start): a push record
// that says this server holds a mart is then no longer to be trusted.
func MetadataBroken(path string) bool {
	for _, pattern := range []string{
		filepath.Join(path, "store", "*", "*", "*.sql"),
		filepath.Join(path, "metadata", "*", "*.sql"),
		filepath.Join(path, "metadata", "*.sql"), // databases
	} {
		m, _ := filepath.Glob(pattern)
		for _, f := range m {
			if ok, err := definitionReadable(f); err == nil && !ok {
				return true
			}
		}
	}
	return false
}
