package lakesql

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	"github.com/apache/iceberg-go/table"

	"goldbridge/lakehouse/asof"
	"goldbridge/lakehouse/catalog"
)

// QueryError is an error of the query itself (its SQL, a snapshot it names, a table it
// cannot read), not of the lake: the caller's usage error.
type QueryError struct{ Err error }

func (e *QueryError) Error() string { return e.Err.Error() }
func (e *QueryError) Unwrap() error { return e.Err }

// ErrQuery matches every QueryError (errors.Is).
var ErrQuery = errors.New("query error")

func (e *QueryError) Is(target error) bool { return target == ErrQuery }

// ForLake is Rewrite over every table of lh, each read at its current metadata file or
// at the snapshot opt.Global or the query's own FOR ... AS OF names, resolved against the
// same metadata (asof.Resolve); opt.Resolve is set here. notKept adds to the error of a
// snapshot the table no longer keeps (asof.ErrNotKept) how far back the table is kept.
// Only local (file://) tables can be read: naming another is a QueryError. used are the
// lake tables the query reads.
func ForLake(ctx context.Context, lh *catalog.Lakehouse, query string, opt AsOf, notKept func(name string) string) (sql string, used []string, err error) {
	names, err := lh.Tables(ctx)
	if err != nil {
		return "", nil, err
	}
	byName := make(map[string]Table, len(names))
	loaded := make(map[string]*table.Table, len(names))
	for _, n := range names {
		tbl, err := lh.LoadTable(ctx, n)
		if err != nil {
			return "", nil, err
		}
		var lt Table
		lt.Dir, _ = localPath(tbl.Location())
		lt.Metadata, _ = localPath(tbl.MetadataLocation())
		byName[n], loaded[n] = lt, tbl
	}
	now := time.Now()
	opt.Resolve = func(name string, r asof.Ref) (int64, error) {
		s, err := asof.Resolve(ctx, loaded[name], r, now)
		if errors.Is(err, asof.ErrNotKept) && notKept != nil {
			err = fmt.Errorf("%w; %s", err, notKept(name))
		}
		if err != nil {
			return 0, err
		}
		return s.SnapshotID, nil
	}
	sql, used, err = Rewrite(query, byName, opt)
	if err != nil {
		return "", nil, &QueryError{err}
	}
	for _, n := range used {
		if byName[n].Dir == "" {
			return "", nil, &QueryError{fmt.Errorf("query reads local (file://) tables only; %s lives at %s: query it with ClickHouse's icebergS3", n, loaded[n].Location())}
		}
	}
	return sql, used, nil
}

// localPath is the local path of a file:// location; ok is false for other schemes.
func localPath(loc string) (string, bool) {
	u, err := url.Parse(loc)
	if err != nil || u.Scheme != "file" {
		return "", false
	}
	return filepath.FromSlash(u.Path), true
}
