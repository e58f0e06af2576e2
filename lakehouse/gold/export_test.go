package gold

import (
	"context"
	"errors"
	"os"
	"syscall"
)

// What the external tests of this package (rebuild_crash_test.go, package gold_test:
// it imports serving and sync, which import gold) use of its internals.
var (
	KPIMart       = kpiMart
	LoadAndSilver = loadAndSilver
	GoldRows      = goldRows
	Typ           = typ
	First         = first
)

// Where TestRebuildCrash interrupts a rebuild: after the old table is dropped (before
// the new one is created), or in the first commit of the new one (its rows written).
const (
	CrashAfterDrop    = "after_drop"
	CrashBeforeCommit = "before_commit"
)

// CrashHooks are the options that interrupt a rebuild at point: with an error, or, in a
// child process (kill), with SIGKILL.
func CrashHooks(point string, kill bool, cancel context.CancelFunc) Options {
	stop := func() {
		if kill {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		cancel()
	}
	if point == CrashAfterDrop {
		return Options{afterDrop: func() error {
			stop()
			return ErrInjected
		}}
	}
	return Options{beforeCommit: func(int) { stop() }}
}

var ErrInjected = errors.New("injected fault")
