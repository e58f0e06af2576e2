package lakehousetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	iceio "github.com/apache/iceberg-go/io"

	"goldbridge/lakehouse/catalog"
)

// The real servers below are started by the project's scripts (scripts/seaweedfs.sh,
// scripts/postgres.sh) on free loopback ports with fresh random credentials, one per
// test, and stopped when the test ends. Under -short the test is skipped; without the
// server installed it fails and names the make target (`make test` installs both).

// SeaweedFS is a running SeaweedFS `weed mini`: an S3 store with the bucket Bucket and
// the Iceberg REST catalog whose warehouse is TableBucket.
type SeaweedFS struct {
	Endpoint    string // http://127.0.0.1:port (S3)
	CatalogURI  string // http://127.0.0.1:port (Iceberg REST, without /v1)
	AccessKey   string
	SecretKey   string
	Bucket      string
	TableBucket string
	dir         string
	env         []string // what scripts/seaweedfs.sh start needs: the ports and the keys
}

// S3 is the catalog S3 configuration for this store (path-style, the admin keys).
func (s *SeaweedFS) S3() catalog.S3Config {
	return catalog.S3Config{Endpoint: s.Endpoint, Region: "us-east-1", AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey, PathStyle: true}
}

// Start starts the server (again, after Stop: on the same ports, with the same keys and
// buckets, and the objects it stored before).
func (s *SeaweedFS) Start(t testing.TB) {
	t.Helper()
	s.up(t, s.start)
}

// up runs start, then waits until the bucket takes writes; it fails t if either fails.
func (s *SeaweedFS) up(t testing.TB, start func() error) {
	t.Helper()
	t0 := time.Now()
	if err := start(); err != nil {
		t.Fatal(err)
	}
	s.waitBucket(t)
	t.Logf("seaweedfs up in %v (s3 %s, catalog %s)", time.Since(t0).Round(time.Millisecond), s.Endpoint, s.CatalogURI)
}

// start runs scripts/seaweedfs.sh start; its error carries the script's output and the
// tail of weed's.
func (s *SeaweedFS) start() error {
	if out, err := script("seaweedfs.sh", s.env, "start", s.dir); err != nil {
		return fmt.Errorf("start seaweedfs: %w\n%s\n%s", err, out, tailFile(filepath.Join(s.dir, "stdout")))
	}
	return nil
}

// usePorts points the server at ports: S3, the Iceberg catalog, then weed's nine others.
func (s *SeaweedFS) usePorts(ports []int) {
	s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	s.CatalogURI = "http://127.0.0.1:" + strconv.Itoa(ports[1])
	var rest []string
	for _, p := range ports[2:] {
		rest = append(rest, strconv.Itoa(p))
	}
	s.env = []string{
		"GB_S3_PORT=" + strconv.Itoa(ports[0]), "GB_ICEBERG_PORT=" + strconv.Itoa(ports[1]),
		"GB_WEED_PORTS=" + strings.Join(rest, " "),
		"GB_S3_ACCESS_KEY=" + s.AccessKey, "GB_S3_SECRET_KEY=" + s.SecretKey,
		"GB_S3_BUCKET=" + s.Bucket, "GB_TABLE_BUCKET=" + s.TableBucket,
	}
}

// waitBucket returns once an object can be written to Bucket: weed answers S3 before it
// has created its buckets, and an anonymous request cannot tell a missing bucket from a
// refused one.
func (s *SeaweedFS) waitBucket(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	props := map[string]string{iceio.S3EndpointURL: s.Endpoint, iceio.S3Region: "us-east-1",
		iceio.S3AccessKeyID: s.AccessKey, iceio.S3SecretAccessKey: s.SecretKey, iceio.S3ForceVirtualAddressing: "false"}
	probe := "s3://" + s.Bucket + "/.goldbridge-test-ready"
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var fs iceio.IO
		if fs, err = iceio.LoadFS(ctx, props, probe); err != nil {
			continue
		}
		w, ok := fs.(iceio.WriteFileIO)
		if !ok {
			t.Fatalf("the S3 file IO %T cannot write", fs)
		}
		if err = w.WriteFile(probe, nil); err == nil {
			if err := fs.Remove(probe); err != nil {
				t.Fatalf("seaweedfs bucket %s: %v", s.Bucket, err)
			}
			return
		}
	}
	t.Fatalf("seaweedfs bucket %s not writable after 30 s: %v", s.Bucket, err)
}

