package main

import (
	"context"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func (a *app) ingestCmd() *cobra.Command {
	var reingest, retryQuarantined bool
	cmd := &cobra.Command{
		Use:   "ingest [ENTITY...]",
		Short: "Land new source records append-only in bronze.<entity>, exactly once",
		Long: `Loads the landing files (and Kafka records) of each entity that Bronze has not seen yet
into its Bronze table, with audit columns, in one Iceberg commit per entity. The files
consumed are recorded in the same commit, so running it again adds nothing and a crash
at any point is repaired by running it again. A landing file that changed after it was
ingested is reported and skipped; --reingest reads it again. A landing file that cannot be
read (corrupt compression, broken CSV quoting, unreadable Parquet, permission denied, a
dangling symbolic link) is quarantined: listed in the summary and the
goldbridge_quarantined_files metric, recorded in the Bronze table, and skipped until its
content changes; --retry-quarantined reads it again now. The other files are ingested.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.oneStage(cmd.Context(), "entity", args, func(ctx context.Context, p *job, entities []string) error {
				p.Reingest, p.RetryQuarantined = reingest, retryQuarantined
				return p.Ingest(ctx, entities)
			})
		},
	}
	cmd.Flags().BoolVar(&reingest, "reingest", false, "read again landing files that changed after they were ingested (their rows land twice in Bronze)")
	cmd.Flags().BoolVar(&retryQuarantined, "retry-quarantined", false, "read again the quarantined landing files, even unchanged")
	return cmd
}

// progress returns a progress callback (a bar on a terminal, a log line every 10 s
// otherwise) and the function that finishes it.
func (a *app) progress(entity string, totalBytes int64) (func(bytes, rows int64), func()) {
	if f, ok := a.stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		bar := progressbar.NewOptions64(totalBytes,
			progressbar.OptionSetWriter(f), progressbar.OptionSetDescription("ingest "+entity),
			progressbar.OptionShowBytes(true), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish())
		return func(b, _ int64) { _ = bar.Set64(b) }, func() { _ = bar.Finish() }
	}
	last := time.Now()
	return func(b, rows int64) {
		if time.Since(last) >= 10*time.Second {
			last = time.Now()
			a.log.Info("ingesting", "entity", entity, "bytes", b, "of", totalBytes, "rows", rows)
		}
	}, func() {}
}
