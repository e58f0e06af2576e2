package main

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

func (a *app) validateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "Check the pipeline config and print every problem with its path",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			w := a.stdout
			fmt.Fprintf(w, "%s: ok\n", a.configPath)
			fmt.Fprintf(w, "  catalog:    %s %s\n", cfg.Lakehouse.Catalog.Type, redactedURI(cfg.Lakehouse.Catalog.URI))
			fmt.Fprintf(w, "  warehouse:  %s\n", cfg.Lakehouse.Warehouse)
			if ch := cfg.ClickHouse; ch.IsEmbedded() {
				fmt.Fprintf(w, "  clickhouse: embedded at %s (tcp %d, http %d), database %s\n",
					ch.Local.Path, ch.Local.TCPPort, ch.Local.HTTPPort, ch.Database)
			} else {
				fmt.Fprintf(w, "  clickhouse: %s over %s, database %s\n", strings.Join(ch.Addresses, ","), ch.Protocol, ch.Database)
			}
			fmt.Fprintf(w, "  sources:    %s\n", sortedNames(cfg.Sources))
			fmt.Fprintf(w, "  entities:   %s\n", sortedNames(cfg.Entities))
			fmt.Fprintf(w, "  marts:      %s\n", sortedNames(cfg.Marts))
			fmt.Fprintf(w, "  schedules:  %s\n", sortedNames(cfg.Schedules))
			return nil
		},
	}
}

// sortedNames lists the keys of a config map, sorted and comma-separated.
func sortedNames[V any](m map[string]V) string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// redactedURI is uri with the password of a URL (a postgres:// catalog's) replaced by
// "xxxxx"; a plain path is returned as is.
func redactedURI(uri string) string {
	if u, err := url.Parse(uri); err == nil && u.User != nil {
		return u.Redacted()
	}
	return uri
}
