package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"goldbridge/serving/chlocal"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the goldbridge version and the versions it was built with",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(a.stdout, "goldbridge %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, dep := range bi.Deps {
					switch dep.Path {
					case "github.com/apache/iceberg-go", "github.com/apache/arrow-go/v18", "github.com/ClickHouse/clickhouse-go/v2":
						fmt.Fprintf(a.stdout, "  %s %s\n", dep.Path, dep.Version)
					}
				}
			}
			fmt.Fprintf(a.stdout, "  embedded ClickHouse: libchdb %s\n", chlocal.LibVersion)
			return nil
		},
	}
}
