package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// selectNames returns the requested names (all, sorted, when none are given), or an
// error naming the unknown ones.
func selectNames[V any](kind string, all map[string]V, requested []string) ([]string, error) {
	if len(requested) == 0 {
		return slices.Sorted(maps.Keys(all)), nil
	}
	var unknown []string
	for _, n := range requested {
		if _, ok := all[n]; !ok {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, &exitError{exitUsage, fmt.Errorf("unknown %s %s (the config has: %s)", kind, strings.Join(unknown, ", "), sortedNames(all))}
	}
	return requested, nil
}

// oneStage is the path of every one-stage command that writes: open the state as the
// writer, select the named entities or marts (all when none is named, an unknown name
// is a usage error), lease them for the command's life (leases.go: strict, exit 7 when
// another worker holds one), then run. kind is "entity" or "mart".
func (a *app) oneStage(ctx context.Context, kind string, args []string, run func(ctx context.Context, p *job, names []string) error) error {
	p, done, err := a.openWriter(ctx)
	if err != nil {
		return err
	}
	defer done()
	var entities, marts []string
	if kind == "mart" {
		marts, err = selectNames(kind, p.cfg.Marts, args)
	} else {
		entities, err = selectNames(kind, p.cfg.Entities, args)
	}
	if err != nil {
		return err
	}
	ctx, release, err := a.claimAll(ctx, p.Lake, p.cfg, entities, marts)
	if err != nil {
		return err
	}
	defer release()
	return run(ctx, p, append(entities, marts...))
}
