// Command goldbridge runs a lakehouse's Bronze → Silver → Gold chain on Apache Iceberg and
// keeps the hot Gold partitions in ClickHouse in step with it.
//
// This package holds only flags, configuration and wiring; the work is done by lakehouse/,
// serving/ and sync/.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"goldbridge/serving/chlocal"
)

func main() {
	// The embedded ClickHouse runs as a child process of this same binary.
	chlocal.MaybeRunChild()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
