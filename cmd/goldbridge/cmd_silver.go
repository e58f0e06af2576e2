package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"goldbridge/lakehouse/silver"
)

func (a *app) silverCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "silver [ENTITY...]",
		Short: "Parse, type, quarantine and merge new Bronze rows into silver.<entity>",
		Long: `Reads the Bronze rows appended since the Bronze snapshot Silver processed last, types
them by the entity spec, applies the rules registry, quarantines what fails (with a
reason), keeps the newest version per key (late events never roll back newer state; op d
soft-deletes) and merges it into the Silver table with the new Bronze watermark in the
same commit. Running it again without new Bronze rows changes nothing.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			entities, err := selectNames("entity", cfg.Entities, args)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			lh, err := openLakehouse(ctx, cfg)
			if err != nil {
				return err
			}
			defer lh.Close()
			for _, name := range entities {
				spec, err := entitySpec(cfg, name)
				if err != nil {
					return err
				}
				res, err := silver.Run(ctx, lh, spec, cfg.Entities[name].Bronze.Table, silver.Options{
					Log: a.log.With("stage", "silver", "entity", name),
				})
				if err != nil {
					return fmt.Errorf("silver %s: %w", name, err)
				}
				c := res.Counts
				fmt.Fprintf(a.stdout, "silver %s: %d bronze rows = %d current + %d superseded + %d duplicates + %d quarantined; silver +%d new, %d updated (%d deleted); %.0f rows/s, run %s, snapshot %d\n",
					name, c.Read, c.Current, c.Superseded, c.Duplicates, c.Quarantined, c.Inserted, c.Updated, c.Deleted,
					float64(c.Read)/max(res.Elapsed.Seconds(), 1e-9), res.RunID, res.SnapshotID)
				if c.Read > 0 {
					qp := 100 * float64(c.Quarantined) / float64(c.Read)
					dp := 100 * float64(c.Duplicates) / float64(c.Read)
					if qp > spec.WarnQuarantinePct {
						a.log.Warn("quarantine rate above threshold", "entity", name, "pct", fmt.Sprintf("%.2f", qp), "threshold", spec.WarnQuarantinePct)
					}
					if dp > spec.WarnDuplicatePct {
						a.log.Warn("duplicate rate above threshold", "entity", name, "pct", fmt.Sprintf("%.2f", dp), "threshold", spec.WarnDuplicatePct)
					}
				}
			}
			return nil
		},
	}
}

func (a *app) rulesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rules ENTITY",
		Short: "Print the transformation rules registry of an entity as a Markdown table",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			if _, err := selectNames("entity", cfg.Entities, args); err != nil {
				return err
			}
			spec, err := entitySpec(cfg, args[0])
			if err != nil {
				return err
			}
			fmt.Fprint(a.stdout, silver.RulesMarkdown(spec))
			return nil
		},
	}
}
