package main

import (
	"context"
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

// startEmbedded starts the embedded ClickHouse of cfg (startServer).
func (a *app) startEmbedded(ctx context.Context, cfg *config.Config) (*chlocal.Server, func(), error) {
	opt, err := embeddedOptions(cfg)
	if err != nil {
		return nil, nil, err
	}
	srv, stop, err := a.startServer(ctx, opt)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded clickhouse: %w", err)
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
