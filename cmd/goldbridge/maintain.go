package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/lakehouse/maintain"
)

func (a *app) maintainCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "maintain [TABLE...]",
		Short: "Expire old snapshots, compact small files and merge manifests of every lake table (run and serve do it by themselves)",
		Long: `Keeps what each lake table costs independent of how many runs it has seen
(docs/operations.md, "Maintenance"): snapshots outside maintenance.retain_age and
retain_min are expired and the files only they used deleted, never one that a
watermark or a Gold mart still starts from; small files are compacted (Bronze per
partition once every consumer has read them, Silver's merge-on-read debt, quarantine
and keys tables); manifests are merged; old metadata files are bounded. Rows, run ids
and watermarks never change: gold recomputes nothing and sync pushes nothing because of it.
With TABLE arguments (e.g. silver.orders) only those tables are maintained.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, done, err := a.openWriter(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			names := p.cfg.TableNames()
			for _, t := range args {
				if !slices.Contains(names, t) {
					return &exitError{exitUsage, fmt.Errorf("maintain: %q is not a table of this pipeline (%v)", t, names)}
				}
			}
			entities, marts := slices.Sorted(maps.Keys(p.cfg.Entities)), slices.Sorted(maps.Keys(p.cfg.Marts))
			ctx, release, err := a.claimAll(cmd.Context(), p.lh, p.cfg, entities, marts)
			if err != nil {
				return err
			}
			defer release()
			return p.maintain(ctx, entities, marts, args)
		},
	}
}

// quietMaintenance is how often a run that committed nothing still maintains: snapshots
// age out of the retention even when nothing is written, but nothing grows meanwhile.
const quietMaintenance = time.Hour

// maintainDue reports whether run and serve maintain after their stages: maintenance is
// enabled, and the last one (the stamp <state-dir>/maintained) is at least
// maintenance.every old, or quietMaintenance old when this run committed nothing (a
// run with nothing new then stays as cheap as it was).
func (p *pipeline) maintainDue() bool {
	mc := p.cfg.Maintenance
	if !mc.IsEnabled() {
		return false
	}
	fi, err := os.Stat(filepath.Join(p.cfg.StateDir, "maintained"))
	if err != nil {
		return true
	}
	age := time.Since(fi.ModTime())
	if !p.committed && !p.landed {
		return age >= max(mc.Every.D(), quietMaintenance)
	}
	return age >= mc.Every.D()
}

// maintain maintains the tables of entities and marts (those of only, if any given),
// knowing every reader of the whole pipeline, prints what it did, records each table's
// cost in the metrics, and stamps the state dir.
func (p *pipeline) maintain(ctx context.Context, entities, marts, only []string) (err error) {
	start := time.Now()
	defer func() { p.observe("maintain", start, err) }()
	ents, ms, layers, err := lakeOf(p.cfg)
	if err != nil {
		return err
	}
	if len(only) == 0 {
		only = tablesOf(p.cfg, entities, marts)
	}
	reports, err := maintain.Run(ctx, p.lh, ents, ms, maintain.Options{
		Only: only,
		Log:  p.a.log.With("stage", "maintain"),
		Policy: func(ident string) maintain.Policy {
			return policy(p.cfg.MaintenanceOf(ident, layerOf(layers[ident])))
		},
	})
	for _, r := range reports {
		st := r.Stats
		l := []string{r.Table, r.Layer}
		p.m.TableSnapshots.WithLabelValues(l...).Set(float64(st.Snapshots))
		p.m.TableDataFiles.WithLabelValues(l...).Set(float64(st.DataFiles))
		p.m.TableDeleteFiles.WithLabelValues(l...).Set(float64(st.DeleteFiles))
		p.m.TableManifests.WithLabelValues(l...).Set(float64(st.DataManifests + st.DeleteManifests))
		p.m.TableMetadataBytes.WithLabelValues(l...).Set(float64(st.MetadataBytes))
		if r.Err == nil {
			p.m.MaintenanceLastSuccess.WithLabelValues(r.Table).SetToCurrentTime()
		}
		if r.Compacted.SnapshotID != 0 || r.Expired.Snapshots > 0 || r.ManifestsAfter != r.ManifestsBefore {
			fmt.Fprintf(p.a.stdout, "maintain %s: %d snapshots expired (%d kept, %d files deleted), %d files compacted into %d (%d delete files removed), manifests %d -> %d, %.2fs\n",
				r.Table, r.Expired.Snapshots, r.Expired.Kept, r.Expired.Files, r.Compacted.DataFilesRemoved, r.Compacted.DataFilesAdded,
				r.Compacted.DeleteFilesRemoved, r.ManifestsBefore, r.ManifestsAfter, r.Elapsed.Seconds())
		}
	}
	if err == nil {
		_ = os.WriteFile(filepath.Join(p.cfg.StateDir, "maintained"), nil, 0o600)
	}
	return err
}

// lakeOf describes every table of the pipeline for maintenance, with each table's layer.
func lakeOf(cfg *config.Config) ([]maintain.Entity, []maintain.Mart, map[string]string, error) {
	layers := map[string]string{}
	var ents []maintain.Entity
	for _, name := range slices.Sorted(maps.Keys(cfg.Entities)) {
		sv := cfg.Entities[name].Silver
		e := maintain.Entity{Name: name, Bronze: cfg.Entities[name].Bronze.Table, Silver: sv.Table,
			Quarantine: sv.QuarantineTable, Keys: sv.KeysTable}
		layers[e.Bronze], layers[e.Silver], layers[e.Quarantine] = maintain.LayerBronze, maintain.LayerSilver, maintain.LayerQuarantine
		if e.Keys != "" {
			layers[e.Keys] = maintain.LayerKeys
		}
		ents = append(ents, e)
	}
	var ms []maintain.Mart
	for _, name := range slices.Sorted(maps.Keys(cfg.Marts)) {
		spec, err := martSpec(cfg, name)
		if err != nil {
			return nil, nil, nil, err
		}
		m := maintain.Mart{Name: name, Gold: spec.Table, Source: spec.SourceTable}
		for _, j := range spec.Joins {
			m.Joins = append(m.Joins, j.Table)
		}
		layers[m.Gold] = maintain.LayerGold
		ms = append(ms, m)
	}
	return ents, ms, layers, nil
}

// tablesOf lists the tables of entities and marts.
func tablesOf(cfg *config.Config, entities, marts []string) []string {
	out := []string{}
	for _, name := range entities {
		e := cfg.Entities[name]
		out = append(out, e.Bronze.Table, e.Silver.Table, e.Silver.QuarantineTable)
		if e.Silver.KeysTable != "" {
			out = append(out, e.Silver.KeysTable)
		}
	}
	for _, name := range marts {
		out = append(out, cfg.Marts[name].Table)
	}
	return out
}

// layerOf is the maintenance.tables key of a layer: quarantine and keys tables are Silver's.
func layerOf(layer string) string {
	if layer == maintain.LayerQuarantine || layer == maintain.LayerKeys {
		return maintain.LayerSilver
	}
	return layer
}

// policy is the maintain.Policy of a configured (defaulted) policy.
func policy(c config.MaintenancePolicy) maintain.Policy {
	return maintain.Policy{
		RetainAge: c.RetainAge.D(), RetainMin: *c.RetainMin, MaxFiles: *c.MaxFiles, MaxDeleteFiles: *c.MaxDeleteFiles,
		MaxManifests: *c.MaxManifests, MetadataVersions: *c.MetadataVersions,
	}
}
