package main

import (
	"context"
	"database/sql"
	"errors"
	iofs "io/fs"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	iceio "github.com/apache/iceberg-go/io"

	"goldbridge/lakehouse/catalog"
	"goldbridge/lakehouse/lakehousetest"
)

// s3Fault is where faultProxy stops the object store: in the commit of the table whose
// location is loc, once the write's data files are stored.
type s3Fault struct {
	loc string // the table's location as a request path: /bucket/prefix/ns.db/table/
	// manifest: at the commit's first manifest PUT, which never reaches the store (a
	// manifest already in flight beside it may; no manifest list or metadata file is
	// written). Otherwise at its metadata file's PUT, once the store has kept the file
	// and before the answer reaches the writer (lost with the store).
	manifest bool
}

// faultProxy is the S3 endpoint goldbridge talks to in TestS3RestartMidCommit: a
// reverse proxy to SeaweedFS that passes every request through and, once armed, records
// the objects stored and stops the store at the fault's request. The request waits until
// the test has stopped the store (stop, then stopped), then reaches nothing and fails
// with 502, like every request after it until the store is started again.
type faultProxy struct {
	URL     string
	stop    chan struct{} // the proxy asks the test to stop the store
	stopped chan struct{} // the test says it is down

	mu        sync.Mutex
	fault     *s3Fault // armed, not tripped yet
	recording bool     // between arm and disarm
	data      bool     // a data file of the faulted table was stored since arming
	tripped   bool
	stored    []string // s3:// paths of the objects stored since arming
}

func newFaultProxy(t *testing.T, endpoint string) *faultProxy {
	t.Helper()
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{stop: make(chan struct{}), stopped: make(chan struct{})}
	srv := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host // signed by the client (SigV4): the store must see it unchanged
		},
		Transport: p,
		// A request the fault fails is answered 502, as a store's dead gateway would; not logged.
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) },
	})
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// arm sets the fault and starts recording the objects stored.
func (p *faultProxy) arm(f s3Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.recording, p.data, p.tripped, p.stored = &f, true, false, false, nil
}

// disarm ends recording and returns whether the fault fired and what was stored.
func (p *faultProxy) disarm() (bool, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	stored, tripped := p.stored, p.tripped
	p.fault, p.recording, p.stored = nil, false, nil
	return tripped, stored
}

var errStoreStopped = errors.New("the object store was stopped")

// stopStore has the test stop the store and waits until it is down.
func (p *faultProxy) stopStore() {
	p.stop <- struct{}{}
	<-p.stopped
}

