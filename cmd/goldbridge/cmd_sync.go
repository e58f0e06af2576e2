package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chlocal"
	"goldbridge/serving/chtarget"
	gbsync "goldbridge/sync"
)

func (a *app) syncCmd() *cobra.Command {
	var force, rebuild bool
	cmd := &cobra.Command{
		Use:   "sync [MART...]",
		Short: "Push the hot window of each mart's Gold table into ClickHouse, exactly once",
		Long: `For each mart (all by default), creates or checks the ClickHouse tables, pushes every hot
partition whose Gold content changed since its last push (or that is missing in ClickHouse)
with an atomic REPLACE PARTITION, and drops partitions that left the hot window. A mart whose
circuit is open is skipped. Safe to interrupt and re-run: each partition is old or new.
--rebuild MART drops the mart's ClickHouse tables and pushes the window again.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.stageCmd(cmd.Context(), "sync", args, serveOptions{force: force, rebuild: rebuild})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "push every hot partition even if unchanged")
	cmd.Flags().BoolVar(&rebuild, "rebuild", false, "drop and recreate the mart's ClickHouse tables, then push the hot window")
	return cmd
}

func (a *app) checkCmd() *cobra.Command {
	var repair bool
	cmd := &cobra.Command{
		Use:   "check [MART...]",
		Short: "Compare every hot partition between Gold and ClickHouse; exit 4 on drift",
		Long: `Compares, per hot partition and grouping level, the row count, an order-independent
fingerprint of every served row (every dimension and finished measure value) and the sum of
every numeric measure between the Gold Iceberg table and ClickHouse, and the served table's
columns with the mart's DDL; prints the partitions that differ and exits with status 4 if
any do. --repair re-pushes them (rebuilding a drifted table) and checks again.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.stageCmd(cmd.Context(), "check", args, serveOptions{repair: repair})
		},
	}
	cmd.Flags().BoolVar(&repair, "repair", false, "re-push the drifting partitions")
	return cmd
}

// explainCold adds the keys that serve a backfill to the error of a sync that found
// nothing in a clock-anchored hot window (gbsync.ColdError).
func explainCold(mart string, err error) error {
	var ce *gbsync.ColdError
	if !errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("%w; to serve it set marts.%s.serving.hot_window_anchor: data (the window then counts back from the newest Gold partition) or widen marts.%s.serving.hot_window",
		err, mart, mart)
}

// coldOnly returns err unless it is a gbsync.ColdError: a check that found nothing in a
// clock-anchored window has still compared what there is.
func coldOnly(err error) error {
	var ce *gbsync.ColdError
	if errors.As(err, &ce) {
		return nil
	}
	return err
}

// printUnservable prints the hot Gold partitions that are not served (their grain is
// outside what ClickHouse's grain type holds), if any.
func (a *app) printUnservable(ctx context.Context, m *serving.Mart, tbl *table.Table) {
	if u, err := gbsync.Unservable(ctx, m, tbl, time.Now()); err == nil && len(u) > 0 {
		fmt.Fprintf(a.stdout, "check %s: %s\n", m.Name, gbsync.UnservableSummary(u))
	}
}

// stageCmd runs the sync or check stage (syncStage) for the marts named in args (all by
// default), as a command: with the config loaded, the state lock taken and the
// lakehouse open (openWriter).
func (a *app) stageCmd(ctx context.Context, stage string, args []string, o serveOptions) error {
	p, done, err := a.openWriter(ctx)
	if err != nil {
		return err
	}
	defer done()
	marts, err := selectNames("mart", p.cfg.Marts, args)
	if err != nil {
		return err
	}
	ctx, release, err := a.claimAll(ctx, p.lh, p.cfg, nil, marts)
	if err != nil {
		return err
	}
	defer release()
	return a.syncStage(ctx, p, stage, marts, o)
}

// servedMart builds the serving model of a mart from its Gold spec (martSpec) and its
// serving keys (serving.NewMart): complete, so nothing fills it in later.
func servedMart(cfg *config.Config, name string) (*serving.Mart, error) {
	spec, err := martSpec(cfg, name)
	if err != nil {
		return nil, fmt.Errorf("mart %s: %w", name, err)
	}
	mc := cfg.Marts[name]
	return serving.NewMart(spec, serving.Target{
		Database: cfg.ClickHouse.Database, Table: mc.Serving.Table, Cluster: cfg.ClickHouse.Cluster, Sharded: len(cfg.ClickHouse.Shards) > 0,
		PartitionBy: mc.Serving.PartitionBy, HotWindow: mc.Serving.HotWindow.D(), HotAnchor: mc.Serving.HotWindowAnchor,
		TTL: mc.Serving.TTL.D(), Distinct: mc.Serving.Distinct,
	})
}

// openClickHouse connects to the configured ClickHouse; the embedded server is found
// running or started (useEmbedded), and the returned function stops a server it started.
// With clickhouse.shards it connects to the first node (openTarget connects to all).
func (a *app) openClickHouse(ctx context.Context, cfg *config.Config) (*chconn.Client, func(), error) {
	stop := func() {}
	if cfg.ClickHouse.IsEmbedded() {
		_, stopSrv, err := a.useEmbedded(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		stop = stopSrv
	}
	c, err := a.dialClickHouse(ctx, cfg)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

// dialClickHouse connects to the configured ClickHouse, with clickhouse.shards to its
// first node. It never starts the embedded server, and connects to it only once it
// answered, without a login, that it is this state dir's (checkEmbedded).
func (a *app) dialClickHouse(ctx context.Context, cfg *config.Config) (*chconn.Client, error) {
	ch := cfg.ClickHouse
	opt, err := clientOptions(cfg)
	if err != nil {
		return nil, err
	}
	switch {
	case ch.IsEmbedded():
		if err := checkEmbedded(ctx, cfg); err != nil {
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
	return a.connect(ctx, opt)
}

// clientOptions are the connection options of the clickhouse section, addresses aside.
func clientOptions(cfg *config.Config) (chconn.Options, error) {
	ch := cfg.ClickHouse
	pw, err := clickhousePassword(cfg)
	if err != nil {
		return chconn.Options{}, err
	}
	opt := chconn.Options{
		HTTP: ch.Protocol == "http", Database: ch.Database, User: ch.User, Password: pw,
		DialTimeout: ch.DialTimeout.D(), Settings: ch.Settings, MaxRetries: ch.MaxRetries, RetryBackoff: ch.RetryBackoff.D(),
	}
	if ch.TLS.Enabled {
		tc, err := tlsConfig(ch.TLS)
		if err != nil {
			return chconn.Options{}, fmt.Errorf("clickhouse.tls: %w", err)
		}
		opt.TLS = tc
	}
	return opt, nil
}

// connect opens a client with opt after creating its database: the connection's
// default database must exist before the handshake (the marts' DDL creates it too, so
// this only matters on a fresh server).
func (a *app) connect(ctx context.Context, opt chconn.Options) (*chconn.Client, error) {
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
	a.log.Debug("connected", "clickhouse", c.String())
	return c, nil
}

// openSharded connects to every node of clickhouse.shards, as the sync target of the
// sharded topology (chtarget.Sharded); done closes the clients.
func (a *app) openSharded(ctx context.Context, cfg *config.Config) (t *chtarget.Sharded, done func(), err error) {
	opt, err := clientOptions(cfg)
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
			o := opt
			o.Addresses = []string{addr}
			c, err := a.connect(ctx, o)
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
