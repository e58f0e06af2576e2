// Package hotconn is how goldbridge reaches its ClickHouse: it finds this state dir's
// embedded server running or starts it (the one place a server is started, supervised),
// gives it ports of its own, and connects to it, to an external server or to every node
// of a sharded one. Its promise: it never logs in to an embedded server that did not
// say, without a login, that it is this state dir's own (Check), and what it starts it
// stops with the function it returns.
package hotconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/cmd/goldbridge/internal/plan"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chlocal"
	"goldbridge/serving/chtarget"
	"goldbridge/sync/pipeline"
)

// Opener reaches the ClickHouse a config describes.
type Opener struct {
	Log       *slog.Logger
	Restarted func() // called after the supervisor restarted a server that exited; may be nil
}

// ErrPortClash is returned by LocalPorts when the one port the config pins is the other
// one recorded for the state dir.
var ErrPortClash = errors.New("clickhouse.local")

// Password is goldbridge's own ClickHouse password: clickhouse.password,
// else clickhouse.password_file, else (embedded server) the one generated on first
// start into <state-dir>/clickhouse.password.
func Password(cfg *config.Config) (string, error) {
	ch := cfg.ClickHouse
	return secretOf(ch.Password.Reveal(), ch.PasswordFile, "clickhouse", ch.IsEmbedded(),
		filepath.Join(cfg.StateDir, "clickhouse.password"))
}

// secretOf returns value, else the content of file, else (generate) the password
// stored in (and created on first use into) generated; path names the key in errors.
func secretOf(value, file, path string, generate bool, generated string) (string, error) {
	switch {
	case value != "":
		return value, nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s.password_file: %w", path, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	case generate:
		pw, err := chlocal.EnsurePassword(generated)
		if err != nil {
			return "", fmt.Errorf("%s.password: %w", path, err)
		}
		return pw, nil
	}
	return "", nil
}

// EmbeddedOptions are the options of the embedded server of cfg: its users, with
// passwords resolved (generated on first start where none is configured). It reads no
// file outside its data directory (chlocal.Confine); goldbridge query has its own server.
func EmbeddedOptions(cfg *config.Config) (chlocal.Options, error) {
	ch := cfg.ClickHouse
	pw, err := Password(cfg)
	if err != nil {
		return chlocal.Options{}, err
	}
	opt := chlocal.Options{
		Path: ch.Local.Path, TCPPort: ch.Local.TCPPort, HTTPPort: ch.Local.HTTPPort,
		MaxServerMemory: ch.Local.MaxServerMemory, ReaderQueries: ch.Local.ReaderQueries,
		ReaderTimeout: ch.Local.ReaderTimeout.D(), ReaderMemory: ch.Local.ReaderMemory,
		User: ch.User, Password: pw, Database: ch.Database,
		// A server that lives for the seconds of a run deletes nothing otherwise.
		PromptCleanup: true,
	}
	for i, r := range ch.Local.Readers {
		rpw, err := secretOf(r.Password.Reveal(), r.PasswordFile, fmt.Sprintf("clickhouse.local.readers[%d]", i), true,
			filepath.Join(cfg.StateDir, "clickhouse-"+r.Name+".password"))
		if err != nil {
			return chlocal.Options{}, err
		}
		opt.Readers = append(opt.Readers, chlocal.Reader{Name: r.Name, Password: rpw})
	}
	return opt, nil
}

// Ports of the embedded server: one pair per state dir (issue 37).
//
// Every embedded server used to listen on 19000/18123 unless the config said otherwise,
// so a second pipeline on the host (another config, another state dir) found the first
// one's server on "its" ports and logged in with its own password. libchdb 26.7 ends the
// whole server process on a failed native login (serving/chlocal/ports.go), so that login
// killed the first pipeline's server, and the second pipeline failed too.
//
// Two rules now, each enough for the common case and both kept:
//   - Ports left unset in the config are the state dir's own: chosen free on first use
//     and recorded in <state-dir>/clickhouse.ports (0600), so they stay put for the
//     dashboards pointed at them. Recorded rather than derived from the state dir's path
//     alone: a derived pair can be taken, and moving the directory would move the ports.
//     A state dir that already holds ClickHouse data keeps 19000/18123 while both are
//     free (a pipeline set up before this rule keeps its dashboards).
//   - goldbridge logs in to an embedded server only after the server said, without a
//     login, that it is this state dir's (chlocal.Identify: its data directory and
//     ports). Otherwise it refuses, naming the port and the data directory of the server
//     that holds it, and leaves that server alone: pinned ports that clash, a copied
//     ports file, or a recorded port another program took while the server was down.

