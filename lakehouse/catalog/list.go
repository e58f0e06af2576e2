package catalog

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Tables returns the identifiers ("ns.table") of every table of the catalog's top-level
// namespaces, sorted.
func (l *Lakehouse) Tables(ctx context.Context) ([]string, error) {
	nss, err := l.cat.ListNamespaces(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	var out []string
	for _, ns := range nss {
		for id, err := range l.cat.ListTables(ctx, ns) {
			if err != nil {
				return nil, fmt.Errorf("list tables of %s: %w", strings.Join(ns, "."), err)
			}
			out = append(out, strings.Join(id, "."))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
