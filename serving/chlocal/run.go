package chlocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// holderQuery opens both listeners and then runs forever (a row every 50 ms,
// discarded); the listeners close when it ends. ClickHouse notices a KILL QUERY
// between blocks, so a block's sleep is what a stop waits: with a row a second, a
// stop waited for the next whole second of the server's life. What a stop waits for is
// Server.awaitCleanup's to decide; an idle server's 20 rows a second cost ~0.3% of a
// core.
const holderQuery = "SYSTEM START LISTEN TCP; SYSTEM START LISTEN HTTP; " +
	"SELECT sleepEachRow(0.05) FROM system.numbers SETTINGS max_block_size = 1 FORMAT Null"

// stopTimeout bounds how long RunServer keeps retrying the KILL QUERY after ctx ends.
const stopTimeout = 30 * time.Second

// chdb is the part of the libchdb C API that RunServer needs.
type chdb struct {
	queryCmdline  func(argc int32, argv **byte) uintptr // chdb_result *chdb_query_cmdline(int, char **)
	resultError   func(res uintptr) *byte               // const char *chdb_result_error(chdb_result *)
	destroyResult func(res uintptr)                     // void chdb_destroy_query_result(chdb_result *)
	// setSignalHandlers is chdb_set_signal_handlers_enabled(int); nil if the library lacks it.
	setSignalHandlers func(enabled int32)
}

func loadChdb(path string) (*chdb, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("dlopen %s: %w", path, err)
	}
	var c chdb
	for _, f := range []struct {
		fptr any
		name string
	}{
		{&c.queryCmdline, "chdb_query_cmdline"},
		{&c.resultError, "chdb_result_error"},
		{&c.destroyResult, "chdb_destroy_query_result"},
	} {
		sym, err := purego.Dlsym(h, f.name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		purego.RegisterFunc(f.fptr, sym)
	}
	if sym, err := purego.Dlsym(h, "chdb_set_signal_handlers_enabled"); err == nil {
		purego.RegisterFunc(&c.setSignalHandlers, sym)
	}
	return &c, nil
}

// run calls chdb_query_cmdline with args and returns the result's error
// message ("" if none). It blocks for as long as the query runs.
func (c *chdb) run(args []string) string {
	bufs := make([][]byte, len(args))
	ptrs := make([]*byte, len(args)+1) // argv[argc] = NULL, as for main()
	for i, a := range args {
		bufs[i] = append([]byte(a), 0)
		ptrs[i] = &bufs[i][0]
	}
	res := c.queryCmdline(int32(len(args)), &ptrs[0])
	// Go's heap does not move: keeping the slices reachable keeps argv valid for the whole call.
	runtime.KeepAlive(bufs)
	runtime.KeepAlive(ptrs)
	if res == 0 {
		return ""
	}
	msg := cString(c.resultError(res))
	c.destroyResult(res)
	return msg
}

func cString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// serverArgs is the clickhouse-local command line for opt (defaults applied) with
// the config file written by writeAccess.
func serverArgs(opt Options, configFile string) []string {
	args := []string{
		"clickhouse",
		"--config-file=" + configFile,
		"--path=" + opt.Path,
		"--listen_host=" + opt.ListenHost,
		"--tcp_port=" + strconv.Itoa(opt.TCPPort),
		"--http_port=" + strconv.Itoa(opt.HTTPPort),
		"--implicit_select=0",
		"--query_id=" + HolderQueryID,
		"--query=" + holderQuery,
	}
	if opt.MaxServerMemory > 0 {
		// Server-level settings are config overrides after "--".
		args = append(args, "--", "--max_server_memory_usage="+strconv.FormatInt(opt.MaxServerMemory, 10))
	}
	return args
}

