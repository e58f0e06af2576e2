package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/hotconn"
	"goldbridge/serving/chlocal"
)

func (a *app) clickhouseCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "clickhouse",
		Short: "The local ClickHouse 26.7 server of the embedded stack",
	}
	var flags chlocal.Options
	serve := &cobra.Command{
		Use:   "serve",
		Short: "Run a local ClickHouse server in the foreground (libchdb; get it with `make clickhouse`)",
		Long: `Runs ClickHouse 26.7 from libchdb in the foreground, listening on 127.0.0.1 only, with
the users of the config (clickhouse.user and clickhouse.local.readers, passwords as for
the embedded server: generated on first start under --state-dir unless configured).
Defaults come from clickhouse.local in the config, or the embedded defaults under
--state-dir. On Linux it can read no file outside its data directory and --read-dir
(Landlock). --dir sets its working directory, under which icebergLocal() reads tables
(a warehouse there must also be a --read-dir). Stop it with Ctrl-C or SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfigOptional(cmd)
			if err != nil {
				return err
			}
			if !cfg.ClickHouse.IsEmbedded() {
				return &exitError{exitUsage, fmt.Errorf("clickhouse serve: the config has clickhouse.embedded: false")}
			}
			opt, err := hotconn.EmbeddedOptions(cfg)
			if err != nil {
				return err
			}
			fl := cmd.Flags()
			if fl.Changed("path") {
				opt.Path = flags.Path
			}
			if fl.Changed("tcp-port") {
				opt.TCPPort = flags.TCPPort
			}
			if fl.Changed("http-port") {
				opt.HTTPPort = flags.HTTPPort
			}
			opt.ReadDirs = flags.ReadDirs
			if fl.Changed("dir") {
				opt.Dir = flags.Dir
			}
			// The server runs in a child confined to its data directory and --read-dir,
			// supervised (restarted if it dies), as under run and serve. The child may
			// not connect to any port, its own included, so this process is the one
			// that stops it: confined in the foreground, it could not stop itself.
			opt.Stderr = a.stderr
			ctx := cmd.Context()
			_, stop, err := a.ch().StartServer(ctx, opt)
			if err != nil {
				if ctx.Err() != nil {
					return nil // stopped while starting: Start killed the child
				}
				return fmt.Errorf("clickhouse serve: %w", hotconn.PortsAdvice(cfg, err))
			}
			a.log.Info("clickhouse serve", "path", opt.Path, "tcp_port", opt.TCPPort, "http_port", opt.HTTPPort, "read_dirs", strings.Join(opt.ReadDirs, ","))
			<-ctx.Done()
			stop()
			return nil
		},
	}
	f := serve.Flags()
	f.StringVar(&flags.Path, "path", "", "data directory (default clickhouse.local.path)")
	f.IntVar(&flags.TCPPort, "tcp-port", 0, "native protocol port (default clickhouse.local.tcp_port, else the state dir's own)")
	f.IntVar(&flags.HTTPPort, "http-port", 0, "HTTP port (default clickhouse.local.http_port, else the state dir's own)")
	f.StringSliceVar(&flags.ReadDirs, "read-dir", nil, "a directory the server's users may read with file() besides its data directory (repeatable; the bench's landing files); none by default")
	f.StringVar(&flags.Dir, "dir", "", "working directory: relative file names and icebergLocal() tables resolve inside it (default --path; the bench's run directory)")

	query := &cobra.Command{
		Use:   "query SQL",
		Short: "Run one SQL statement against the configured ClickHouse (starting the embedded one if needed) and print the result",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.loadConfigOptional(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			base, stop, err := a.ch().HTTP(ctx, cfg)
			if err != nil {
				return err
			}
			defer stop()
			pw, err := hotconn.Password(cfg)
			if err != nil {
				return err
			}
			return hotconn.HTTPQuery(ctx, base, cfg.ClickHouse.User, pw, args[0], nil, a.stdout)
		},
	}
	cmd.AddCommand(serve, query)
	return cmd
}
