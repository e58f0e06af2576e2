package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/cmd/goldbridge/internal/plan"
	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/forget"
	"goldbridge/lakehouse/gold"
	"goldbridge/lakehouse/pii"
	"goldbridge/sync/pipeline"
)

func (a *app) forgetCmd() *cobra.Command {
	var (
		where, shred         string
		confirm, dryRun, log bool
	)
	cmd := &cobra.Command{
		Use:   "forget ENTITY (--where 'field = value' | --shred SUBJECT) (--dry-run | --confirm) | forget --log",
		Short: "Right to be forgotten: erase a person from Bronze, Silver, Gold and ClickHouse and expire the history that holds them",
		Long: `The one exception to append-only Bronze, and the last resort after tokenising before the
lake and crypto-shredding (docs/privacy.md). Rewrites the Bronze data files that hold rows
whose payload field equals the value, rebuilds the entity's Silver, quarantine and keys
tables from Bronze, recomputes the Gold marts the entity feeds and pushes them to
ClickHouse again; then every one of those tables expires all earlier snapshots and deletes
the files only they used, so no time travel can serve the rows again. Watermarks move with
the data: the next run continues with no manual step. The value is never logged or stored
(only its SHA-256). --dry-run prints what it would touch and changes nothing. Every
finished forget appends a record to the Iceberg table audit.forget_log (when, entity,
field, SHA-256 of the value, rows removed and snapshots expired per table, who and
where), which no expiry touches; --log prints it.

With --shred SUBJECT (entities with a pii section: crypto-shredding) Bronze is not
touched: the subject's key is deleted, so its encrypted fields read as NULL; Silver,
Gold and ClickHouse are rebuilt and their older snapshots expired as above.`,
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if log {
				if len(args) > 0 || where != "" || shred != "" || confirm || dryRun {
					return &exitError{exitUsage, errors.New("--log takes no entity and no other flag")}
				}
				return a.printForgetLog(cmd)
			}
			if len(args) != 1 || (where == "") == (shred == "") {
				return &exitError{exitUsage, errors.New("want ENTITY and one of --where 'field = value' or --shred SUBJECT (or --log)")}
			}
			if confirm && dryRun {
				return &exitError{exitUsage, errors.New("--confirm and --dry-run exclude each other")}
			}
			var req bronze.ForgetRequest
			if where != "" {
				var err error
				if req, err = bronze.ParseForgetWhere(where); err != nil {
					return &exitError{exitUsage, fmt.Errorf("--where: %w", err)}
				}
			}
			p, done, err := a.openWriter(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			cfg := p.cfg
			if _, err := selectNames("entity", cfg.Entities, args); err != nil {
				return err
			}
			target, err := plan.ForgetTarget(cfg, args[0])
			if err != nil {
				return err
			}
			target.Log = a.log.With("stage", "forget", "entity", args[0])
			target.Operator, target.Host = forget.Operator()
			ctx := cmd.Context()
			if confirm { // a dry run changes nothing: it takes no lease
				var release func()
				if ctx, release, err = a.claimAll(ctx, p.Lake, cfg, args, martNames(target.Marts)); err != nil {
					return err
				}
				defer release()
			}
			if _, target.Decrypt, err = plan.PII(ctx, p.Lake, cfg, args[0]); err != nil {
				return err
			}
			var deleteKey func(context.Context) (bool, error)
			if shred != "" {
				pc := cfg.Entities[args[0]].PII
				if pc == nil {
					return &exitError{exitUsage, fmt.Errorf("--shred: entities.%s has no pii section (see docs/privacy.md)", args[0])}
				}
				req = bronze.ForgetRequest{Field: config.PIIKey(pc.Subject), Value: shred}
				deleteKey = func(ctx context.Context) (bool, error) {
					store, err := pii.NewSQLStore(ctx, p.Lake.DB())
					if err != nil {
						return false, err
					}
					return pii.Shred(ctx, store, shred)
				}
			}
			if !confirm {
				res, err := forget.Plan(ctx, p.Lake, target, req)
				if err != nil {
					return err
				}
				res.WritePlan(a.stdout, req)
				if verb := "erase"; !dryRun {
					if shred != "" {
						verb = "shred"
					}
					return &exitError{exitUsage, fmt.Errorf("forget %s: %w: nothing was changed (--confirm to %s, --dry-run to only look)", args[0], bronze.ErrNotConfirmed, verb)}
				}
				return nil
			}
			res, err := p.Forget(ctx, target, req, deleteKey)
			switch {
			case err != nil && !errors.Is(err, pipeline.ErrForgetNotServed):
				return err
			case !res.Found && shred != "":
				fmt.Fprintf(a.stdout, "forget %s: no key and no rows for %s; nothing was changed\n", args[0], req)
			case !res.Found:
				fmt.Fprintf(a.stdout, "forget %s: no row with %s in any table; nothing was changed\n", args[0], req)
			default:
				res.WriteRun(a.stdout, req)
				if shred == "" {
					printLookupCopies(a.stdout, cfg, args[0])
				}
			}
			return err
		},
	}
	cmd.Flags().StringVar(&where, "where", "", "payload field and value: 'user_id = u-42'")
	cmd.Flags().StringVar(&shred, "shred", "", "crypto-shredding: delete the key of this subject (the entity's pii.subject value)")
	cmd.Flags().BoolVar(&confirm, "confirm", false, "really erase")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the tables, files, rows and partitions a forget would touch; change nothing")
	cmd.Flags().BoolVar(&log, "log", false, "print the audit log of finished forgets ("+forget.AuditTable+")")
	return cmd
}

// printForgetLog prints audit.forget_log (read only: no state lock).
func (a *app) printForgetLog(cmd *cobra.Command) error {
	cfg, err := a.readConfig()
	if err != nil {
		return err
	}
	lh, err := plan.OpenLakehouse(cmd.Context(), cfg)
	if err != nil {
		return err
	}
	defer lh.Close()
	recs, err := forget.Log(cmd.Context(), lh)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		fmt.Fprintf(a.stdout, "%s: no forget recorded\n", forget.AuditTable)
		return nil
	}
	for _, r := range recs {
		fmt.Fprintln(a.stdout, r)
	}
	return nil
}

// printLookupCopies names the entities whose Silver rows carry columns of entity through
// a lookup (plan.LookupCopies): a forget of entity does not rebuild them.
func printLookupCopies(w io.Writer, cfg *config.Config, entity string) {
	if deps := plan.LookupCopies(cfg, entity); len(deps) > 0 {
		fmt.Fprintf(w, "  note: %s look up %s: their Silver copies of its columns are rebuilt by their next run (or `goldbridge replay ENTITY` now); their older snapshots expire with maintenance\n",
			strings.Join(deps, ", "), entity)
	}
}

// martNames are the names of a forget's marts.
func martNames(marts []gold.MartSpec) []string {
	names := make([]string, len(marts))
	for i, m := range marts {
		names[i] = m.Name
	}
	return names
}
