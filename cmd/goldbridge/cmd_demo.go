package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"goldbridge/demo"
)

func (a *app) demoCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Demo data for trying goldbridge out",
	}
	var (
		opt     demo.Options
		out     string
		end     string
		seed    uint64
		dataset string
		taxi    demo.TaxiOptions
		events  demo.EventsOptions
	)
	gen := &cobra.Command{
		Use:   "generate",
		Short: "Write demo landing files: orders (CDC, examples/orders.yaml), taxi (TLC trips, examples/taxi.yaml), events (app events, examples/events.yaml)",
		Long: `--dataset orders (the default) writes landing files of an orders CDC stream like the source
documents describe: create/update/delete ops over time, ~5% exact duplicate deliveries, ~3%
late-arriving events, ~1% bad records, skewed customers/countries/categories and a hot key.
Deterministic for a seed and an end date; streams in constant memory.

--dataset taxi writes one landing (--landing N) of NYC yellow-taxi trips for
examples/taxi.yaml, as Parquet or CSV (--format), into <state-dir>/landing/taxi, and the
zone lookup into <state-dir>/reference/taxi_zone_lookup.csv. Landing N+1 repeats the second
half of landing N (an overlapping delivery); trips are a function of the seed and their index.

--dataset events writes one landing (--landing N, --events per landing) of an append-only app
event stream for examples/events.yaml, as JSON lines, into <state-dir>/landing/events. Landing
N+1 repeats the second half of landing N; each landing also retries ~3% of its lines, brings
late arrivals (new events 3 days older) and ~8% bad rows (NULL key, bad types, F1/F2), and
from landing 2 on re-sends earlier events (landing 3 on: some re-stamped more than a day
later, which a 1-day lookback appends again). A function of the seed and the landing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch dataset {
			case "orders":
			case "taxi":
				return a.demoTaxi(cmd, taxi, out, seed)
			case "events":
				events.Landing = taxi.Landing
				return a.demoEvents(cmd, events, out, seed)
			default:
				return &exitError{exitUsage, fmt.Errorf("--dataset: want orders, taxi or events, not %q", dataset)}
			}
			if out == "" {
				out = filepath.Join(a.stateDir, "landing", "orders")
			}
			opt.OutDir, opt.Seed = out, seed
			if end == "" {
				opt.End = time.Now().UTC().Truncate(24 * time.Hour)
			} else {
				t, err := time.Parse(time.DateOnly, end)
				if err != nil {
					return &exitError{exitUsage, fmt.Errorf("--end: want YYYY-MM-DD: %w", err)}
				}
				opt.End = t
			}
			if opt.Events <= 0 {
				return &exitError{exitUsage, fmt.Errorf("--events must be > 0")}
			}
			start := time.Now()
			st, err := demo.Generate(cmd.Context(), opt)
			if err != nil {
				return fmt.Errorf("demo generate: %w", err)
			}
			secs := time.Since(start).Seconds()
			fmt.Fprintf(a.stdout, "wrote %d events (%d keys: %d creates, %d updates, %d deletes, %d snapshots; %d duplicates, %d late, %d bad) to %d file(s) in %s, %.1f MB, %.2fs (%.0f events/s)\n",
				st.Events, st.Keys, st.Creates, st.Updates, st.Deletes, st.Snapshots, st.Duplicates, st.Late, st.Bad,
				len(st.Files), out, float64(st.Bytes)/1e6, secs, float64(st.Events)/secs)
			return nil
		},
	}
	f := gen.Flags()
	f.StringVar(&dataset, "dataset", "orders", "orders | taxi | events")
	f.StringVar(&taxi.Format, "format", "parquet", "taxi: parquet | csv")
	f.IntVar(&taxi.Landing, "landing", 1, "taxi, events: which landing (each overlaps the one before by half)")
	f.IntVar(&taxi.Trips, "trips", 2000, "taxi: trips per landing")
	f.StringVar(&out, "out", "", "output directory (default <state-dir>/landing/orders)")
	f.Int64Var(&opt.Events, "events", 100_000, "number of lines to write (events: stream events per landing, default 400)")
	f.Uint64Var(&seed, "seed", 1, "random seed")
	f.IntVar(&opt.Files, "files", 0, "number of files (default one per 250k events)")
	f.BoolVar(&opt.Gzip, "gzip", false, "gzip the files")
	f.StringVar(&end, "end", "", "newest day of the stream, YYYY-MM-DD (default today, UTC)")
	f.IntVar(&opt.Days, "days", 0, "days spanned by the orders (default 120)")
	f.Int64Var(&opt.Keys, "keys", 0, "distinct orders (default events/3.3)")
	cmd.AddCommand(gen)
	return cmd
}

// demoTaxi writes one landing of the taxi dataset (examples/taxi.yaml's paths by default).
func (a *app) demoTaxi(cmd *cobra.Command, opt demo.TaxiOptions, out string, seed uint64) error {
	if out == "" {
		out = filepath.Join(a.stateDir, "landing", "taxi")
	}
	opt.OutDir, opt.Seed = out, seed
	opt.ZonesPath = filepath.Join(a.stateDir, "reference", "taxi_zone_lookup.csv")
	path, err := demo.GenerateTaxi(cmd.Context(), opt)
	if err != nil {
		return &exitError{exitUsage, fmt.Errorf("demo generate: %w", err)}
	}
	from, to := demo.TaxiRange(opt.Landing, opt.Trips)
	fmt.Fprintf(a.stdout, "wrote trips %d..%d to %s and the zones to %s\n", from, to-1, path, opt.ZonesPath)
	return nil
}

// demoEvents writes one landing of the events dataset (examples/events.yaml's path by default).
func (a *app) demoEvents(cmd *cobra.Command, opt demo.EventsOptions, out string, seed uint64) error {
	if out == "" {
		out = filepath.Join(a.stateDir, "landing", "events")
	}
	opt.OutDir, opt.Seed, opt.Events = out, seed, 400
	if cmd.Flags().Changed("events") {
		n, _ := cmd.Flags().GetInt64("events")
		if n < 2 || n > 1_000_000 {
			return &exitError{exitUsage, fmt.Errorf("--events: want 2..1000000 stream events per landing for --dataset events, not %d", n)}
		}
		opt.Events = int(n)
	}
	st, err := demo.GenerateEvents(cmd.Context(), opt)
	if err != nil {
		return &exitError{exitUsage, fmt.Errorf("demo generate: %w", err)}
	}
	from, to := demo.EventsRange(opt.Landing, opt.Events)
	fmt.Fprintf(a.stdout, "wrote %d lines to %s: stream events %d..%d, %d retries, %d late arrivals, %d re-delivered, %d re-sent within a day, %d re-sent over a day later\n",
		st.Lines, st.Path, from, to-1, st.Retries, st.Late, st.Redelivered, st.ResentNear, st.Resent)
	return nil
}
