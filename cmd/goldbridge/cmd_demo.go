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
		opt  demo.Options
		out  string
		end  string
		seed uint64
	)
	gen := &cobra.Command{
		Use:   "generate",
		Short: "Write an orders CDC landing stream (JSON lines) with duplicates, late events and bad records",
		Long: `Writes landing files of an orders CDC stream like the source documents describe:
create/update/delete ops over time, ~5% exact duplicate deliveries, ~3% late-arriving
events, ~1% bad records, skewed customers/countries/categories and a hot key.
Deterministic for a seed and an end date; streams in constant memory.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
	f.StringVar(&out, "out", "", "output directory (default <state-dir>/landing/orders)")
	f.Int64Var(&opt.Events, "events", 100_000, "number of lines to write")
	f.Uint64Var(&seed, "seed", 1, "random seed")
	f.IntVar(&opt.Files, "files", 0, "number of files (default one per 250k events)")
	f.BoolVar(&opt.Gzip, "gzip", false, "gzip the files")
	f.StringVar(&end, "end", "", "newest day of the stream, YYYY-MM-DD (default today, UTC)")
	f.IntVar(&opt.Days, "days", 0, "days spanned by the orders (default 120)")
	f.Int64Var(&opt.Keys, "keys", 0, "distinct orders (default events/3.3)")
	cmd.AddCommand(gen)
	return cmd
}