// PortsFile is the file that records the state dir's own ports of its embedded server.
func PortsFile(cfg *config.Config) string { return filepath.Join(cfg.StateDir, "clickhouse.ports") }

// LocalPorts fills in the ports of cfg's embedded server that the config leaves unset
// (clickhouse.local.tcp_port, http_port) with the state dir's own, which it chooses and
// records on first use (chlocal.EnsurePorts), and sets cfg's Local.PortsFile then.
func (o Opener) LocalPorts(cfg *config.Config) error {
	l := &cfg.ClickHouse.Local
	if !cfg.ClickHouse.IsEmbedded() || (l.TCPPort != 0 && l.HTTPPort != 0) {
		return nil
	}
	file := PortsFile(cfg)
	var pinned []int // the one port the config sets, if any: the chosen pair avoids it
	for _, p := range []int{l.TCPPort, l.HTTPPort} {
		if p != 0 {
			pinned = append(pinned, p)
		}
	}
	legacyTaken := false
	p, recorded, err := chlocal.EnsurePorts(file, func() (chlocal.Ports, error) {
		var legacy *chlocal.Ports
		if _, err := os.Stat(filepath.Join(l.Path, "metadata")); err == nil {
			legacy = &chlocal.Ports{TCP: config.LegacyCHLocalTCPPort, HTTP: config.LegacyCHLocalHTTPPort}
		}
		p, err := chlocal.ChoosePorts(chlocal.DefaultListenHost, l.Path, legacy, pinned...)
		legacyTaken = legacy != nil && p != *legacy
		return p, err
	})
	if err != nil {
		return fmt.Errorf("clickhouse.local: %w", err)
	}
	switch {
	case legacyTaken:
		o.Log.Warn("this state dir's embedded clickhouse used ports 19000/18123, which are taken now: it gets ports of its own (point dashboards there, or pin clickhouse.local.tcp_port and http_port)",
			"tcp_port", p.TCP, "http_port", p.HTTP, "file", file)
	case recorded:
		o.Log.Info("chose the embedded clickhouse's ports for this state dir", "tcp_port", p.TCP, "http_port", p.HTTP, "file", file)
	}
	if l.TCPPort == 0 {
		l.TCPPort = p.TCP
	}
	if l.HTTPPort == 0 {
		l.HTTPPort = p.HTTP
	}
	if l.TCPPort == l.HTTPPort {
		return fmt.Errorf("%w: the port the config sets, %d, is the other one recorded for this state dir in %s: set both tcp_port and http_port, or neither", ErrPortClash, l.TCPPort, file)
	}
	l.PortsFile = file
	return nil
}

// Check asks, without logging in (chlocal.Identify), who answers on the HTTP
// port of cfg's embedded server: nil if it is this state dir's own server with its
// ports; an error wrapping chlocal.ErrNoServer if nothing listens there; else an error
// naming the port and what holds it, with what to do.
func Check(ctx context.Context, cfg *config.Config) error {
	l := cfg.ClickHouse.Local
	id, err := chlocal.Identify(ctx, chlocal.DefaultListenHost, l.HTTPPort)
	switch {
	case errors.Is(err, chlocal.ErrNoServer):
		return err
	case err != nil:
		return PortsAdvice(cfg, &chlocal.PortError{Port: l.HTTPPort, Err: err})
	case id.Is(l.Path, l.TCPPort, l.HTTPPort):
		return nil
	}
	return PortsAdvice(cfg, &chlocal.PortError{Port: l.HTTPPort, Holder: &id})
}

// PortsAdvice adds to an error that wraps a *chlocal.PortError what to do about it; it
// returns other errors as they are.
func PortsAdvice(cfg *config.Config, err error) error {
	var pe *chlocal.PortError
	if !errors.As(err, &pe) {
		return err
	}
	l := cfg.ClickHouse.Local
	if own, _ := filepath.Abs(l.Path); pe.Holder != nil && pe.Holder.Path == own {
		return fmt.Errorf("%w: that is this state dir's own ClickHouse, started by another goldbridge process (stop it first if its ports are not tcp %d, http %d)", err, l.TCPPort, l.HTTPPort)
	}
	if l.PortsFile == "" {
		return fmt.Errorf("%w; each state dir needs ports of its own: pin other ones in clickhouse.local.tcp_port and http_port, or leave both unset (the state dir then gets its own, kept in %s)", err, PortsFile(cfg))
	}
	return fmt.Errorf("%w; it is a port of this state dir (tcp %d, http %d, kept in %s): delete that file to have free ones chosen at the next start, or pin them in clickhouse.local.tcp_port and http_port", err, l.TCPPort, l.HTTPPort, l.PortsFile)
}

