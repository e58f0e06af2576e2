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
	"goldbridge/lakehouse/catalog"
	"goldbridge/serving"
	"goldbridge/serving/chconn"
	"goldbridge/serving/chlocal"
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
			return a.withServing(cmd.Context(), args, func(ctx context.Context, conn func() (*chconn.Client, error), lh *catalog.Lakehouse, m *serving.Mart, cfg *config.Config) error {
				if !cfg.Marts[m.Name].Serving.IsEnabled() {
					fmt.Fprintf(a.stdout, "sync %s: serving disabled\n", m.Name)
					return nil
				}
				tbl, err := lh.LoadTable(ctx, cfg.Marts[m.Name].Table)
				if err != nil {
					return fmt.Errorf("sync %s: %w", m.Name, err)
				}
				if err := gbsync.Servable(m, tbl); err != nil {
					return err
				}
				recs, target := pushRecords(cfg), syncTarget(cfg)
				if rec, ok := unchangedRecord(cfg, recs, m, tbl, target, time.Now()); ok && !force && !rebuild {
					fmt.Fprintln(a.stdout, rec.Result().Summary(m.Name))
					return nil
				}
				c, err := conn()
				if err != nil {
					return err
				}
				sv := cfg.Marts[m.Name].Serving
				res, err := a.recordedSync(ctx, c, lh, m, tbl, cfg, gbsync.Options{
					Parallelism: sv.Parallelism, BatchRows: sv.BatchRows, Force: force, Rebuild: rebuild,
					Log: a.log.With("stage", "sync", "mart", m.Name),
				})
				fmt.Fprintln(a.stdout, res.Summary(m.Name))
				return explainCold(m.Name, err)
			})
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
			found := false
			var cold []error // marts that serve nothing (gbsync.ColdError)
			err := a.withServing(cmd.Context(), args, func(ctx context.Context, conn func() (*chconn.Client, error), lh *catalog.Lakehouse, m *serving.Mart, cfg *config.Config) error {
				if !cfg.Marts[m.Name].Serving.IsEnabled() {
					return nil
				}
				c, err := conn()
				if err != nil {
					return err
				}
				tbl, err := lh.LoadTable(ctx, cfg.Marts[m.Name].Table)
				if err != nil {
					return fmt.Errorf("check %s: %w", m.Name, err)
				}
				if err := gbsync.Servable(m, tbl); err != nil {
					return err
				}
				drifts, err := gbsync.Check(ctx, c, m, tbl, gbsync.Options{})
				if err := coldOnly(err); err != nil {
					return err
				}
				if err != nil {
					// Gold and ClickHouse agree in serving nothing: not "no drift".
					cold = append(cold, explainCold(m.Name, err))
				}
				a.printUnservable(ctx, m, tbl)
				if len(drifts) > 0 && repair {
					gbsync.PrintDrift(a.stdout, m.Name, drifts)
					sv := cfg.Marts[m.Name].Serving
					res, err := a.recordedSync(ctx, c, lh, m, tbl, cfg, gbsync.Options{Parallelism: sv.Parallelism, BatchRows: sv.BatchRows,
						Only: gbsync.DriftPartitions(drifts), Log: a.log.With("stage", "check", "mart", m.Name)})
					fmt.Fprintln(a.stdout, "repair: "+res.Summary(m.Name))
					if err != nil {
						return explainCold(m.Name, err)
					}
					if drifts, err = gbsync.Check(ctx, c, m, tbl, gbsync.Options{}); coldOnly(err) != nil {
						return err
					}
				}
				if len(drifts) == 0 {
					if err == nil {
						fmt.Fprintf(a.stdout, "check %s: no drift\n", m.Name)
					}
					return nil
				}
				found = true
				gbsync.PrintDrift(a.stdout, m.Name, drifts)
				return nil
			})
			if err == nil && found {
				return &exitError{exitDrift, fmt.Errorf("drift found between Gold and ClickHouse")}
			}
			if err == nil {
				err = errors.Join(cold...)
			}
			return err
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

