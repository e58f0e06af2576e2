package chlocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Several servers on one host (docs/operations.md, "Ports: one pair per state dir").
//
// libchdb 26.7 ends the whole server process on a failed native-protocol login
// (clickhouse-local installs Poco's KillingErrorHandler whenever it is not interactive;
// no setting changes that). A client that logs into a server it did not start — another
// goldbridge's, on the same ports — therefore kills that server. So a server started here
// answers, without a login, GET IdentityPath with its data directory and ports, and
// goldbridge asks there (Identify) before it logs in: it logs into a server only when the
// answer is its own data directory and ports. A failed HTTP login does not end the server,
// and the identity page needs none; nothing here ever touches another server's native port.

// IdentityPath is the HTTP path at which a server started by this package tells, without
// a login, which data directory and ports it serves. Like /ping it needs no user: it tells
// another local user the data directory's path, nothing else.
const IdentityPath = "/goldbridge/identity"

// identityServer marks an Identity answer.
const identityServer = "goldbridge-chlocal"

// Identity is what a server started by this package answers at IdentityPath.
type Identity struct {
	Server   string `json:"server"` // always "goldbridge-chlocal"
	Path     string `json:"path"`   // absolute data directory
	TCPPort  int    `json:"tcp_port"`
	HTTPPort int    `json:"http_port"`
}

// identityOf is the identity of a server with opt (defaults applied).
func identityOf(opt Options) Identity {
	return Identity{Server: identityServer, Path: opt.Path, TCPPort: opt.TCPPort, HTTPPort: opt.HTTPPort}
}

// Is reports whether id is the identity of the server with data directory path (made
// absolute) and these ports.
func (id Identity) Is(path string, tcpPort, httpPort int) bool {
	abs, err := filepath.Abs(path)
	return err == nil && id.Server == identityServer && id.Path == abs && id.TCPPort == tcpPort && id.HTTPPort == httpPort
}

var (
	// ErrNoServer reports that nothing listens on the port Identify asked.
	ErrNoServer = errors.New("no server listens there")
	// ErrNotEmbedded reports a port held by something that is not a server started by
	// this package (another ClickHouse, a goldbridge from before identities, any program).
	ErrNotEmbedded = errors.New("held by a server that is not a goldbridge embedded ClickHouse")
)

// Identify asks the server whose HTTP interface is host:port which data directory and
// ports it serves, without logging in (IdentityPath). It returns ErrNoServer if the
// connection is refused, and an error wrapping ErrNotEmbedded if something else answers
// (or nothing does in time).
func Identify(ctx context.Context, host string, port int) (Identity, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(port)) + IdentityPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Identity{}, err
	}
	resp, err := oneShotClient(2 * time.Second).Do(req)
	if errors.Is(err, syscall.ECONNREFUSED) {
		return Identity{}, fmt.Errorf("%s: %w", net.JoinHostPort(host, strconv.Itoa(port)), ErrNoServer)
	}
	if err != nil {
		return Identity{}, fmt.Errorf("%s: %w (%v)", net.JoinHostPort(host, strconv.Itoa(port)), ErrNotEmbedded, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	var id Identity
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &id) != nil || id.Server != identityServer {
		return Identity{}, fmt.Errorf("%s: %w (%s answers %s)", net.JoinHostPort(host, strconv.Itoa(port)), ErrNotEmbedded, IdentityPath, resp.Status)
	}
	return id, nil
}

// PortError reports that a port a server needs is taken.
type PortError struct {
	Port int
	// Holder is the identity of the embedded server that holds the port, when it answers
	// as one; nil otherwise.
	Holder *Identity
	Err    error
}

func (e *PortError) Error() string {
	if h := e.Holder; h != nil {
		return fmt.Sprintf("port %d is taken by the embedded ClickHouse of %s (tcp %d, http %d)", e.Port, h.Path, h.TCPPort, h.HTTPPort)
	}
	return fmt.Sprintf("port %d is not free: %v", e.Port, e.Err)
}

func (e *PortError) Unwrap() error { return e.Err }

