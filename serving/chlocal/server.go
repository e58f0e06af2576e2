package chlocal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	readyTimeout = 60 * time.Second       // Start: child start to /ping answering "Ok."
	exitTimeout  = 15 * time.Second       // Stop: KILL QUERY to child exit, before SIGKILL
	killGrace    = 100 * time.Millisecond // Stop: SIGTERM to this process's KILL QUERY
	outputKeep   = 64 << 10               // bytes of child output kept for error messages
)

// Server is a ClickHouse server running in a child process started by Start.
// Its methods are safe for concurrent use.
type Server struct {
	opt Options

	life    sync.Mutex // serialises start, Stop, Kill, Restart and the supervisor's restarts
	mu      sync.Mutex // guards p
	p       *proc      // current child; nil before the first start
	stopped bool       // Stop was called: the supervisor leaves the server down; under life
}

// proc is one run of the child process.
type proc struct {
	cmd     *exec.Cmd
	out     *ring
	done    chan struct{} // closed once the child has exited and been reaped
	err     error         // exit status; read only after done is closed
	started time.Time     // when the child was launched
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Start launches a server child process (opt.Binary re-executed, which must
// call MaybeRunChild first) and returns once it answers GET /ping; ctx bounds
// only that wait (at most 60 s). The child is SIGKILLed if this process dies.
// Path is created if missing.
func Start(ctx context.Context, opt Options) (*Server, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("chlocal start: %w", err)
	}
	if opt.Binary == "" {
		if opt.Binary, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("chlocal start: %w", err)
		}
	}
	if err := makePrivateDir(opt.Path); err != nil {
		return nil, fmt.Errorf("chlocal start: %w", err)
	}
	if err := os.MkdirAll(opt.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("chlocal start: %w", err)
	}
	s := &Server{opt: opt}
	s.life.Lock()
	defer s.life.Unlock()
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// TCPAddr returns the native protocol address, host:port.
func (s *Server) TCPAddr() string {
	return net.JoinHostPort(s.opt.ListenHost, strconv.Itoa(s.opt.TCPPort))
}

// HTTPAddr returns the HTTP interface address, host:port.
func (s *Server) HTTPAddr() string {
	return net.JoinHostPort(s.opt.ListenHost, strconv.Itoa(s.opt.HTTPPort))
}

// HTTPURL returns the HTTP interface base URL, e.g. http://127.0.0.1:8123.
func (s *Server) HTTPURL() string { return "http://" + s.HTTPAddr() }

// Path returns the absolute data directory.
func (s *Server) Path() string { return s.opt.Path }

// User returns the admin user's name.
func (s *Server) User() string { return s.opt.User }

// Password returns the admin user's password.
func (s *Server) Password() string { return s.opt.Password }

// PID returns the child's process id, or 0 if it is not running.
func (s *Server) PID() int {
	p := s.current()
	if p == nil || p.exited() {
		return 0
	}
	return p.cmd.Process.Pid
}

func (s *Server) current() *proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}

// ExitStatus reports whether the current child has exited, and its exit status then.
func (s *Server) ExitStatus() (exited bool, status error) {
	p := s.current()
	if p == nil || !p.exited() {
		return false, nil
	}
	return true, p.err
}

// Output returns the last bytes the child wrote to stdout and stderr.
func (s *Server) Output() string {
	p := s.current()
	if p == nil {
		return ""
	}
	return p.out.String()
}

// Stop stops the server gracefully and waits for the child to exit: SIGTERM
// tells the child, and 100 ms later Stop KILLs its holding query over HTTP
// (a confined child cannot reach its own port); after 15 s it SIGKILLs the
// child and returns an error.
// Client connections left open delay the exit by up to 5 s, after which
// ClickHouse exits on its own (status 1); that still counts as stopped.
// Stopping a stopped server returns nil.
func (s *Server) Stop(ctx context.Context) error {
	s.life.Lock()
	defer s.life.Unlock()
	s.stopped = true
	return s.stop(ctx)
}