// RunServer runs a ClickHouse server in this process until ctx ends, then
// stops it gracefully (KILL QUERY of HolderQueryID over HTTP) and returns nil.
// It returns an error if the server fails to start or ends on its own
// (ErrHolderEnded). ClickHouse keeps process-wide state: call it at most once
// per process, preferably in a process of its own (see Start). If clients keep
// connections open at stop, ClickHouse waits up to 5 s and then ends the whole
// process itself with status 1.
func RunServer(ctx context.Context, opt Options) error {
	opt, err := opt.withDefaults()
	if err != nil {
		return fmt.Errorf("chlocal run: %w", err)
	}
	privateUmask() // ClickHouse's data files: 0600 / 0700 whatever the umask
	if err := makePrivateDir(opt.Path); err != nil {
		return fmt.Errorf("chlocal run: %w", err)
	}
	if err := clearWorkloads(opt.Path); err != nil {
		return fmt.Errorf("chlocal run: %w", err)
	}
	// icebergLocal reads only under the working directory (a child already runs in it).
	if err := os.MkdirAll(opt.Dir, 0o700); err != nil {
		return fmt.Errorf("chlocal run: %w", err)
	}
	if err := os.Chdir(opt.Dir); err != nil {
		return fmt.Errorf("chlocal run: %w", err)
	}
	moved, err := repairMetadata(opt.Path)
	if err != nil {
		return fmt.Errorf("chlocal run: %w", err)
	}
	for _, f := range moved {
		fmt.Fprintf(os.Stderr, "chlocal: repaired the unreadable definition %s (a database's rewritten, anything else moved to %s%s and recreated by goldbridge)\n", f, f, brokenSuffix)
	}
	configFile, err := writeAccess(opt)
	if err != nil {
		return fmt.Errorf("chlocal run: access config: %w", err)
	}
	lib, err := loadChdb(opt.LibPath)
	if err != nil {
		return fmt.Errorf("chlocal run: %w", err)
	}
	if lib.setSignalHandlers != nil {
		// Keep the Go runtime's handlers for crash signals instead of
		// ClickHouse's (reported to sleep before re-raising): a crash then
		// ends the process at once with a stack dump.
		keepSignalHandlers(func() { lib.setSignalHandlers(0) })
	}

	args := serverArgs(opt, configFile)
	done := make(chan string, 1)
	go func() {
		// ClickHouse runs on the calling thread and keeps thread-local state:
		// pin it, and let the thread die with the goroutine (no Unlock).
		runtime.LockOSThread()
		done <- lib.run(args)
	}()

	// The C result carries no error text (ClickHouse prints errors to stderr),
	// so tell a failed start from a stopped server by whether /ping ever answered.
	url := "http://" + net.JoinHostPort(opt.ListenHost, strconv.Itoa(opt.HTTPPort))
	ready := make(chan struct{})
	watchCtx, stopWatch := context.WithCancel(context.Background())
	defer stopWatch()
	go watchReady(watchCtx, url, ready)

	select {
	case msg := <-done:
		select {
		case <-ready:
			// The parent (Server.Stop) sends SIGTERM before it kills the holding
			// query: a stop whose signal is still on its way is a stop.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			return fmt.Errorf("chlocal run: %w: %s", ErrHolderEnded, describe(msg))
		default:
			return fmt.Errorf("chlocal run: server failed to start: %s", describe(msg))
		}
	case <-ctx.Done():
	}

	deadline := time.NewTimer(stopTimeout)
	defer deadline.Stop()
	for {
		kerr := killHolder(context.Background(), url, opt.User, opt.Password)
		retry := time.NewTimer(500 * time.Millisecond)
		if kerr == nil {
			retry.Reset(5 * time.Second)
		}
		select {
		case <-done:
			retry.Stop()
			return nil
		case <-deadline.C:
			retry.Stop()
			return fmt.Errorf("chlocal run: server did not stop within %s (last kill error: %v)", stopTimeout, kerr)
		case <-retry.C:
		}
	}
}

// ErrHolderEnded reports that the holding query ended although RunServer's
// context had not: someone ran KILL QUERY on it, or it failed.
var ErrHolderEnded = errors.New("holding query " + HolderQueryID + " ended (KILL QUERY?) and the server stopped")