// Stop stops the server (data stays in its directory); Start brings it back on the same
// ports. The test's cleanup stops it too.
func (s *SeaweedFS) Stop(t testing.TB) {
	t.Helper()
	if out, err := script("seaweedfs.sh", nil, "stop", s.dir); err != nil {
		t.Fatalf("stop seaweedfs: %v\n%s", err, out)
	}
}

// Postgres is a running PostgreSQL cluster with the database Database, reached as the
// superuser goldbridge with Password (password authentication only).
type Postgres struct {
	Port     int
	Password string
	Database string
	dir      string
}

// URI is the postgres:// URI of the database, with the password when withPassword.
func (p *Postgres) URI(withPassword bool) string {
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)), Path: "/" + p.Database,
		RawQuery: "sslmode=disable"}
	if withPassword {
		u.User = url.UserPassword("goldbridge", p.Password)
	} else {
		u.User = url.User("goldbridge")
	}
	return u.String()
}

// StartSeaweedFS starts SeaweedFS (S3 + Iceberg REST catalog) for the test.
func StartSeaweedFS(t testing.TB) *SeaweedFS {
	t.Helper()
	skipShort(t, "SeaweedFS")
	waitSeaweedFS(t)
	s := newSeaweedFS(t)
	s.up(t, func() error { return onFreePorts(t, 11, s.startOn) })
	return s
}

// newSeaweedFS is a stopped server with fresh keys and a private directory, stopped and
// removed when the test ends.
func newSeaweedFS(t testing.TB) *SeaweedFS {
	t.Helper()
	s := &SeaweedFS{
		AccessKey: "gb" + secret(t)[:10], SecretKey: secret(t),
		Bucket: "warehouse", TableBucket: "lakehouse",
		dir: privateDir(t, "gb-weed-"),
	}
	t.Cleanup(func() {
		if out, err := script("seaweedfs.sh", nil, "stop", s.dir); err != nil {
			t.Errorf("stop seaweedfs: %v\n%s", err, out)
		}
		_ = os.RemoveAll(s.dir)
	})
	return s
}

// startOn starts a fresh server on ports (S3, the catalog, weed's nine others). What an
// earlier failed start left goes first: weed may outlive a listener's failure, so it is
// stopped, and its half-made store is removed.
func (s *SeaweedFS) startOn(ports []int) error {
	if out, err := script("seaweedfs.sh", nil, "stop", s.dir); err != nil {
		return fmt.Errorf("stop seaweedfs: %w\n%s", err, out)
	}
	for _, sub := range []string{"data", "logs"} {
		if err := os.RemoveAll(filepath.Join(s.dir, sub)); err != nil {
			return err
		}
	}
	s.usePorts(ports)
	return s.start()
}

// onFreePorts calls start with n ports that were free a moment ago, and again with fresh
// ones (up to portTries in all) while it fails because one of them was taken in between:
// freePorts hands out ports from the kernel's ephemeral range, where any process's next
// outbound connection may claim one before the server binds it.
func onFreePorts(t testing.TB, n int, start func(ports []int) error) error {
	t.Helper()
	for try := 1; ; try++ {
		err := start(freePorts(t, n))
		if err == nil || try == portTries || !portTaken(err) {
			return err
		}
		t.Logf("start attempt %d: a port was taken before the server bound it; again on fresh ports", try)
	}
}

// portTries bounds the starts onFreePorts makes.
const portTries = 3

// portTaken reports whether err (a start's error, the server's log tail included) says a
// port was already bound: Go servers and PostgreSQL say "address already in use" when the
// bind fails, weed "is not available" when its own check before binding does.
func portTaken(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "address already in use") || strings.Contains(msg, "is not available on")
}

// waitSeaweedFS returns once the weed binary is installed. `make test` builds it in the
// background from its start (17 to 35 minutes cold on 2 cores), so a test may find that
// build still running: it waits up to weedWait (and its deadline allows), then skips,
// saying so — only on a machine's first run, before the binary is cached, so that the
// build cannot push CI past its budget. A failed build, or none at all, fails the test.
func waitSeaweedFS(t testing.TB) {
	t.Helper()
	out, err := script("seaweedfs.sh", nil, "installed")
	if err == nil {
		return
	}
	if !strings.Contains(out, "is missing") {
		t.Fatalf("seaweedfs: %v\n%s", err, out)
	}
	limit := weedWait
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			limit = min(limit, time.Until(dl)-5*time.Minute)
		}
	}
	if limit < time.Second {
		t.Fatalf("seaweedfs is not installed and the test deadline leaves no time to wait for a build (run `make seaweedfs`)")
	}
	start := time.Now()
	t.Logf("waiting up to %v for the SeaweedFS build in progress", limit.Round(time.Second))
	env := []string{"GB_WEED_WAIT=" + strconv.Itoa(int(limit.Seconds()))}
	if out, err := scriptTimeout(limit+time.Minute, "seaweedfs.sh", env, "wait"); err != nil {
		if strings.Contains(out, "did not finish within") {
			t.Skipf("SKIPPED: the first SeaweedFS build on this machine is still running after %v (it is cached for the next run; `make seaweedfs` builds it now):\n%s",
				limit.Round(time.Second), out)
		}
		t.Fatalf("seaweedfs is not installed (`make seaweedfs` builds it): %v\n%s", err, out)
	}
	t.Logf("the SeaweedFS build finished after %v of waiting", time.Since(start).Round(time.Second))
}

