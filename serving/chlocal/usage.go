package chlocal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Usage is what a server's data directory takes on disk.
type Usage struct {
	// PartDirs counts the part directories of its MergeTree tables, active or not:
	// every directory in a table's directory (store/<xyz>/<uuid>/) but detached/.
	PartDirs int
	// Bytes is the size of the files under the directory (their length, as
	// system.parts.bytes_on_disk counts a part's), a file with several hard links (a
	// part shared by two tables, as <t> and <t>__prev share theirs) once.
	Bytes int64
}

// DiskUsage measures the data directory path (Options.Path) of a server, running or
// not; files deleted while it walks (the server cleaning up) are skipped.
func DiskUsage(path string) (Usage, error) {
	if _, err := os.Stat(path); err != nil {
		return Usage{}, fmt.Errorf("clickhouse data dir: %w", err)
	}
	var u Usage
	seen := map[fileKey]bool{}
	store := filepath.Join(path, "store") + string(filepath.Separator)
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() != "detached" && strings.HasPrefix(p, store) && strings.Count(p[len(store):], string(filepath.Separator)) == 2 {
				u.PartDirs++
			}
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		key, linked := fileID(info)
		if linked {
			if seen[key] {
				return nil
			}
			seen[key] = true
		}
		u.Bytes += info.Size()
		return nil
	})
	if err != nil {
		return Usage{}, fmt.Errorf("clickhouse data dir %s: %w", path, err)
	}
	return u, nil
}

// fileKey identifies a file across its hard links.
type fileKey struct{ dev, ino uint64 }
