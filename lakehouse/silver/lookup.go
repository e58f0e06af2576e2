package silver

// Lookup sources of the rules registry: CSV files loaded once per run (bounded), keyed by
// the text of the lookup's `on` columns.

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// LookupTable is a loaded lookup source: the key — the text of the lookup's `on` columns
// in key order (see lookupKeyColumns) joined by "\x1f" — to the values of the lookup's
// Columns, in order. Key texts are compared after typing them like the local column
// (so "7" and " 7" match an int 7, "10.5" a decimal(18,2) 10.50); a key that cannot be
// typed like its local column never matches. Rows that match nothing get NULLs.
type LookupTable map[string][]string

// LookupLoader loads a lookup source that is not a file, such as another entity's Silver
// table, keyed as described on LookupTable, and names the version it loaded (recorded in
// Silver's commit: lookupversion.go). Values are the text of the cells.
type LookupLoader func(spec LookupSpec) (LookupTable, string, error)

const lookupKeySep = '\x1f'

// lookupKeyColumns returns the join columns of a lookup in key order: this entity's
// columns sorted by name, and the lookup-side column paired with each.
func lookupKeyColumns(spec LookupSpec) (local, remote []string) {
	local = make([]string, 0, len(spec.On))
	for l := range spec.On {
		local = append(local, l)
	}
	sort.Strings(local)
	remote = make([]string, len(local))
	for i, l := range local {
		remote[i] = spec.On[l]
	}
	return local, remote
}

// LoadCSVLookup reads a CSV reference file with a header row: the lookup-side `on`
// columns form the key, and Columns are its values. Header names are trimmed (and a UTF-8
// BOM dropped); every record must have as many fields as the header. A key that appears
// twice with different values is an error, since a LEFT JOIN on it would multiply rows.
func LoadCSVLookup(spec LookupSpec) (LookupTable, error) {
	if spec.File == "" {
		return nil, errors.New("lookup: no file")
	}
	f, err := os.Open(spec.File)
	if err != nil {
		return nil, fmt.Errorf("lookup: %w", err)
	}
	defer f.Close()
	t, err := readCSVLookup(f, spec)
	if err != nil {
		return nil, fmt.Errorf("lookup %s: %w", spec.File, err)
	}
	return t, nil
}

// maxLookupFileBytes bounds a CSV lookup file.
const maxLookupFileBytes = 256 << 20

// lookupFiles holds the CSV lookup files read while compiling one registry, by path.
type lookupFiles map[string][]byte

// load is LoadCSVLookup, reading each file once; the version is the file's SHA-256.
func (f lookupFiles) load(spec LookupSpec) (LookupTable, string, error) {
	b, ok := f[spec.File]
	if !ok {
		fh, err := os.Open(spec.File)
		if err != nil {
			return nil, "", fmt.Errorf("lookup: %w", err)
		}
		b, err = io.ReadAll(io.LimitReader(fh, maxLookupFileBytes+1))
		fh.Close()
		if err != nil {
			return nil, "", fmt.Errorf("lookup %s: %w", spec.File, err)
		}
		if len(b) > maxLookupFileBytes {
			return nil, "", fmt.Errorf("lookup %s: larger than %d MiB", spec.File, maxLookupFileBytes>>20)
		}
		f[spec.File] = b
	}
	t, err := readCSVLookup(bytes.NewReader(b), spec)
	if err != nil {
		return nil, "", fmt.Errorf("lookup %s: %w", spec.File, err)
	}
	sum := sha256.Sum256(b)
	return t, "file " + spec.File + " sha256:" + hex.EncodeToString(sum[:]), nil
}

func readCSVLookup(r io.Reader, spec LookupSpec) (LookupTable, error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err == io.EOF {
		return nil, errors.New("empty file, want a header row")
	}
	if err != nil {
		return nil, err
	}
	pos := make(map[string]int, len(header))
	for i, h := range header {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff")
		}
		h = strings.TrimSpace(h)
		if _, dup := pos[h]; dup {
			return nil, fmt.Errorf("header: column %q appears twice", h)
		}
		pos[h] = i
	}
	find := func(names []string) ([]int, error) {
		idx := make([]int, len(names))
		for i, n := range names {
			p, ok := pos[n]
			if !ok {
				return nil, fmt.Errorf("header has no column %q (have %s)", n, strings.Join(header, ", "))
			}
			idx[i] = p
		}
		return idx, nil
	}
	_, remote := lookupKeyColumns(spec)
	keyIdx, err := find(remote)
	if err != nil {
		return nil, err
	}
	valIdx, err := find(spec.Columns)
	if err != nil {
		return nil, err
	}
	t := LookupTable{}
	var key []byte
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return t, nil
		}
		if err != nil {
			return nil, err
		}
		key = key[:0]
		for i, k := range keyIdx {
			if i > 0 {
				key = append(key, lookupKeySep)
			}
			key = append(key, rec[k]...)
		}
		vals := make([]string, len(valIdx))
		for i, v := range valIdx {
			vals[i] = rec[v]
		}
		if prev, dup := t[string(key)]; dup {
			if !slices.Equal(prev, vals) {
				line, _ := cr.FieldPos(0)
				return nil, fmt.Errorf("line %d: key %s appears twice with different values", line, lookupKeyString(string(key)))
			}
			continue
		}
		t[string(key)] = vals
	}
}

func lookupKeyString(k string) string {
	return strconv.Quote(strings.ReplaceAll(k, string(lookupKeySep), ","))
}
