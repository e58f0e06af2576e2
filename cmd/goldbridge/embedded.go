package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/serving/chlocal"
)

// clickhousePassword is goldbridge's own ClickHouse password: clickhouse.password,
// else clickhouse.password_file, else (embedded server) the one generated on first
// start into <state-dir>/clickhouse.password.
func clickhousePassword(cfg *config.Config) (string, error) {
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

// embeddedOptions are the options of the embedded server of cfg: its users, with
// passwords resolved (generated on first start where none is configured). It reads no
// file outside its data directory (chlocal.Confine); goldbridge query has its own server.
func embeddedOptions(cfg *config.Config) (chlocal.Options, error) {
	ch := cfg.ClickHouse
	pw, err := clickhousePassword(cfg)
	if err != nil {
		return chlocal.Options{}, err
	}
	opt := chlocal.Options{
		Path: ch.Local.Path, TCPPort: ch.Local.TCPPort, HTTPPort: ch.Local.HTTPPort,
		MaxServerMemory: ch.Local.MaxServerMemory,
		User:            ch.User, Password: pw, Database: ch.Database,
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

// portsFile is the file that records the state dir's own ports of its embedded server.
func portsFile(cfg *config.Config) string { return filepath.Join(cfg.StateDir, "clickhouse.ports") }

// localPorts fills in the ports of cfg's embedded server that the config leaves unset
// (clickhouse.local.tcp_port, http_port) with the state dir's own, which it chooses and
// records on first use (chlocal.EnsurePorts), and sets cfg's Local.PortsFile then.
func (a *app) localPorts(cfg *config.Config) error {
	l := &cfg.ClickHouse.Local
	if !cfg.ClickHouse.IsEmbedded() || (l.TCPPort != 0 && l.HTTPPort != 0) {
		return nil
	}
	file := portsFile(cfg)
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
		a.log.Warn("this state dir's embedded clickhouse used ports 19000/18123, which are taken now: it gets ports of its own (point dashboards there, or pin clickhouse.local.tcp_port and http_port)",
			"tcp_port", p.TCP, "http_port", p.HTTP, "file", file)
	case recorded:
		a.log.Info("chose the embedded clickhouse's ports for this state dir", "tcp_port", p.TCP, "http_port", p.HTTP, "file", file)
	}
	if l.TCPPort == 0 {
		l.TCPPort = p.TCP
	}
	if l.HTTPPort == 0 {
		l.HTTPPort = p.HTTP
	}
	if l.TCPPort == l.HTTPPort {
		return &exitError{exitUsage, fmt.Errorf("clickhouse.local: the port the config sets, %d, is the other one recorded for this state dir in %s: set both tcp_port and http_port, or neither", l.TCPPort, file)}
	}
	l.PortsFile = file
	return nil
}

// checkEmbedded asks, without logging in (chlocal.Identify), who answers on the HTTP
// port of cfg's embedded server: nil if it is this state dir's own server with its
// ports; an error wrapping chlocal.ErrNoServer if nothing listens there; else an error
// naming the port and what holds it, with what to do.
func checkEmbedded(ctx context.Context, cfg *config.Config) error {
	l := cfg.ClickHouse.Local
	id, err := chlocal.Identify(ctx, chlocal.DefaultListenHost, l.HTTPPort)
	switch {
	case errors.Is(err, chlocal.ErrNoServer):
		return err
	case err != nil:
		return portsAdvice(cfg, &chlocal.PortError{Port: l.HTTPPort, Err: err})
	case id.Is(l.Path, l.TCPPort, l.HTTPPort):
		return nil
	}
	return portsAdvice(cfg, &chlocal.PortError{Port: l.HTTPPort, Holder: &id})
}

// portsAdvice adds to an error that wraps a *chlocal.PortError what to do about it; it
// returns other errors as they are.
func portsAdvice(cfg *config.Config, err error) error {
	var pe *chlocal.PortError
	if !errors.As(err, &pe) {
		return err
	}
	l := cfg.ClickHouse.Local
	if own, _ := filepath.Abs(l.Path); pe.Holder != nil && pe.Holder.Path == own {
		return fmt.Errorf("%w: that is this state dir's own ClickHouse, started by another goldbridge process (stop it first if its ports are not tcp %d, http %d)", err, l.TCPPort, l.HTTPPort)
	}
	if l.PortsFile == "" {
		return fmt.Errorf("%w; each state dir needs ports of its own: pin other ones in clickhouse.local.tcp_port and http_port, or leave both unset (the state dir then gets its own, kept in %s)", err, portsFile(cfg))
	}
	return fmt.Errorf("%w; it is a port of this state dir (tcp %d, http %d, kept in %s): delete that file to have free ones chosen at the next start, or pin them in clickhouse.local.tcp_port and http_port", err, l.TCPPort, l.HTTPPort, l.PortsFile)
}

// useEmbedded makes sure the embedded ClickHouse of cfg runs: the one this state dir's
// server already answers on its ports (started by `clickhouse serve`, `serve` or a run of
// this state dir), else one it starts (startEmbedded). stop stops the server it started
// and does nothing otherwise; srv is nil then. It is the one place commands find or
// start the embedded server, and it never lets a command log in to a server that
// checkEmbedded did not find to be this state dir's own.
func (a *app) useEmbedded(ctx context.Context, cfg *config.Config) (srv *chlocal.Server, stop func(), err error) {
	err = checkEmbedded(ctx, cfg)
	if err == nil {
		a.log.Debug("using the running embedded clickhouse", "path", cfg.ClickHouse.Local.Path, "http_port", cfg.ClickHouse.Local.HTTPPort)
		return nil, func() {}, nil
	}
	if !errors.Is(err, chlocal.ErrNoServer) {
		return nil, nil, fmt.Errorf("embedded clickhouse: %w", err)
	}
	return a.startEmbedded(ctx, cfg)
}

// startEmbedded starts the embedded ClickHouse of cfg (startServer).
func (a *app) startEmbedded(ctx context.Context, cfg *config.Config) (*chlocal.Server, func(), error) {
	opt, err := embeddedOptions(cfg)
	if err != nil {
		return nil, nil, err
	}
	srv, stop, err := a.startServer(ctx, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded clickhouse: %w", portsAdvice(cfg, err))
	}
	a.log.Info("started embedded clickhouse", "path", opt.Path, "http", srv.HTTPURL(), "pid", srv.PID())
	return srv, stop, nil
}

// startServer starts a ClickHouse server child (chlocal.Start), supervised (a child that
// exits on its own is restarted at once, see chlocal.Server.Supervise), and returns it with
// the function that stops it (within 30 s). It is the one place goldbridge starts a
// ClickHouse server: the embedded one (startEmbedded), `clickhouse serve`'s and the
// private one of `query` (lakeServer). srv.Stop stops it too.
func (a *app) startServer(ctx context.Context, opt chlocal.Options) (*chlocal.Server, func(), error) {
	srv, err := chlocal.Start(ctx, opt)
	if err != nil {
		return nil, nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go srv.Supervise(sctx, func(exit, err error) {
		if err != nil {
			a.log.Error("clickhouse server exited; restart failed (retrying)", "path", opt.Path, "exit", fmt.Sprint(exit), "err", err)
			return
		}
		a.log.Warn("clickhouse server exited; restarted", "path", opt.Path, "exit", fmt.Sprint(exit), "pid", srv.PID())
		if a.metrics != nil {
			a.metrics.EmbeddedRestarts.Inc()
		}
	})
	return srv, func() {
		cancel()
		sctx, cancelStop := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancelStop()
		t0 := time.Now()
		if err := srv.Stop(sctx); err != nil {
			a.log.Warn("stopping clickhouse server", "path", opt.Path, "err", err)
		}
		a.log.Debug("stopped embedded clickhouse", "seconds", time.Since(t0).Seconds())
	}, nil
}
