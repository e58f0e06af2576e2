// Package chlocal runs a local ClickHouse 26.7 server from libchdb (loaded with
// purego, no cgo) for the embedded stack and for integration tests.
//
// The server is clickhouse-local started through chdb_query_cmdline with a
// query that opens the TCP and HTTP listeners and then never ends. RunServer
// hosts it in the calling process; Start hosts it in a child process (the
// current executable re-executed, see MaybeRunChild) and supervises it.
//
// Every user logs in with a password (Options.User, Options.Readers) and none can
// reach files, URLs or other servers through SQL (access.go); keep ListenHost on
// loopback all the same.
package chlocal

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// LibVersion is the npm version of @chdb/lib-linux-x64-gnu that provides libchdb.so.
const LibVersion = "26.7.3-stable.1"

// HolderQueryID is the query id of the query that keeps the listeners open;
// killing it stops the server. Never run a broad KILL QUERY.
const HolderQueryID = "goldbridge-holder"

// DefaultListenHost is the address the server binds when Options.ListenHost is empty.
const DefaultListenHost = "127.0.0.1"

// LibEnv names the environment variable that overrides the libchdb.so location.
const LibEnv = "GOLDBRIDGE_LIBCHDB"

// Options configures a server. Path, TCPPort and HTTPPort are required.
type Options struct {
	Path            string    // data directory (--path); created by Start if missing
	TCPPort         int       // native protocol port
	HTTPPort        int       // HTTP interface port
	ListenHost      string    // bind address; default 127.0.0.1
	LibPath         string    // libchdb.so; default LibPath()
	MaxServerMemory int64     // max_server_memory_usage in bytes; 0 = ClickHouse default
	Stderr          io.Writer // Start: also receives the child's stdout/stderr; optional
	Binary          string    // Start: executable to re-exec as the child; default os.Executable()
	// Dir is the server's working directory, default Path. Relative file names in
	// queries resolve inside it, and the Iceberg reader (icebergLocal) reads tables
	// under it only: the local warehouse, for goldbridge query.
	Dir string
	// ReadDirs are the directories the server may read besides Path: on Linux the
	// server is confined (Landlock) to Path and these, so that no user can read other
	// files through SQL (the scalar file() needs no grant); a reader can read what is
	// listed here too, so list nothing on a server with readers.
	ReadDirs []string
	// PromptCleanup makes the server delete what it no longer serves within about a
	// second, and what earlier lives of it left at its start: outdated parts and
	// dropped tables, which ClickHouse otherwise keeps for 8 minutes, so a server that
	// lives for the seconds of a `goldbridge run` never deletes them (cleanup.go).
	PromptCleanup bool

	User     string   // admin user (DDL, pushes, checks); default DefaultUser
	Password string   // the admin's password; required
	Readers  []Reader // read-only users of Database
	Database string   // the served database, the one the readers may read; "" = all
	// ReaderQueries is how many of the readers' queries run at once; the others wait
	// for a slot (access.go, "The readers' queue"). 0 = DefaultReaderQueries.
	ReaderQueries int
	// ReaderTimeout and ReaderMemory bound each reader's query: past either it fails
	// (TIMEOUT_EXCEEDED, MEMORY_LIMIT_EXCEEDED), and a reader cannot raise them, so the
	// readers' queries together hold at most ReaderQueries × ReaderMemory (access.go,
	// "The readers' bounds"). 0 = DefaultReaderTimeout, DefaultReaderMemory.
	ReaderTimeout time.Duration
	ReaderMemory  int64

	// Cluster, when set, makes the server a node of a Distributed topology: its
	// remote_servers lists the cluster's nodes, which it connects to as User with
	// Password (so every node has the same admin), and the confinement lets it connect
	// to their ports and no other.
	Cluster *Cluster `json:",omitempty"`
}

// Cluster is a Distributed topology of plain nodes (no Keeper, no replication): shards
// of nodes, each node "host:port" of its native protocol. A Distributed table over it
// reads one node of each shard, failing over to another node of the shard.
type Cluster struct {
	Name   string
	Shards [][]string
}

// ports returns the native ports of the cluster's nodes.
func (c *Cluster) ports() ([]int, error) {
	var out []int
	for _, nodes := range c.Shards {
		for _, n := range nodes {
			_, p, err := net.SplitHostPort(n)
			if err != nil {
				return nil, fmt.Errorf("cluster node %q: %w", n, err)
			}
			port, err := strconv.Atoi(p)
			if err != nil || port <= 0 || port > 65535 {
				return nil, fmt.Errorf("cluster node %q: invalid port", n)
			}
			out = append(out, port)
		}
	}
	return out, nil
}

