package pipeline

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"goldbridge/lakehouse/maintain"
)

// quietMaintenance is how often a run that committed nothing still maintains: snapshots
// age out of the retention even when nothing is written, but nothing grows meanwhile.
const quietMaintenance = time.Hour

// MaintainDue reports whether Run maintains after its stages: maintenance is enabled,
// and the last one (the stamp <state-dir>/maintained) is at least Maintenance.Every old,
// or quietMaintenance old when this Runner committed nothing (a run with nothing new
// then stays as cheap as it was).
func (r *Runner) MaintainDue() bool {
	mc := r.Plan.Maintenance()
	if !mc.Enabled {
		return false
	}
	fi, err := os.Stat(filepath.Join(r.StateDir, "maintained"))
	if err != nil {
		return true
	}
	age := time.Since(fi.ModTime())
	if !r.committed && !r.landed {
		return age >= max(mc.Every, quietMaintenance)
	}
	return age >= mc.Every
}

// Maintain maintains the tables of entities and marts (those of only, if any given),
// knowing every reader of the whole pipeline, prints what it did, records each table's
// cost in the metrics, and stamps the state dir.
func (r *Runner) Maintain(ctx context.Context, entities, marts, only []string) (err error) {
	start := time.Now()
	defer func() { r.observe("maintain", start, err) }()
	ents, ms, layers, err := r.lake()
	if err != nil {
		return err
	}
	if len(only) == 0 {
		if only, err = r.Tables(entities, marts); err != nil {
			return err
		}
	}
	policy := r.Plan.Maintenance().Policy
	reports, err := maintain.Run(ctx, r.Lake, ents, ms, maintain.Options{
		Only:   only,
		Log:    r.Log.With("stage", "maintain"),
		Policy: func(ident string) maintain.Policy { return policy(ident, layers[ident]) },
	})
	for _, rep := range reports {
		r.recordMaintenance(rep)
	}
	if err == nil {
		_ = os.WriteFile(filepath.Join(r.StateDir, "maintained"), nil, 0o600)
	}
	return err
}

// recordMaintenance prints what maintenance did to one table and records its cost.
func (r *Runner) recordMaintenance(rep maintain.Report) {
	st := rep.Stats
	l := []string{rep.Table, rep.Layer}
	r.Metrics.TableSnapshots.WithLabelValues(l...).Set(float64(st.Snapshots))
	r.Metrics.TableDataFiles.WithLabelValues(l...).Set(float64(st.DataFiles))
	r.Metrics.TableDeleteFiles.WithLabelValues(l...).Set(float64(st.DeleteFiles))
	r.Metrics.TableManifests.WithLabelValues(l...).Set(float64(st.DataManifests + st.DeleteManifests))
	r.Metrics.TableMetadataBytes.WithLabelValues(l...).Set(float64(st.MetadataBytes))
	if rep.Err == nil {
		r.Metrics.MaintenanceLastSuccess.WithLabelValues(rep.Table).SetToCurrentTime()
	}
	if rep.Compacted.SnapshotID != 0 || rep.Expired.Snapshots > 0 || rep.ManifestsAfter != rep.ManifestsBefore {
		fmt.Fprintf(r.Out, "maintain %s: %d snapshots expired (%d kept, %d files deleted), %d files compacted into %d (%d delete files removed), manifests %d -> %d, %.2fs\n",
			rep.Table, rep.Expired.Snapshots, rep.Expired.Kept, rep.Expired.Files, rep.Compacted.DataFilesRemoved, rep.Compacted.DataFilesAdded,
			rep.Compacted.DeleteFilesRemoved, rep.ManifestsBefore, rep.ManifestsAfter, rep.Elapsed.Seconds())
	}
}

// lake describes every table of the pipeline for maintenance, with each table's layer.
func (r *Runner) lake() ([]maintain.Entity, []maintain.Mart, map[string]string, error) {
	layers := map[string]string{}
	var ents []maintain.Entity
	for _, name := range r.Plan.Entities() {
		e, err := r.Plan.Entity(name)
		if err != nil {
			return nil, nil, nil, err
		}
		sv := e.Silver
		me := maintain.Entity{Name: name, Bronze: e.Bronze, Silver: sv.Table, Quarantine: sv.QuarantineTable, Keys: sv.KeysTable}
		layers[me.Bronze], layers[me.Silver], layers[me.Quarantine] = maintain.LayerBronze, maintain.LayerSilver, maintain.LayerQuarantine
		if me.Keys != "" {
			layers[me.Keys] = maintain.LayerKeys
		}
		ents = append(ents, me)
	}
	var ms []maintain.Mart
	for _, name := range r.Plan.Marts() {
		mc, err := r.Plan.Mart(name)
		if err != nil {
			return nil, nil, nil, err
		}
		spec := mc.Gold
		m := maintain.Mart{Name: name, Gold: spec.Table, Source: spec.SourceTable}
		for _, j := range spec.Joins {
			m.Joins = append(m.Joins, j.Table)
		}
		layers[m.Gold] = maintain.LayerGold
		ms = append(ms, m)
	}
	return ents, ms, layers, nil
}

// Tables lists the lake tables of entities and marts.
func (r *Runner) Tables(entities, marts []string) ([]string, error) {
	out := []string{}
	for _, name := range entities {
		e, err := r.Plan.Entity(name)
		if err != nil {
			return nil, err
		}
		out = append(out, e.Bronze, e.Silver.Table, e.Silver.QuarantineTable)
		if e.Silver.KeysTable != "" {
			out = append(out, e.Silver.KeysTable)
		}
	}
	for _, name := range marts {
		mc, err := r.Plan.Mart(name)
		if err != nil {
			return nil, err
		}
		out = append(out, mc.Gold.Table)
	}
	return out, nil
}