func (s *Server) stop(ctx context.Context) error {
	p := s.current()
	if p == nil || p.exited() {
		return nil
	}
	if s.opt.PromptCleanup {
		s.awaitCleanup(ctx, p.started)
	}
	// SIGTERM tells the child the stop is asked for (it then exits 0 when its
	// holding query ends). A child confined by Landlock (ABI ≥ 4) may not
	// connect to any TCP port, its own included, so its own KILL QUERY always
	// fails there: this process sends it, once the signal has had a moment to
	// arrive (killGrace). Waiting 5 s for the child first made every stop of
	// the embedded server cost 5 s.
	sigErr := p.cmd.Process.Signal(syscall.SIGTERM)
	fallback := time.NewTimer(killGrace)
	defer fallback.Stop()
	if sigErr != nil {
		fallback.Reset(0)
	}
	hard := time.NewTimer(exitTimeout)
	defer hard.Stop()
	var kerr error
	for {
		select {
		case <-p.done:
			return nil
		case <-fallback.C:
			kctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			kerr = killHolder(kctx, s.HTTPURL(), s.opt.User, s.opt.Password)
			cancel()
			if kerr != nil {
				fallback.Reset(500 * time.Millisecond)
			}
		case <-hard.C:
			_ = p.cmd.Process.Kill()
			<-p.done
			return fmt.Errorf("chlocal stop: server did not exit within %s (SIGTERM: %v, kill query: %v); sent SIGKILL: %s",
				exitTimeout, sigErr, kerr, p.out.Tail(2048))
		case <-ctx.Done():
			_ = p.cmd.Process.Kill()
			<-p.done
			return fmt.Errorf("chlocal stop: %w; sent SIGKILL", ctx.Err())
		}
	}
}

// firstCleanup is how long after its start a server with PromptCleanup has run the
// first round of its tables' cleanup (cleanup_delay_period = 1 s, cleanup.go).
const firstCleanup = 1500 * time.Millisecond

// leftToClean counts what PromptCleanup still has to delete: outdated parts and
// dropped tables.
const leftToClean = "SELECT (SELECT count() FROM system.parts WHERE NOT active) + (SELECT count() FROM system.dropped_tables)"