func (p *faultProxy) RoundTrip(r *http.Request) (*http.Response, error) {
	path := r.URL.Path
	put := r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == ""
	p.mu.Lock()
	f := p.fault
	hit := f != nil && put && p.data && strings.HasPrefix(path, f.loc+"metadata/") &&
		(f.manifest && strings.HasSuffix(path, ".avro") || !f.manifest && strings.HasSuffix(path, ".metadata.json"))
	if hit {
		p.fault, p.tripped = nil, true
	}
	p.mu.Unlock()
	if hit && f.manifest {
		p.stopStore()
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && resp.StatusCode/100 == 2 && (put || r.Method == http.MethodPost && r.URL.Query().Has("uploadId")) {
		p.mu.Lock()
		if p.recording {
			p.stored = append(p.stored, "s3:/"+path)
			if p.fault != nil && strings.HasPrefix(path, p.fault.loc+"data/") {
				p.data = true
			}
		}
		p.mu.Unlock()
	}
	if hit && !f.manifest {
		if err == nil {
			resp.Body.Close()
		}
		p.stopStore()
		return nil, errStoreStopped // the answer is lost with the store
	}
	return resp, err
}

// TestS3RestartMidCommit is issue 22's "the S3 store restarted mid-commit": with the
// warehouse on SeaweedFS and the catalog on PostgreSQL, a run over new landing files
// writes the data files of a stage's table (Silver, Gold) and, in that table's commit,
// the store stops: at the first manifest's write, or once the metadata file is stored
// but before the store answers. A reverse proxy in front of the store finds that moment
// from the requests; goldbridge has no hook for it. The run fails cleanly (exit 1,
// within a bound, no panic, no secret in its output) and leaves the files of the failed
// write unreferenced. Once the store is back, the rerun converges: every table equals,
// row for row, the same two runs on an embedded catalog over a local warehouse with no
// fault; the orphan sweep (age 0) deletes exactly the files the failed write stored, and
// nothing the tables reference.
func TestS3RestartMidCommit(t *testing.T) {
	weed := lakehousetest.StartSeaweedFS(t)
	pg := lakehousetest.StartPostgres(t)
	t.Setenv("GB_TEST_S3_KEY", weed.AccessKey)
	t.Setenv("GB_TEST_S3_SECRET", weed.SecretKey)
	proxy := newFaultProxy(t, weed.Endpoint)
	ctx := context.Background()

	// The input: a first landing (run 1) and a second whose orders update the first's
	// (run 2, the one that fails, and its rerun).
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	for i, out := range []string{first, second} {
		if code, _, errs := runCLI(t, "--state-dir", dir, "demo", "generate", "--out", out,
			"--events", strconv.Itoa(3000-1500*i), "--days", "10", "--seed", strconv.Itoa(31+i)); code != exitOK {
			t.Fatalf("demo generate: exit %d\n%s", code, errs)
		}
	}
	land := func(landing, from, prefix string) {
		t.Helper()
		files, err := filepath.Glob(filepath.Join(from, "*.jsonl"))
		if err != nil || len(files) == 0 {
			t.Fatalf("landing files in %s: %v %v", from, files, err)
		}
		if err := os.MkdirAll(landing, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(landing, prefix+filepath.Base(f))
			writeFile(t, dst, string(b))
			old := time.Now().Add(-time.Hour) // settled
			if err := os.Chtimes(dst, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	idents := []string{"bronze.orders", "silver.orders", "silver.orders_quarantine", "gold.daily_revenue_kpi", "gold.revenue_by_country"}

	// The oracle: the same two runs on an embedded catalog over a local warehouse.
	soloDir := filepath.Join(dir, "solo")
	soloCfg := filepath.Join(dir, "solo.yaml")
	workersConfig(t, soloCfg, filepath.Join(soloDir, "catalog.db"), "file://"+filepath.Join(soloDir, "warehouse"), filepath.Join(soloDir, "landing"))
	for i, from := range []string{first, second} {
		land(filepath.Join(soloDir, "landing"), from, strconv.Itoa(i)+"-")
		if code, _, errs := runCLI(t, "-c", soloCfg, "--state-dir", soloDir, "run"); code != exitOK {
			t.Fatalf("solo run %d: exit %d\n%s", i+1, code, tail(errs, 3000))
		}
	}
	ref, err := catalog.Open(ctx, catalog.Config{Type: "sql", URI: filepath.Join(soloDir, "catalog.db"), Warehouse: "file://" + filepath.Join(soloDir, "warehouse")})
	if err != nil {
		t.Fatal(err)
	}
	// Rows name their landing file (_source_file): each run has its own landing directory.
	rows := func(lh *catalog.Lakehouse, ident, landing string) []string {
		t.Helper()
		out := tableRows(t, lh, ident)
		for i := range out {
			out[i] = strings.ReplaceAll(out[i], landing+string(filepath.Separator), "<landing>/")
		}
		slices.Sort(out)
		return out
	}
	want := map[string][]string{}
	for _, ident := range idents {
		if want[ident] = rows(ref, ident, filepath.Join(soloDir, "landing")); len(want[ident]) == 0 {
			t.Fatalf("%s: the oracle has no rows", ident)
		}
	}
	ref.Close()

	admin, err := sql.Open("pgx", pg.URI(true))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()

	for _, tc := range []struct {
		name     string
		table    string
		manifest bool
	}{
		{"silver_before_manifest", "silver.orders", true},
		{"silver_metadata_stored", "silver.orders", false},
		{"gold_before_manifest", "gold.daily_revenue_kpi", true},
		{"gold_metadata_stored", "gold.daily_revenue_kpi", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Its own catalog database, warehouse prefix, landing and state dir; the store
			// and the PostgreSQL server are shared.
			db := strings.ReplaceAll(tc.name, "-", "_")
			if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+db); err != nil {
				t.Fatal(err)
			}
			casePG := *pg
			casePG.Database = db
			caseDir := filepath.Join(dir, tc.name)
			landing := filepath.Join(caseDir, "landing")
			warehouse := "s3://" + weed.Bucket + "/" + tc.name
			cfg := filepath.Join(caseDir, "pipeline.yaml")
			if err := os.MkdirAll(caseDir, 0o700); err != nil {
				t.Fatal(err)
			}
			workersConfig(t, cfg, casePG.URI(true), warehouse, landing, func(c map[string]any) {
				c["lakehouse"].(map[string]any)["s3"] = map[string]any{"endpoint": proxy.URL, "region": "us-east-1", "path_style": true,
					"access_key_id": "${GB_TEST_S3_KEY}", "secret_access_key": "${GB_TEST_S3_SECRET}"}
			})
			run := func() (int, string, time.Duration) {
				start := time.Now()
				code, out, errs := runCLI(t, "-c", cfg, "--state-dir", filepath.Join(caseDir, "state"), "run")
				return code, out + errs, time.Since(start)
			}
			open := func() *catalog.Lakehouse {
				return openShared(t, catalog.Config{Type: catalog.TypeSQL, URI: casePG.URI(true), Warehouse: warehouse, S3: weed.S3()})
			}

			land(landing, first, "0-")
			if code, out, _ := run(); code != exitOK {
				t.Fatalf("run 1: exit %d\n%s", code, tail(out, 3000))
			}
			lh := open()
			tbl, err := lh.LoadTable(ctx, tc.table)
			if err != nil {
				t.Fatal(err)
			}
			loc := strings.TrimPrefix(strings.TrimRight(tbl.Location(), "/"), "s3:/") + "/"

			// Run 2, in a goroutine: the test goroutine stops the store when the proxy asks.
			land(landing, second, "1-")
			proxy.arm(s3Fault{loc: loc, manifest: tc.manifest})
			var (
				code int
				out  string
				took time.Duration
			)
			done := make(chan struct{})
			go func() {
				defer close(done)
				code, out, took = run()
			}()
			limit := time.After(5 * time.Minute)
		wait:
			for {
				select {
				case <-proxy.stop:
					weed.Stop(t)
					proxy.stopped <- struct{}{}
				case <-done:
					break wait
				case <-limit:
					t.Fatalf("the run with the store stopped mid-commit still runs after 5 minutes")
				}
			}
			tripped, stored := proxy.disarm()
			if !tripped {
				t.Fatalf("the fault did not fire in the commit of %s (exit %d)\n%s", tc.table, code, tail(out, 3000))
			}
			t.Logf("run 2 with the store stopped: exit %d in %v, %s", code, took.Round(time.Millisecond), lineOf(out, "goldbridge:"))
			if code != exitFailure || strings.Contains(out, "panic") || strings.Contains(out, weed.SecretKey) || strings.Contains(out, pg.Password) {
				t.Fatalf("run with the store stopped mid-commit: exit %d, want %d, without a panic or a secret\n%s", code, exitFailure, tail(out, 3000))
			}
			if took > 3*time.Minute {
				t.Errorf("the failing run took %v", took)
			}
			var failed []string // what the failed write stored under the table: nothing references it
			for _, p := range stored {
				if strings.HasPrefix(p, "s3:/"+loc) {
					failed = append(failed, p)
				}
			}
			if !slices.ContainsFunc(failed, func(p string) bool { return strings.Contains(p, "/data/") }) ||
				!tc.manifest && !slices.ContainsFunc(failed, func(p string) bool { return strings.HasSuffix(p, ".metadata.json") }) {
				t.Fatalf("the failed write stored %v under %s: not the files the fault is placed after", failed, loc)
			}
			if tc.manifest && slices.ContainsFunc(failed, func(p string) bool { return strings.HasSuffix(p, ".metadata.json") }) {
				t.Fatalf("the failed write stored a metadata file with the store stopped at its first manifest: %v", failed)
			}

			weed.Start(t)
			code, out, took = run()
			if code != exitOK {
				t.Fatalf("rerun after the restart: exit %d\n%s", code, tail(out, 3000))
			}
			meta := 0
			for _, p := range failed {
				if strings.Contains(p, "/metadata/") {
					meta++
				}
			}
			t.Logf("rerun: %v; the failed write left %d data files and %d metadata files", took.Round(time.Millisecond), len(failed)-meta, meta)

			lh = open()
			check := func(when string) {
				t.Helper()
				for _, ident := range idents {
					compareRows(t, ident+" "+when, rows(lh, ident, landing), want[ident])
				}
			}
			check("after the rerun")
			fs := tableFS(t, lh, tc.table)
			for _, p := range failed {
				if !exists(t, fs, p) {
					t.Errorf("%s, stored by the failed write, is gone before the sweep", p)
				}
			}
			sw, err := lh.SweepOrphans(ctx, 0)
			if err != nil || sw.Files != len(failed) {
				t.Errorf("the sweep deleted %d files (err %v), want the %d the failed write stored: %v", sw.Files, err, len(failed), failed)
			}
			for _, p := range failed {
				if exists(t, fs, p) {
					t.Errorf("%s is still there after the sweep", p)
				}
			}
			check("after the sweep")
			assertNoOrphans(t, lh)
		})
	}
}

// tableFS is the file IO of ident's table.
func tableFS(t *testing.T, lh *catalog.Lakehouse, ident string) iceio.IO {
	t.Helper()
	tbl, err := lh.LoadTable(context.Background(), ident)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := tbl.FS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// exists reports whether the object at path is there.
func exists(t *testing.T, fs iceio.IO, path string) bool {
	t.Helper()
	f, err := fs.Open(path)
	if errors.Is(err, iofs.ErrNotExist) {
		return false
	}
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	f.Close()
	return true
}