// UseEmbedded makes sure the embedded ClickHouse of cfg runs: the one this state dir's
// server already answers on its ports (started by `clickhouse serve`, `serve` or a run of
// this state dir), else one it starts (StartEmbedded). stop stops the server it started
// and does nothing otherwise; srv is nil then. It is the one place commands find or
// start the embedded server, and it never lets a command log in to a server that
// Check did not find to be this state dir's own.
func (o Opener) UseEmbedded(ctx context.Context, cfg *config.Config) (srv *chlocal.Server, stop func(), err error) {
	err = Check(ctx, cfg)
	if err == nil {
		o.Log.Debug("using the running embedded clickhouse", "path", cfg.ClickHouse.Local.Path, "http_port", cfg.ClickHouse.Local.HTTPPort)
		return nil, func() {}, nil
	}
	if !errors.Is(err, chlocal.ErrNoServer) {
		return nil, nil, fmt.Errorf("embedded clickhouse: %w", err)
	}
	return o.StartEmbedded(ctx, cfg)
}

// StartEmbedded starts the embedded ClickHouse of cfg (StartServer).
func (o Opener) StartEmbedded(ctx context.Context, cfg *config.Config) (*chlocal.Server, func(), error) {
	opt, err := EmbeddedOptions(cfg)
	if err != nil {
		return nil, nil, err
	}
	srv, stop, err := o.StartServer(ctx, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded clickhouse: %w", PortsAdvice(cfg, err))
	}
	o.Log.Info("started embedded clickhouse", "path", opt.Path, "http", srv.HTTPURL(), "pid", srv.PID())
	return srv, stop, nil
}

// StartServer starts a ClickHouse server child (chlocal.Start), supervised (a child that
// exits on its own is restarted at once, see chlocal.Server.Supervise), and returns it with
// the function that stops it (within 30 s). It is the one place goldbridge starts a
// ClickHouse server: the embedded one (StartEmbedded), `clickhouse serve`'s and the
// private one of `query` (StartLake). srv.Stop stops it too.
func (o Opener) StartServer(ctx context.Context, opt chlocal.Options) (*chlocal.Server, func(), error) {
	srv, err := chlocal.Start(ctx, opt)
	if err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go srv.Supervise(sctx, func(exit, err error) {
		if err != nil {
			o.Log.Error("clickhouse server exited; restart failed (retrying)", "path", opt.Path, "exit", fmt.Sprint(exit), "err", err)
			return
		}
		o.Log.Warn("clickhouse server exited; restarted", "path", opt.Path, "exit", fmt.Sprint(exit), "pid", srv.PID())
		if o.Restarted != nil {
			o.Restarted()
		}
	})
	return srv, func() {
		cancel()
		sctx, cancelStop := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancelStop()
		t0 := time.Now()
		if err := srv.Stop(sctx); err != nil {
			o.Log.Warn("stopping clickhouse server", "path", opt.Path, "err", err)
		}
		o.Log.Debug("stopped embedded clickhouse", "seconds", time.Since(t0).Seconds())
	}, nil
}