// awaitCleanup lets a server started at started live until its first cleanup round
// (firstCleanup) before it stops, unless it has nothing left to delete. ClickHouse
// deletes outdated parts from a table's cleanup task, which first runs about a second
// after the table starts, not at shutdown: a server that lives for less than that and
// stops at once leaves what its earlier lives replaced, and so does its next life, as
// short (with a stop that no longer waited for the holding query's second-long sleep,
// 30 cron runs left 1,037 part directories for the one-shot's 61; TestPromptCleanup).
// So between two runs the data directory holds the live parts and what the last run
// replaced, which the next run deletes (docs/serving.md, "Disk"). Waiting for the last
// run's own replaced parts too would cost every run a second cleanup round (a 40-run
// soak: 2.6 s a run instead of 1.4 s). Any error ends the wait; the stop goes on.
func (s *Server) awaitCleanup(ctx context.Context, started time.Time) {
	ctx, cancel := context.WithDeadline(ctx, started.Add(firstCleanup))
	defer cancel()
	c := oneShotClient(firstCleanup)
	for {
		out, err := queryText(ctx, c, s.HTTPURL(), s.opt.User, s.opt.Password, leftToClean)
		if err != nil || strings.TrimSpace(out) == "0" {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kill SIGKILLs the child and waits until it is reaped (crash simulation;
// data already written stays on disk). Killing a stopped server returns nil.
func (s *Server) Kill() error {
	s.life.Lock()
	defer s.life.Unlock()
	p := s.current()
	if p == nil || p.exited() {
		return nil
	}
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("chlocal kill: %w", err)
	}
	<-p.done
	return nil
}

// Restart stops the server if it is running and starts it again with the same
// options and data path; tables survive.
func (s *Server) Restart(ctx context.Context) error {
	s.life.Lock()
	defer s.life.Unlock()
	if err := s.stop(ctx); err != nil {
		return fmt.Errorf("chlocal restart: %w", err)
	}
	s.stopped = false
	return s.start(ctx)
}

// Supervise keeps the server up until ctx ends or Stop is called: whenever the child
// exits on its own (a crash: libchdb 26.7 aborts on some client errors, see
// docs/operations.md) or is killed, it starts a new one at once with the same options
// and data, and reports each attempt to restarted (the old child's exit status and the
// start's error, nil once the new child answers). A failed start is retried after
// 0.1 s, doubling up to 5 s. Run it in its own goroutine.
func (s *Server) Supervise(ctx context.Context, restarted func(exit, err error)) {
	backoff := 100 * time.Millisecond
	for {
		p := s.current()
		select {
		case <-ctx.Done():
			return
		case <-p.done:
		}
		s.life.Lock()
		if s.stopped || ctx.Err() != nil {
			s.life.Unlock()
			return
		}
		if s.current() != p { // Restart replaced it meanwhile
			s.life.Unlock()
			continue
		}
		err := s.start(ctx)
		s.life.Unlock()
		if ctx.Err() != nil {
			return
		}
		if restarted != nil {
			restarted(p.err, err)
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			continue
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// start launches a child and waits for readiness; s.life must be held.
func (s *Server) start(ctx context.Context) error {
	opt := s.opt
	if err := checkPorts(ctx, opt); err != nil {
		return fmt.Errorf("chlocal start: %w", err)
	}
	p := &proc{out: newRing(outputKeep), done: make(chan struct{}), started: time.Now()}
	var w io.Writer = p.out
	if opt.Stderr != nil {
		w = teeWriter{p.out, opt.Stderr}
	}
	p.cmd = exec.Command(opt.Binary)
	p.cmd.Dir = opt.Dir // relative file names and icebergLocal tables resolve inside it
	p.cmd.Env = childEnv(opt)
	secrets, err := json.Marshal(childAccess{User: opt.User, Password: opt.Password, Readers: opt.Readers, Database: opt.Database,
		ReaderQueries: opt.ReaderQueries, ReaderTimeout: opt.ReaderTimeout, ReaderMemory: opt.ReaderMemory})
	if err != nil {
		return fmt.Errorf("chlocal start: %w", err)
	}
	p.cmd.Stdin = bytes.NewReader(secrets) // never in the environment or argv
	p.cmd.Stdout = w
	p.cmd.Stderr = w
	p.cmd.SysProcAttr = sysProcAttr()

	// Pdeathsig fires when the forking *thread* exits, so fork from a locked
	// thread that stays alive until the child has been reaped.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("chlocal start: %s: %w", opt.Binary, err)
	}
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()

	if err := s.waitReady(ctx, p); err != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
		return err
	}
	if err := s.createReadersQueue(ctx); err != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("chlocal start: the readers' queue: %w", err)
	}
	return nil
}

// createReadersQueue creates the readers' workload (access.go, "The readers' queue")
// on a server that has readers.
func (s *Server) createReadersQueue(ctx context.Context) error {
	if len(s.opt.Readers) == 0 {
		return nil
	}
	client := oneShotClient(10 * time.Second)
	for _, q := range readersQueue(s.opt.ReaderQueries) {
		if _, err := queryText(ctx, client, s.HTTPURL(), s.opt.User, s.opt.Password, q); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) waitReady(ctx context.Context, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	client := oneShotClient(time.Second)
	url := s.HTTPURL() + "/ping"
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if ping(ctx, client, url) && !p.exited() {
			// Make sure the answer came from our child and not from another server
			// on that port (the data path is locked per instance), without logging
			// in to it: a failed login can end another embedded server (ports.go).
			id, err := Identify(ctx, s.opt.ListenHost, s.opt.HTTPPort)
			if err == nil && id.Is(s.opt.Path, s.opt.TCPPort, s.opt.HTTPPort) {
				return nil
			}
			if err == nil {
				return fmt.Errorf("chlocal start: %w", &PortError{Port: s.opt.HTTPPort, Holder: &id})
			}
			if !errors.Is(err, ErrNoServer) {
				return fmt.Errorf("chlocal start: %w", &PortError{Port: s.opt.HTTPPort, Err: err})
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("chlocal start: server exited before it was ready (%v): %s", p.err, p.out.Tail(2048))
		case <-ctx.Done():
			return fmt.Errorf("chlocal start: server not ready at %s: %w; output: %s", url, ctx.Err(), p.out.Tail(2048))
		case <-tick.C:
		}
	}
}

func ping(ctx context.Context, c *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
	return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(body)) == "Ok."
}

// queryText runs q over HTTP as user and returns its trimmed text result.
func queryText(ctx context.Context, c *http.Client, baseURL, user, password, q string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/", strings.NewReader(q))
	if err != nil {
		return "", err
	}
	req.SetBasicAuth(user, password)
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return strings.TrimSpace(string(body)), nil
}

// childAccess is what Start sends the child on its stdin: the users and their passwords.
type childAccess struct {
	User     string
	Password string
	Readers  []Reader
	Database string
	// The readers' queue and bounds (Options; not secrets, here with the readers).
	ReaderQueries int
	ReaderTimeout time.Duration
	ReaderMemory  int64
}

// childEnv is the child's whole environment: the child's options and TZ, nothing
// inherited (a secret in goldbridge's environment must not reach ClickHouse, which
// can read /proc/self/environ).
func childEnv(opt Options) []string {
	env := []string{
		envChild + "=1",
		envPath + "=" + opt.Path,
		envTCP + "=" + strconv.Itoa(opt.TCPPort),
		envHTTP + "=" + strconv.Itoa(opt.HTTPPort),
		envHost + "=" + opt.ListenHost,
		envLib + "=" + opt.LibPath,
		envPPID + "=" + strconv.Itoa(os.Getpid()),
	}
	if len(opt.ReadDirs) > 0 {
		env = append(env, envRead+"="+strings.Join(opt.ReadDirs, string(filepath.ListSeparator)))
	}
	if opt.MaxServerMemory > 0 {
		env = append(env, envMem+"="+strconv.FormatInt(opt.MaxServerMemory, 10))
	}
	if opt.PromptCleanup {
		env = append(env, envCleanup+"=1")
	}
	if opt.Cluster != nil {
		b, _ := json.Marshal(opt.Cluster) // strings only: cannot fail
		env = append(env, envCluster+"="+string(b))
	}
	if tz, ok := os.LookupEnv("TZ"); ok {
		env = append(env, "TZ="+tz)
	}
	return env
}

// teeWriter writes to the ring and, best effort, to a user writer whose
// errors must not block the child's output pipe.
type teeWriter struct {
	ring *ring
	user io.Writer
}

func (t teeWriter) Write(b []byte) (int, error) {
	n, _ := t.ring.Write(b)
	_, _ = t.user.Write(b)
	return n, nil
}

// ring keeps the last max bytes written to it.
type ring struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newRing(max int) *ring { return &ring{max: max} }

func (r *ring) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(b)
	if len(b) > r.max {
		b = b[len(b)-r.max:]
	}
	if over := len(r.buf) + len(b) - r.max; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
	r.buf = append(r.buf, b...)
	return n, nil
}

func (r *ring) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return string(r.buf)
}

// Tail returns at most the last n bytes, trimmed, or "(no output)".
func (r *ring) Tail(n int) string {
	s := r.String()
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	if s = strings.TrimSpace(s); s == "" {
		return "(no output)"
	}
	return s
}

// Ping reports whether a ClickHouse server answers /ping at baseURL (http://host:port),
// e.g. one already started by `goldbridge clickhouse serve`.
func Ping(ctx context.Context, baseURL string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if !ping(ctx, oneShotClient(2*time.Second), baseURL+"/ping") {
		return fmt.Errorf("no clickhouse answering at %s", baseURL)
	}
	return nil
}
