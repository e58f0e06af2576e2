package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/lakehouse/bronze"
	"goldbridge/lakehouse/catalog"
)

// openLakehouse opens the Iceberg catalog described by the config.
func openLakehouse(ctx context.Context, cfg *config.Config) (*catalog.Lakehouse, error) {
	lh := cfg.Lakehouse
	props := map[string]string{}
	for k, v := range lh.Catalog.Properties {
		props[k] = v.Reveal()
	}
	pathStyle := lh.S3.PathStyle != nil && *lh.S3.PathStyle
	return catalog.Open(ctx, catalog.Config{
		Type:      lh.Catalog.Type,
		URI:       lh.Catalog.URI,
		Name:      lh.Catalog.Name,
		Warehouse: lh.Warehouse,
		S3: catalog.S3Config{
			Endpoint: lh.S3.Endpoint, Region: lh.S3.Region, PathStyle: pathStyle,
			AccessKeyID: lh.S3.AccessKeyID, SecretAccessKey: lh.S3.SecretAccessKey.Reveal(),
		},
		Properties: props,
	})
}

// fileSources returns the file sources of an entity as the bronze package takes them.
func fileSources(cfg *config.Config, entity string) []bronze.FileSource {
	var out []bronze.FileSource
	for _, name := range cfg.Entities[entity].Sources {
		s := cfg.Sources[name]
		if s.Type != "file" {
			continue
		}
		var delim rune
		if s.CSV.Delimiter != "" {
			delim = []rune(s.CSV.Delimiter)[0]
		}
		out = append(out, bronze.FileSource{
			Name: name, System: s.System + "_file", Dir: s.Path, Pattern: s.Pattern,
			Format: s.Format, Compression: s.Compression, CSVDelim: delim,
		})
	}
	return out
}

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
