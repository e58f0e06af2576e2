package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"goldbridge/cmd/goldbridge/internal/config"
	"goldbridge/cmd/goldbridge/internal/hotconn"
	"goldbridge/serving/chlocal"
)

func (a *app) validateCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "validate",
		Short: "Check the pipeline config and print every problem with its path",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.readConfig() // validate writes nothing: no ports are chosen here
			if err != nil {
				return err
			}
			w := a.stdout
			fmt.Fprintf(w, "%s: ok\n", a.configPath)
			fmt.Fprintf(w, "  catalog:    %s %s\n", cfg.Lakehouse.Catalog.Type, redactedURI(cfg.Lakehouse.Catalog.URI))
			fmt.Fprintf(w, "  warehouse:  %s\n", cfg.Lakehouse.Warehouse)
			if ch := cfg.ClickHouse; ch.IsEmbedded() {
				fmt.Fprintf(w, "  clickhouse: embedded at %s (%s), database %s\n", ch.Local.Path, embeddedPortsText(cfg), ch.Database)
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

// embeddedPortsText describes the ports of cfg's embedded server as the config and the
// state dir's record give them, without choosing any.
func embeddedPortsText(cfg *config.Config) string {
	l := cfg.ClickHouse.Local
	if l.TCPPort != 0 && l.HTTPPort != 0 {
		return fmt.Sprintf("tcp %d, http %d", l.TCPPort, l.HTTPPort)
	}
	file := hotconn.PortsFile(cfg)
	p, err := chlocal.ReadPorts(file)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "ports of its own, chosen at first use into " + file
	case err != nil:
		return err.Error()
	}
	if l.TCPPort != 0 {
		p.TCP = l.TCPPort
	}
	if l.HTTPPort != 0 {
		p.HTTP = l.HTTPPort
	}
	return fmt.Sprintf("tcp %d, http %d, kept in %s", p.TCP, p.HTTP, file)
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
