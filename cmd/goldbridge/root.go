package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/cmd/goldbridge/internal/plan"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/silver"
	"goldbridge/sync/pipeline"
)

// Exit codes of goldbridge; docs/operations.md documents them for cron and Kubernetes.
const (
	exitOK          = 0
	exitFailure     = 1 // any error
	exitUsage       = 2 // bad flags or an invalid config
	exitCircuitOpen = 3 // a critical data-quality check failed; the mart's circuit is open
	exitDrift       = 4 // check found ClickHouse partitions that differ from Gold
	exitStale       = 5 // freshness SLA breached
	// exitSilverGate: a Silver run committed nothing because of its data: it quarantined
	// more than its fail_quarantine_pct, or a critical quality check failed (data or
	// spec, not config syntax: fix the producer or the spec; retrying fails the same way).
	exitSilverGate = 6
	// exitLeaseHeld: with a shared catalog, another worker holds the lease of an entity or
	// mart a one-stage command would touch (claimAll); nothing was changed.
	exitLeaseHeld = 7
)

// exitError carries a specific exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// app is the state shared by the commands of one invocation.
type app struct {
	configPath string
	stateDir   string
	logLevel   string
	logFormat  string
	cpuProfile string
	memProfile string
	traceFile  string
	stopProf   []func()
	leaseWait  time.Duration // --wait of the one-stage commands that write (claimAll)

	stdout, stderr io.Writer
	log            *slog.Logger
	metrics        *pipeline.Metrics
}

// run executes one command line and returns the process exit code. A panic is an
// internal failure (exit 1), not the Go runtime's exit 2, which means a usage error here.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "goldbridge: internal error: %v\n%s", r, debug.Stack())
			code = exitFailure
		}
	}()
	a := &app{stdout: stdout, stderr: stderr}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	for _, stop := range a.stopProf {
		stop()
	}
	if a.memProfile != "" {
		if f, perr := os.Create(a.memProfile); perr == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "goldbridge:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, pipeline.ErrDrift) {
		return exitDrift
	}
	if errors.Is(err, silver.ErrQuarantineGate) || errors.Is(err, silver.ErrCriticalCheck) {
		return exitSilverGate
	}
	if errors.Is(err, gold.ErrCircuitOpen) {
		return exitCircuitOpen
	}
	var ps config.Problems
	if errors.As(err, &ps) || strings.HasPrefix(err.Error(), "unknown command") ||
		strings.HasPrefix(err.Error(), "unknown flag") || strings.Contains(err.Error(), "arg(s)") {
		return exitUsage
	}
	return exitFailure
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "goldbridge",
		Short: "Bronze → Silver → Gold on Apache Iceberg, hot Gold partitions kept in ClickHouse",
		Long: `goldbridge runs a lakehouse's Bronze → Silver → Gold chain on Apache Iceberg and keeps
the hot Gold partitions in ClickHouse in step with it.

The embedded default needs no servers: an SQLite Iceberg catalog and a local warehouse
under --state-dir, and a local ClickHouse 26.7 started by goldbridge itself.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.setup()
		},
	}
	f := root.PersistentFlags()
	f.StringVarP(&a.configPath, "config", "c", envOr("GOLDBRIDGE_CONFIG", "pipeline.yaml"), "pipeline config file ($GOLDBRIDGE_CONFIG)")
	f.StringVar(&a.stateDir, "state-dir", envOr("GOLDBRIDGE_STATE_DIR", "./var"), "state directory: embedded catalog, warehouse, local ClickHouse data ($GOLDBRIDGE_STATE_DIR)")
	f.StringVar(&a.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&a.logFormat, "log-format", "text", "log format: text or json")
	f.StringVar(&a.cpuProfile, "cpuprofile", "", "write a CPU profile (pprof) of the command to this file")
	_ = f.MarkHidden("cpuprofile")
	f.StringVar(&a.memProfile, "memprofile", "", "write a heap profile (pprof) at the end of the command to this file")
	_ = f.MarkHidden("memprofile")
	f.StringVar(&a.traceFile, "trace", "", "write an execution trace (go tool trace) of the command to this file")
	_ = f.MarkHidden("trace")

	root.AddCommand(
		a.validateCmd(),
		a.leased(a.ingestCmd()),
		a.leased(a.silverCmd()),
		a.leased(a.replayCmd()),
		a.leased(a.compactCmd()),
		a.leased(a.maintainCmd()),
		a.rulesCmd(),
		a.leased(a.forgetCmd()),
		a.leased(a.goldCmd()),
		a.freshnessCmd(),
		a.leased(a.syncCmd()),
		a.leased(a.checkCmd()),
		a.runCmd(),
		a.serveCmd(),
		a.demoCmd(),
		a.clickhouseCmd(),
		a.tablesCmd(),
		a.queryCmd(),
		a.versionCmd(),
	)
	return root
}

func (a *app) setup() error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(a.logLevel)); err != nil {
		return &exitError{exitUsage, fmt.Errorf("--log-level: %w", err)}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch a.logFormat {
	case "text":
		a.log = slog.New(slog.NewTextHandler(a.stderr, opts))
	case "json":
		a.log = slog.New(slog.NewJSONHandler(a.stderr, opts))
	default:
		return &exitError{exitUsage, fmt.Errorf("--log-format must be text or json, got %q", a.logFormat)}
	}
	abs, err := filepath.Abs(a.stateDir)
	if err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	// Every file goldbridge creates (catalog, warehouse Parquet and metadata, ClickHouse
	// data, passwords, landing files of the demo) is private to its user, whatever the
	// umask it was started with (docs/operations.md, "Private by default").
	privateUmask()
	a.stateDir = abs
	for _, p := range []struct {
		path  string
		start func(io.Writer) error
		stop  func()
	}{
		{a.cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile},
		{a.traceFile, trace.Start, trace.Stop},
	} {
		if p.path == "" {
			continue
		}
		f, err := os.Create(p.path)
		if err != nil {
			return err
		}
		if err := p.start(f); err != nil {
			f.Close()
			return err
		}
		a.stopProf = append(a.stopProf, func() { p.stop(); f.Close() })
	}
	return nil
}

// loadConfig reads and validates the pipeline file and fills in the embedded server's
// ports the config leaves to the state dir (localPorts).
func (a *app) loadConfig() (*config.Config, error) {
	cfg, err := a.readConfig()
	if err != nil {
		return nil, err
	}
	if err := a.localPorts(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// readConfig reads and validates the pipeline file; it writes nothing.
func (a *app) readConfig() (*config.Config, error) {
	cfg, err := config.Load(a.configPath, a.stateDir, plan.CheckRules)
	if err != nil {
		var ps config.Problems
		if errors.As(err, &ps) {
			return nil, &exitError{exitUsage, fmt.Errorf("%s: %w", a.configPath, err)}
		}
		return nil, err
	}
	return cfg, nil
}

// loadConfigOptional is loadConfig, or the defaults when no file exists at the default path.
func (a *app) loadConfigOptional(cmd *cobra.Command) (*config.Config, error) {
	if !cmd.Flags().Changed("config") && os.Getenv("GOLDBRIDGE_CONFIG") == "" {
		if _, err := os.Stat(a.configPath); errors.Is(err, os.ErrNotExist) {
			cfg, err := config.Parse([]byte("version: 1\n"), a.stateDir, nil)
			if err != nil {
				return nil, err
			}
			if err := a.localPorts(cfg); err != nil {
				return nil, err
			}
			return cfg, nil
		}
	}
	return a.loadConfig()
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
