package hotconn

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/serving/chlocal"
)

func parse(t *testing.T, yaml, stateDir string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), stateDir, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestPasswords: goldbridge's ClickHouse password is the configured one, else the
// password file's first line, else (embedded) one generated once into the state dir,
// private to its owner, and the same at the next call; a reader of the embedded server
// gets one of its own.
func TestPasswords(t *testing.T) {
	dir := t.TempDir()
	if pw, err := Password(parse(t, "version: 1\nclickhouse: {password: s3cret}\n", dir)); err != nil || pw != "s3cret" {
		t.Errorf("configured: %q %v", pw, err)
	}
	file := filepath.Join(dir, "pw")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pw, err := Password(parse(t, "version: 1\nclickhouse: {password_file: "+file+"}\n", dir)); err != nil || pw != "from-file" {
		t.Errorf("file: %q %v", pw, err)
	}
	cfg := parse(t, "version: 1\nclickhouse: {local: {readers: [{name: bi}]}}\n", dir)
	first, err := Password(cfg)
	if err != nil || len(first) < 16 {
		t.Fatalf("generated: %q %v", first, err)
	}
	fi, err := os.Stat(filepath.Join(dir, "clickhouse.password"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("generated password file: %v %v", fi, err)
	}
	if again, _ := Password(cfg); again != first {
		t.Error("a second call generated another password")
	}
	opt, err := EmbeddedOptions(cfg)
	if err != nil || opt.Password != first || len(opt.Readers) != 1 || opt.Readers[0].Password == "" || opt.Readers[0].Password == first {
		t.Errorf("embedded options: %+v %v", opt, err)
	}
}

// TestReaderBoundsReachTheServer: clickhouse.local's readers' queue and bounds are the
// embedded server's options, as configured.
func TestReaderBoundsReachTheServer(t *testing.T) {
	cfg := parse(t, "version: 1\nclickhouse: {local: {reader_queries: 3, reader_timeout: 30s, reader_memory: 2147483648}}\n", t.TempDir())
	opt, err := EmbeddedOptions(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if opt.ReaderQueries != 3 || opt.ReaderTimeout != 30*time.Second || opt.ReaderMemory != 2<<30 {
		t.Fatalf("readers' options: queries %d, timeout %v, memory %d", opt.ReaderQueries, opt.ReaderTimeout, opt.ReaderMemory)
	}
}

// TestCheckFindsNoServer: with nothing on the embedded server's HTTP port, Check says so
// (chlocal.ErrNoServer), which is what lets a command start the server.
func TestCheckFindsNoServer(t *testing.T) {
	ports, err := chlocal.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	cfg := parse(t, "version: 1\n", t.TempDir())
	cfg.ClickHouse.Local.TCPPort, cfg.ClickHouse.Local.HTTPPort = ports[0], ports[1]
	if err := Check(context.Background(), cfg); !errors.Is(err, chlocal.ErrNoServer) {
		t.Fatalf("check with no server: %v", err)
	}
}

// TestPortsAdvice: a port held by another state dir's server names what to do, with or
// without a ports file; other errors pass unchanged.
func TestPortsAdvice(t *testing.T) {
	cfg := parse(t, "version: 1\n", t.TempDir())
	other := errors.New("boom")
	if PortsAdvice(cfg, other) != other {
		t.Error("another error was changed")
	}
	held := &chlocal.PortError{Port: 18123, Holder: &chlocal.Identity{Path: "/elsewhere"}}
	if err := PortsAdvice(cfg, held); !errors.As(err, new(*chlocal.PortError)) || !strings.Contains(err.Error(), "each state dir needs ports of its own") {
		t.Errorf("no ports file: %v", err)
	}
	cfg.ClickHouse.Local.PortsFile = PortsFile(cfg)
	if err := PortsAdvice(cfg, held); !strings.Contains(err.Error(), "delete that file") {
		t.Errorf("ports file: %v", err)
	}
}