// weedWait bounds how long a test waits for a SeaweedFS build in progress.
const weedWait = 5 * time.Minute

// StartPostgres starts a PostgreSQL cluster with the database "iceberg" for the test.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	skipShort(t, "PostgreSQL")
	if out, err := script("postgres.sh", nil, "installed"); err != nil {
		t.Fatalf("postgresql is not installed (run `make postgres`): %v\n%s", err, out)
	}
	p := newPostgres(t)
	p.up(t, func() error {
		return onFreePorts(t, 1, func(ports []int) error {
			p.Port = ports[0]
			return p.start()
		})
	})
	return p
}

// newPostgres is a stopped cluster with a fresh password and a private directory, stopped
// and removed when the test ends.
func newPostgres(t testing.TB) *Postgres {
	t.Helper()
	p := &Postgres{Password: secret(t), Database: "iceberg", dir: privateDir(t, "gb-pg-")}
	// The cluster runs as the postgres user when the test runs as root: it must be able
	// to reach its data directory (the directory itself stays closed to everyone else).
	if err := os.Chmod(p.dir, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := script("postgres.sh", nil, "stop", p.dir); err != nil {
			t.Errorf("stop postgres: %v\n%s", err, out)
		}
		_ = os.RemoveAll(p.dir)
	})
	return p
}

// Start starts the cluster (again, after Stop: the data persists).
func (p *Postgres) Start(t testing.TB) {
	t.Helper()
	p.up(t, p.start)
}

// up runs start and fails t if it fails.
func (p *Postgres) up(t testing.TB, start func() error) {
	t.Helper()
	t0 := time.Now()
	if err := start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("postgres up in %v on port %d", time.Since(t0).Round(time.Millisecond), p.Port)
}

// start runs scripts/postgres.sh start on Port; its error carries the script's output and
// the tail of the server's log.
func (p *Postgres) start() error {
	env := []string{"GB_PG_PORT=" + strconv.Itoa(p.Port), "GB_PG_PASSWORD=" + p.Password, "GB_PG_DATABASE=" + p.Database}
	if out, err := script("postgres.sh", env, "start", p.dir); err != nil {
		return fmt.Errorf("start postgres: %w\n%s\n%s", err, out, tailFile(filepath.Join(p.dir, "data", "server.log")))
	}
	return nil
}

// Stop stops the cluster (pg_ctl -m fast: open connections are cut).
func (p *Postgres) Stop(t testing.TB) {
	t.Helper()
	if out, err := script("postgres.sh", nil, "stop", p.dir); err != nil {
		t.Fatalf("stop postgres: %v\n%s", err, out)
	}
}

func skipShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("integration test: needs a real %s (skipped with -short)", what)
	}
}

// script runs scripts/<name> from the repository root with env added to a minimal
// environment (the credentials go to the script and its server, nowhere else).
func script(name string, env []string, args ...string) (string, error) {
	return scriptTimeout(3*time.Minute, name, env, args...)
}

// scriptTimeout is script with a time limit other than 3 minutes.
func scriptTimeout(limit time.Duration, name string, env []string, args ...string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", name), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	for _, k := range []string{"GOLDBRIDGE_CACHE", "XDG_CACHE_HOME", "GOPATH", "GOMODCACHE", "GOCACHE", "GOPROXY", "GOFLAGS"} {
		if v, ok := os.LookupEnv(k); ok {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	// The scripts point the servers' output at their own logs, so the servers hold no
	// end of this pipe and the call returns when the script does.
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// repoRoot is the directory holding go.mod, found from the working directory up.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("lakehousetest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// secret is a fresh random password.
func secret(t testing.TB) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// privateDir is a fresh 0700 directory outside t.TempDir (whose parents a server user
// other than the test's cannot traverse), removed by the caller's cleanup.
func privateDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func tailFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}
