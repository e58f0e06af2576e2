package chlocal_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"goldbridge/serving/chlocal"
	"goldbridge/serving/chtest"
)

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestIdentify: a server answers, without a login, its data directory and ports; a port
// nothing listens on is ErrNoServer; another HTTP server is ErrNotEmbedded.
func TestIdentify(t *testing.T) {
	srv := chtest.Server(t)
	ctx := context.Background()
	tcp, httpPort := portOf(t, srv.TCPAddr()), portOf(t, srv.HTTPAddr())
	id, err := chlocal.Identify(ctx, chlocal.DefaultListenHost, httpPort)
	if err != nil {
		t.Fatal(err)
	}
	if !id.Is(srv.Path(), tcp, httpPort) || id.Path != srv.Path() {
		t.Fatalf("identity %+v, want path %s tcp %d http %d", id, srv.Path(), tcp, httpPort)
	}
	if id.Is(srv.Path(), tcp+1, httpPort) || id.Is(filepath.Join(srv.Path(), "x"), tcp, httpPort) {
		t.Fatalf("identity %+v matches another server", id)
	}

	free, err := chlocal.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chlocal.Identify(ctx, chlocal.DefaultListenHost, free[0]); !errors.Is(err, chlocal.ErrNoServer) {
		t.Fatalf("nothing listening: %v, want ErrNoServer", err)
	}

	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("Ok.\n")) }))
	defer other.Close()
	if _, err := chlocal.Identify(ctx, chlocal.DefaultListenHost, portOf(t, other.Listener.Addr().String())); !errors.Is(err, chlocal.ErrNotEmbedded) {
		t.Fatalf("another HTTP server: %v, want ErrNotEmbedded", err)
	}
}

// TestStartOnAnotherServersPorts: a server started on the ports of a running one fails
// at once, naming the port and the running server's data directory, and never logs in
// to it (a failed native login aborts a libchdb server): the running one keeps its
// process.
func TestStartOnAnotherServersPorts(t *testing.T) {
	srv := chtest.Server(t)
	pid := srv.PID()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tcp, httpPort := portOf(t, srv.TCPAddr()), portOf(t, srv.HTTPAddr())
	_, err := chlocal.Start(ctx, chlocal.Options{Path: t.TempDir(), TCPPort: tcp, HTTPPort: httpPort, Password: "another"})
	var pe *chlocal.PortError
	if !errors.As(err, &pe) || pe.Port != httpPort || pe.Holder == nil || pe.Holder.Path != srv.Path() {
		t.Fatalf("Start on a running server's ports: %v, want a PortError naming port %d and %s", err, httpPort, srv.Path())
	}
	t.Log(err)
	time.Sleep(500 * time.Millisecond) // an aborting server would be gone by now
	if exited, status := srv.ExitStatus(); exited || srv.PID() != pid {
		t.Fatalf("the running server exited (%v) or was replaced", status)
	}
}

// TestChoosePorts: the preferred pair when it is free, else a free pair derived from the
// key, never an avoided port, the same for the same key.
func TestChoosePorts(t *testing.T) {
	free, err := chlocal.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	prefer := chlocal.Ports{TCP: free[0], HTTP: free[1]}
	if p, err := chlocal.ChoosePorts(chlocal.DefaultListenHost, "k", &prefer); err != nil || p != prefer {
		t.Fatalf("free preferred pair: %v %v, want %v", p, err, prefer)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(chlocal.DefaultListenHost, strconv.Itoa(prefer.HTTP)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := chlocal.ChoosePorts(chlocal.DefaultListenHost, "/srv/a/var", &prefer)
	if err != nil || a == prefer || a.TCP+1 != a.HTTP || a.TCP < 20000 || a.HTTP >= 32000 {
		t.Fatalf("taken preferred pair: %v %v", a, err)
	}
	if again, err := chlocal.ChoosePorts(chlocal.DefaultListenHost, "/srv/a/var", nil); err != nil || again != a {
		t.Fatalf("same key: %v %v, want %v", again, err, a)
	}
	if b, err := chlocal.ChoosePorts(chlocal.DefaultListenHost, "/srv/b/var", nil); err != nil || b == a {
		t.Fatalf("another key: %v %v, the same pair as %v", b, err, a)
	}
	if c, err := chlocal.ChoosePorts(chlocal.DefaultListenHost, "/srv/a/var", nil, a.HTTP); err != nil || c.TCP == a.HTTP || c.HTTP == a.HTTP {
		t.Fatalf("avoiding %d: %v %v", a.HTTP, c, err)
	}
}

// TestEnsurePorts: the first call records the chosen ports (0600), later ones and
// concurrent ones read them.
func TestEnsurePorts(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state", "clickhouse.ports")
	var mu sync.Mutex
	n := 0
	choose := func() (chlocal.Ports, error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		return chlocal.Ports{TCP: 20000 + 2*n, HTTP: 20001 + 2*n}, nil
	}
	got := make([]chlocal.Ports, 8)
	recorded := make([]bool, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			var err error
			if got[i], recorded[i], err = chlocal.EnsurePorts(file, choose); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	writers := 0
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("concurrent calls got %v and %v", got[0], got[i])
		}
		if recorded[i] {
			writers++
		}
	}
	if writers != 1 {
		t.Fatalf("%d calls recorded the ports, want 1", writers)
	}
	if p, err := chlocal.ReadPorts(file); err != nil || p != got[0] {
		t.Fatalf("ReadPorts: %v %v, want %v", p, err, got[0])
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("ports file: %v %v, want mode 0600", st.Mode(), err)
	}
	if p, rec, err := chlocal.EnsurePorts(file, func() (chlocal.Ports, error) { return chlocal.Ports{TCP: 1, HTTP: 2}, nil }); err != nil || rec || p != got[0] {
		t.Fatalf("later call: %v %v %v, want the recorded %v", p, rec, err, got[0])
	}
}