// Open connects to the configured ClickHouse; the embedded server is found
// running or started (UseEmbedded), and the returned function stops a server it started.
// With clickhouse.shards it connects to the first node (Target connects to all).
func (o Opener) Open(ctx context.Context, cfg *config.Config) (*chconn.Client, func(), error) {
	stop := func() {}
	if cfg.ClickHouse.IsEmbedded() {
		_, stopSrv, err := o.UseEmbedded(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		stop = stopSrv
	}
	c, err := o.Dial(ctx, cfg)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

// Dial connects to the configured ClickHouse, with clickhouse.shards to its
// first node. It never starts the embedded server, and connects to it only once it
// answered, without a login, that it is this state dir's (Check).
func (o Opener) Dial(ctx context.Context, cfg *config.Config) (*chconn.Client, error) {
	ch := cfg.ClickHouse
	opt, err := ClientOptions(cfg)
	if err != nil {
		return nil, err
	}
	switch {
	case ch.IsEmbedded():
		if err := Check(ctx, cfg); err != nil {
			return nil, fmt.Errorf("embedded clickhouse: %w", err)
		}
		port := ch.Local.TCPPort
		if opt.HTTP {
			port = ch.Local.HTTPPort
		}
		opt.Addresses = []string{net.JoinHostPort(chlocal.DefaultListenHost, strconv.Itoa(port))}
	case len(ch.Shards) > 0:
		opt.Addresses = ch.Shards[0][:1]
	default:
		opt.Addresses = ch.Addresses
	}
	return o.Connect(ctx, opt)
}

// ClientOptions are the connection options of the clickhouse section, addresses aside.
func ClientOptions(cfg *config.Config) (chconn.Options, error) {
	ch := cfg.ClickHouse
	pw, err := Password(cfg)
	if err != nil {
		return chconn.Options{}, err
	}
	opt := chconn.Options{
		HTTP: ch.Protocol == "http", Database: ch.Database, User: ch.User, Password: pw,
		DialTimeout: ch.DialTimeout.D(), Settings: ch.Settings, MaxRetries: ch.MaxRetries, RetryBackoff: ch.RetryBackoff.D(),
	}
	if ch.TLS.Enabled {
		tc, err := plan.TLSConfig(ch.TLS)
		if err != nil {
			return chconn.Options{}, fmt.Errorf("clickhouse.tls: %w", err)
		}
		opt.TLS = tc
	}
	return opt, nil
}

// Connect opens a client with opt after creating its database: the connection's
// default database must exist before the handshake (the marts' DDL creates it too, so
// this only matters on a fresh server).
func (o Opener) Connect(ctx context.Context, opt chconn.Options) (*chconn.Client, error) {
	boot := opt
	boot.Database = "default"
	bc, err := chconn.Open(ctx, boot)
	if err != nil {
		return nil, err
	}
	err = bc.Conn().Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+serving.Q(opt.Database))
	bc.Close()
	if err != nil {
		return nil, fmt.Errorf("create database %s: %w", opt.Database, err)
	}
	c, err := chconn.Open(ctx, opt)
	if err != nil {
		return nil, err
	}
	o.Log.Debug("connected", "clickhouse", c.String())
	return c, nil
}

// OpenSharded connects to every node of clickhouse.shards, as the sync target of the
// sharded topology (chtarget.Sharded); done closes the clients.
func (o Opener) OpenSharded(ctx context.Context, cfg *config.Config) (t *chtarget.Sharded, done func(), err error) {
	opt, err := ClientOptions(cfg)
	if err != nil {
		return nil, nil, err
	}
	var all []*chconn.Client
	done = func() {
		for _, c := range all {
			c.Close()
		}
	}
	shards := make([][]*chconn.Client, len(cfg.ClickHouse.Shards))
	for i, nodes := range cfg.ClickHouse.Shards {
		for _, addr := range nodes {
			node := opt
			node.Addresses = []string{addr}
			c, err := o.Connect(ctx, node)
			if err != nil {
				done()
				return nil, nil, fmt.Errorf("clickhouse.shards[%d] %s: %w", i, addr, err)
			}
			all = append(all, c)
			shards[i] = append(shards[i], c)
		}
	}
	if t, err = chtarget.NewSharded(shards); err != nil {
		done()
		return nil, nil, err
	}
	return t, done, nil
}

// HTTP returns the HTTP base URL of the configured ClickHouse; the embedded
// server is found running or started (UseEmbedded), and the returned function stops a
// server it started.
func (o Opener) HTTP(ctx context.Context, cfg *config.Config) (string, func(), error) {
	ch := cfg.ClickHouse
	if !ch.IsEmbedded() {
		scheme := "http"
		if ch.TLS.Enabled {
			scheme = "https"
		}
		// The HTTP port of an external server is not configured separately yet: assume 8123.
		host := ch.Addresses[0]
		if i := strings.LastIndexByte(host, ':'); i >= 0 {
			host = host[:i]
		}
		return fmt.Sprintf("%s://%s:8123", scheme, host), func() {}, nil
	}
	_, stop, err := o.UseEmbedded(ctx, cfg)
	if err != nil {
		return "", nil, err
	}
	return "http://" + net.JoinHostPort(chlocal.DefaultListenHost, strconv.Itoa(ch.Local.HTTPPort)), stop, nil
}

// Target connects to the configured ClickHouse (Open, or every node of
// clickhouse.shards: OpenSharded) as a sync target.
func (o Opener) Target(ctx context.Context, cfg *config.Config) (pipeline.Target, func(), error) {
	if len(cfg.ClickHouse.Shards) > 0 {
		t, done, err := o.OpenSharded(ctx, cfg)
		if err != nil {
			return nil, nil, err // not a nil *Sharded in a non-nil interface
		}
		return t, done, nil
	}
	c, stop, err := o.Open(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	return chtarget.NewClickHouse(c), func() { c.Close(); stop() }, nil
}
