package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"goldbridge/lakehouse/silver"
)

func (a *app) compactCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "compact ENTITY",
		Short: "Rewrite silver.<entity>'s data files with their deletes applied",
		Long: `Pays Silver's merge-on-read debt: every partition of the entity's Silver table where an
equality delete applies, or that holds more than one data file, is rewritten into new
data files with the deletes applied, and the delete files no longer needed are removed,
in one commit. Rows and their values (run ids included) do not change; the commit keeps
Silver's Bronze watermark, so silver continues where it was and gold recomputes nothing.

Run it periodically (e.g. daily). Running it again with nothing to do commits nothing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.oneStage(cmd.Context(), "entity", args, func(ctx context.Context, p *job, names []string) error {
				return a.compact(ctx, p, names[0])
			})
		},
	}
}

// compact compacts one entity's Silver table (silver.Compact) and prints the result.
func (a *app) compact(ctx context.Context, p *job, name string) error {
	res, err := silver.Compact(ctx, p.Lake, p.cfg.Entities[name].Silver.Table)
	if err != nil {
		return err
	}
	if res.SnapshotID == 0 {
		fmt.Fprintf(a.stdout, "compact %s: nothing to compact (%.2fs)\n", name, res.Elapsed.Seconds())
		return nil
	}
	fmt.Fprintf(a.stdout, "compact %s: %d partitions, %d data files -> %d, %d delete files removed, %.1f MB -> %.1f MB, %.2fs, snapshot %d\n",
		name, res.Partitions, res.DataFilesRemoved, res.DataFilesAdded, res.DeleteFilesRemoved,
		float64(res.BytesBefore)/1e6, float64(res.BytesAfter)/1e6, res.Elapsed.Seconds(), res.SnapshotID)
	return nil
}