// checkPorts returns a *PortError if a port of opt cannot be bound now, naming the
// embedded server that holds it when its HTTP port answers as one.
func checkPorts(ctx context.Context, opt Options) error {
	for _, port := range []int{opt.HTTPPort, opt.TCPPort} {
		err := portFree(opt.ListenHost, port)
		if err == nil {
			continue
		}
		pe := &PortError{Port: port, Err: err}
		if port == opt.HTTPPort {
			if id, ierr := Identify(ctx, opt.ListenHost, port); ierr == nil {
				pe.Holder = &id
			}
		}
		return pe
	}
	return nil
}

// Ports are the two ports of a server.
type Ports struct {
	TCP  int `json:"tcp_port"`
	HTTP int `json:"http_port"`
}

// ChoosePorts looks in [portsLow, portsHigh): below Linux's default range of ephemeral
// ports (32768-60999), so that no outgoing connection holds a recorded port while its
// server is down, and above the common services.
const (
	portsLow  = 20000
	portsHigh = 32000
)

// ChoosePorts returns two ports that can be bound on host now: prefer if it is given and
// both of its ports can, else the first pair (p, p+1) that can, starting at a pair
// derived from key (two state directories set up at the same time try different pairs)
// and never using a port of avoid.
func ChoosePorts(host, key string, prefer *Ports, avoid ...int) (Ports, error) {
	free := func(p int) bool {
		for _, a := range avoid {
			if p == a {
				return false
			}
		}
		return portFree(host, p) == nil
	}
	if prefer != nil && prefer.TCP != prefer.HTTP && free(prefer.TCP) && free(prefer.HTTP) {
		return *prefer, nil
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	pairs := (portsHigh - portsLow) / 2
	start := int(h.Sum32() % uint32(pairs))
	for i := range pairs {
		p := portsLow + 2*((start+i)%pairs)
		if free(p) && free(p+1) {
			return Ports{TCP: p, HTTP: p + 1}, nil
		}
	}
	return Ports{}, fmt.Errorf("no two free ports in %d-%d on %s", portsLow, portsHigh-1, host)
}

// ReadPorts returns the ports recorded in file (by EnsurePorts); an error wrapping
// os.ErrNotExist if there is none.
func ReadPorts(file string) (Ports, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return Ports{}, fmt.Errorf("ports file: %w", err)
	}
	var p Ports
	if err := json.Unmarshal(b, &p); err != nil {
		return Ports{}, fmt.Errorf("ports file %s: %w", file, err)
	}
	for _, v := range []int{p.TCP, p.HTTP} {
		if v <= 0 || v > 65535 {
			return Ports{}, fmt.Errorf("ports file %s: invalid port %d", file, v)
		}
	}
	if p.TCP == p.HTTP {
		return Ports{}, fmt.Errorf("ports file %s: tcp_port and http_port are both %d", file, p.TCP)
	}
	return p, nil
}

// EnsurePorts returns the ports recorded in file, first recording there (mode 0600, its
// directory 0700 if missing) the ones choose returns if file does not exist. Two
// processes that record at once get the same ports: the first file written wins.
// recorded reports whether this call wrote the file.
func EnsurePorts(file string, choose func() (Ports, error)) (p Ports, recorded bool, err error) {
	p, err = ReadPorts(file)
	if !errors.Is(err, os.ErrNotExist) {
		return p, false, err
	}
	if p, err = choose(); err != nil {
		return Ports{}, false, fmt.Errorf("ports file %s: %w", file, err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return Ports{}, false, fmt.Errorf("ports file: %w", err)
	}
	b, _ := json.Marshal(p) // two ints: cannot fail
	if err := writeNew(file, append(b, '\n')); err != nil {
		if errors.Is(err, os.ErrExist) { // recorded meanwhile by another process
			p, err = ReadPorts(file)
			return p, false, err
		}
		return Ports{}, false, fmt.Errorf("ports file: %w", err)
	}
	return p, true, nil
}

// identityHandler is the http_handlers rule that answers IdentityPath with id.
func identityHandler(id Identity) string {
	b, _ := json.Marshal(id) // strings and ints: cannot fail
	var s strings.Builder
	fmt.Fprintf(&s, `    <rule>
      <url>%s</url>
      <methods>GET</methods>
      <handler><type>static</type><status>200</status><content_type>application/json</content_type><response_content>%s</response_content></handler>
    </rule>
`, IdentityPath, xmlText(string(b)))
	return s.String()
}