// validate checks the cluster's name and nodes.
func (c *Cluster) validate() error {
	if !identRe.MatchString(c.Name) {
		return fmt.Errorf("options: cluster name %q is not an identifier", c.Name)
	}
	if len(c.Shards) == 0 {
		return fmt.Errorf("options: cluster %s has no shards", c.Name)
	}
	for i, nodes := range c.Shards {
		if len(nodes) == 0 {
			return fmt.Errorf("options: cluster %s: shard %d has no node", c.Name, i+1)
		}
	}
	_, err := c.ports()
	return err
}

func (o Options) withDefaults() (Options, error) {
	if o.Path == "" {
		return o, errors.New("options: Path is required")
	}
	if o.TCPPort <= 0 || o.TCPPort > 65535 {
		return o, fmt.Errorf("options: invalid TCPPort %d", o.TCPPort)
	}
	if o.HTTPPort <= 0 || o.HTTPPort > 65535 {
		return o, fmt.Errorf("options: invalid HTTPPort %d", o.HTTPPort)
	}
	if o.TCPPort == o.HTTPPort {
		return o, fmt.Errorf("options: TCPPort and HTTPPort are both %d", o.TCPPort)
	}
	if o.MaxServerMemory < 0 {
		return o, fmt.Errorf("options: negative MaxServerMemory %d", o.MaxServerMemory)
	}
	if o.ListenHost == "" {
		o.ListenHost = DefaultListenHost
	}
	if o.ReaderQueries < 0 {
		return o, fmt.Errorf("options: negative ReaderQueries %d", o.ReaderQueries)
	}
	if o.ReaderQueries == 0 {
		o.ReaderQueries = DefaultReaderQueries()
	}
	if o.ReaderTimeout == 0 {
		o.ReaderTimeout = DefaultReaderTimeout
	}
	if o.ReaderTimeout < time.Second || o.ReaderTimeout%time.Second != 0 {
		return o, fmt.Errorf("options: ReaderTimeout %v is not whole seconds from 1s", o.ReaderTimeout)
	}
	if o.ReaderMemory == 0 {
		o.ReaderMemory = DefaultReaderMemory
	}
	if o.ReaderMemory < MinReaderMemory {
		return o, fmt.Errorf("options: ReaderMemory %d is under %d bytes", o.ReaderMemory, MinReaderMemory)
	}
	if o.User == "" {
		o.User = DefaultUser
	}
	if err := validateAccess(o); err != nil {
		return o, err
	}
	if o.Cluster != nil {
		if err := o.Cluster.validate(); err != nil {
			return o, err
		}
	}
	p, err := filepath.Abs(o.Path)
	if err != nil {
		return o, fmt.Errorf("options: path %q: %w", o.Path, err)
	}
	o.Path = p
	if o.Dir == "" {
		o.Dir = p
	}
	if o.Dir, err = filepath.Abs(o.Dir); err != nil {
		return o, fmt.Errorf("options: dir %q: %w", o.Dir, err)
	}
	for i, d := range o.ReadDirs {
		if o.ReadDirs[i], err = filepath.Abs(d); err != nil {
			return o, fmt.Errorf("options: read dir %q: %w", d, err)
		}
	}
	if o.LibPath == "" {
		lp, err := LibPath()
		if err != nil {
			return o, err
		}
		o.LibPath = lp
	}
	return o, nil
}

// CacheDir returns the goldbridge cache directory:
// $GOLDBRIDGE_CACHE, else $XDG_CACHE_HOME/goldbridge, else ~/.cache/goldbridge.
func CacheDir() (string, error) {
	if d := os.Getenv("GOLDBRIDGE_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "goldbridge"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("chlocal cache dir: %w", err)
	}
	return filepath.Join(home, ".cache", "goldbridge"), nil
}

// LibPath returns the libchdb.so to load: $GOLDBRIDGE_LIBCHDB if set, else
// <CacheDir>/chdb/<LibVersion>/libchdb.so. It fails if the file is missing.
func LibPath() (string, error) {
	p := os.Getenv(LibEnv)
	where := "$" + LibEnv
	if p == "" {
		dir, err := CacheDir()
		if err != nil {
			return "", err
		}
		p = filepath.Join(dir, "chdb", LibVersion, "libchdb.so")
		where = "the goldbridge cache"
	}
	st, err := os.Stat(p)
	if err != nil {
		return "", fmt.Errorf("chlocal: libchdb %s not found at %s (from %s): run `make clickhouse` (needs npm) or set %s: %w",
			LibVersion, p, where, LibEnv, err)
	}
	if st.IsDir() {
		return "", fmt.Errorf("chlocal: libchdb path %s (from %s) is a directory: run `make clickhouse` (needs npm) or set %s",
			p, where, LibEnv)
	}
	return p, nil
}

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1 a moment ago.
func FreePorts(n int) ([]int, error) {
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
			return nil, fmt.Errorf("chlocal free ports: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// portFree reports an error if host:port cannot be bound right now.
func portFree(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}
