package main

import (
	"context"
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
same commit (upsert mode), or appends the events whose key is not in Silver yet (append
mode). Running it again without new Bronze rows changes nothing. The quality report (rows,
schema, aggregates) is printed and stored in the Silver snapshot summary as
goldbridge.quality.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.oneStage(cmd.Context(), "entity", args, func(ctx context.Context, p *pipeline, entities []string) error {
				return p.silver(ctx, entities)
			})
		},
	}
}

func (a *app) rulesCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rules ENTITY",
		Short: "Print the transformation rules registry of an entity as a Markdown table",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.readConfig() // the config only
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

// printSilverResult prints a Silver run's accounting and its quality report, and logs
// the report's warnings and its failed checks of severity warning (a critical one is the
// run's error).
func (a *app) printSilverResult(stage string, spec silver.EntitySpec, res silver.Result) {
	c := res.Counts
	name := spec.Name
	if spec.Mode == silver.ModeAppend {
		fmt.Fprintf(a.stdout, "%s %s: %d bronze rows = %d appended + %d duplicates + %d quarantined",
			stage, name, c.Read, c.Current, c.Duplicates, c.Quarantined)
	} else {
		skipped := ""
		if spec.Debezium != nil {
			skipped = fmt.Sprintf(" + %d tombstones", c.Skipped)
		}
		fmt.Fprintf(a.stdout, "%s %s: %d bronze rows = %d current + %d superseded + %d duplicates + %d quarantined%s; silver +%d new, %d updated (%d deleted)",
			stage, name, c.Read, c.Current, c.Superseded, c.Duplicates, c.Quarantined, skipped, c.Inserted, c.Updated, c.Deleted)
	}
	fmt.Fprintf(a.stdout, "; %.0f rows/s, run %s, snapshot %d\n", float64(c.Read)/max(res.Elapsed.Seconds(), 1e-9), res.RunID, res.SnapshotID)
	for _, l := range res.Quality.Lines() {
		fmt.Fprintf(a.stdout, "  %s\n", l)
	}
	for _, w := range res.Quality.Warnings {
		a.log.Warn(w, "stage", stage, "entity", name)
	}
	for _, f := range res.Quality.Failures {
		if f.Severity == silver.SeverityWarning {
			a.log.Warn("quality check failed; published (severity warning)", "stage", stage, "entity", name, "check", f.Check, "detail", f.Detail)
		}
	}
}
