package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/plan"
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
			return a.oneStage(cmd.Context(), "entity", args, func(ctx context.Context, p *job, entities []string) error {
				return p.Silver(ctx, entities)
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
			spec, err := plan.EntitySpec(cfg, args[0])
			if err != nil {
				return err
			}
			fmt.Fprint(a.stdout, silver.RulesMarkdown(spec))
			return nil
		},
	}
}