func watchReady(ctx context.Context, url string, ready chan<- struct{}) {
	client := oneShotClient(time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if ping(ctx, client, url+"/ping") {
			close(ready)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func describe(msg string) string {
	if msg = strings.TrimSpace(msg); msg == "" {
		return "ClickHouse's message, if any, is on stderr"
	}
	return msg
}

// oneShotClient returns a client that closes each connection after its
// request: ClickHouse waits for idle keep-alive HTTP connections before it
// exits, which would delay a stop by seconds.
func oneShotClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
}

// killHolder asks the server at baseURL, as user, to cancel the holding query.
func killHolder(ctx context.Context, baseURL, user, password string) error {
	_, err := queryText(ctx, oneShotClient(10*time.Second), baseURL, user, password, "KILL QUERY WHERE query_id = '"+HolderQueryID+"'")
	if err != nil {
		return fmt.Errorf("kill query: %w", err)
	}
	return nil
}

// Environment of a child started by Start.
const (
	envChild = "GOLDBRIDGE_CHLOCAL_CHILD"
	envPath  = "GOLDBRIDGE_CHLOCAL_PATH"
	envTCP   = "GOLDBRIDGE_CHLOCAL_TCP"
	envHTTP  = "GOLDBRIDGE_CHLOCAL_HTTP"
	envHost  = "GOLDBRIDGE_CHLOCAL_HOST"
	envLib   = "GOLDBRIDGE_CHLOCAL_LIB"
	envMem   = "GOLDBRIDGE_CHLOCAL_MEM"
	envPPID  = "GOLDBRIDGE_CHLOCAL_PPID"
	envRead  = "GOLDBRIDGE_CHLOCAL_READ" // Options.ReadDirs, filepath.ListSeparator between
	// envCluster: Options.Cluster as JSON (names and addresses; the password the nodes
	// log in to each other with is the admin's, on stdin).
	envCluster = "GOLDBRIDGE_CHLOCAL_CLUSTER"
	envCleanup = "GOLDBRIDGE_CHLOCAL_PROMPT_CLEANUP" // Options.PromptCleanup: "1"
)

// MaybeRunChild turns this process into a server child when Start launched it
// (env GOLDBRIDGE_CHLOCAL_CHILD=1): it runs RunServer until SIGTERM/SIGINT and
// exits 0, or 1 with a message on error (including ErrHolderEnded). Otherwise
// it returns at once. Call it first in main() and in TestMain.
func MaybeRunChild() {
	if os.Getenv(envChild) != "1" {
		return
	}
	if err := runChild(); err != nil {
		fmt.Fprintf(os.Stderr, "chlocal child: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runChild() error {
	opt := Options{
		Path:       os.Getenv(envPath),
		ListenHost: os.Getenv(envHost),
		LibPath:    os.Getenv(envLib),
	}
	var err error
	if opt.TCPPort, err = strconv.Atoi(os.Getenv(envTCP)); err != nil {
		return fmt.Errorf("%s: %w", envTCP, err)
	}
	if opt.HTTPPort, err = strconv.Atoi(os.Getenv(envHTTP)); err != nil {
		return fmt.Errorf("%s: %w", envHTTP, err)
	}
	if m := os.Getenv(envMem); m != "" {
		if opt.MaxServerMemory, err = strconv.ParseInt(m, 10, 64); err != nil {
			return fmt.Errorf("%s: %w", envMem, err)
		}
	}
	if opt.LibPath == "" {
		return errors.New(envLib + " is not set")
	}
	if opt.Dir, err = os.Getwd(); err != nil { // Start's Options.Dir
		return err
	}
	if r := os.Getenv(envRead); r != "" {
		opt.ReadDirs = filepath.SplitList(r)
	}
	opt.PromptCleanup = os.Getenv(envCleanup) == "1"
	if c := os.Getenv(envCluster); c != "" {
		opt.Cluster = &Cluster{}
		if err := json.Unmarshal([]byte(c), opt.Cluster); err != nil {
			return fmt.Errorf("%s: %w", envCluster, err)
		}
	}
	if err := Confine(opt); err != nil { // before the users are read from stdin: Confine re-executes
		return err
	}
	var acc childAccess
	if err := json.NewDecoder(io.LimitReader(os.Stdin, 1<<20)).Decode(&acc); err != nil {
		return fmt.Errorf("users on stdin: %w", err)
	}
	opt.User, opt.Password, opt.Readers, opt.Database = acc.User, acc.Password, acc.Readers, acc.Database
	opt.ReaderQueries, opt.ReaderTimeout, opt.ReaderMemory = acc.ReaderQueries, acc.ReaderTimeout, acc.ReaderMemory
	if p := os.Getenv(envPPID); p != "" && p != strconv.Itoa(os.Getppid()) {
		// The parent died before the death signal was armed.
		return errors.New("parent process is gone")
	}
	signal.Ignore(syscall.SIGPIPE) // ClickHouse threads must get EPIPE, not a fatal signal
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return RunServer(ctx, opt)
}