// withServing loads the config, takes the state lock, opens the lakehouse and calls fn
// per selected mart with conn, which opens ClickHouse on first use.
func (a *app) withServing(ctx context.Context, args []string, fn func(context.Context, func() (*chconn.Client, error), *catalog.Lakehouse, *serving.Mart, *config.Config) error) error {
	cfg, err := a.loadConfig()
	if err != nil {
		return err
	}
	unlock, err := a.lockState()
	if err != nil {
		return err
	}
	defer unlock()
	marts, err := selectNames("mart", cfg.Marts, args)
	if err != nil {
		return err
	}
	lh, err := openLakehouse(ctx, cfg)
	if err != nil {
		return err
	}
	defer lh.Close()
	// ClickHouse is opened (the embedded server started) by the first mart that needs
	// it: a sync that its push records answer never reaches it.
	var c *chconn.Client
	stop := func() {}
	defer func() { stop() }()
	conn := func() (*chconn.Client, error) {
		if c != nil {
			return c, nil
		}
		cc, stopSrv, err := a.openClickHouse(ctx, cfg)
		if err != nil {
			return nil, err
		}
		c, stop = cc, func() { cc.Close(); stopSrv() }
		return c, nil
	}
	for _, name := range marts {
		m, err := servedMart(cfg, name)
		if err != nil {
			return err
		}
		if err := fn(ctx, conn, lh, m, cfg); err != nil {
			return err
		}
	}
	return nil
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
		Database: cfg.ClickHouse.Database, Table: mc.Serving.Table, Cluster: cfg.ClickHouse.Cluster,
		PartitionBy: mc.Serving.PartitionBy, HotWindow: mc.Serving.HotWindow.D(), HotAnchor: mc.Serving.HotWindowAnchor,
		TTL: mc.Serving.TTL.D(), Distinct: mc.Serving.Distinct,
	})
}

// openClickHouse connects to the configured ClickHouse; for the embedded server it
// reuses one already listening or starts one, and returns the function that stops it.
func (a *app) openClickHouse(ctx context.Context, cfg *config.Config) (*chconn.Client, func(), error) {
	ch := cfg.ClickHouse
	pw, err := clickhousePassword(cfg)
	if err != nil {
		return nil, nil, err
	}
	opt := chconn.Options{
		HTTP: ch.Protocol == "http", Database: ch.Database, User: ch.User, Password: pw,
		DialTimeout: ch.DialTimeout.D(), Settings: ch.Settings, MaxRetries: ch.MaxRetries, RetryBackoff: ch.RetryBackoff.D(),
	}
	if ch.TLS.Enabled {
		tc, err := tlsConfig(ch.TLS)
		if err != nil {
			return nil, nil, fmt.Errorf("clickhouse.tls: %w", err)
		}
		opt.TLS = tc
	}
	stop := func() {}
	if ch.IsEmbedded() {
		port := ch.Local.TCPPort
		if opt.HTTP {
			port = ch.Local.HTTPPort
		}
		opt.Addresses = []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
		base := fmt.Sprintf("http://127.0.0.1:%d", ch.Local.HTTPPort)
		if chlocal.Ping(ctx, base) != nil {
			_, stopSrv, err := a.startEmbedded(ctx, cfg)
			if err != nil {
				return nil, nil, err
			}
			stop = stopSrv
		}
	} else {
		opt.Addresses = ch.Addresses
	}
	// The connection's default database must exist before the handshake; the marts'
	// DDL creates it too, so this only matters on a fresh server.
	boot := opt
	boot.Database = "default"
	bc, err := chconn.Open(ctx, boot)
	if err != nil {
		stop()
		return nil, nil, err
	}
	err = bc.Conn().Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+serving.Q(ch.Database))
	bc.Close()
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("create database %s: %w", ch.Database, err)
	}
	c, err := chconn.Open(ctx, opt)
	if err != nil {
		stop()
		return nil, nil, err
	}
	a.log.Debug("connected", "clickhouse", c.String())
	return c, stop, nil
}
