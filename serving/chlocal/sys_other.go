//go:build !linux

package chlocal

import (
	"io/fs"
	"syscall"
)

// sysProcAttr: no parent-death signal outside Linux.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// keepSignalHandlers is a no-op outside Linux: ClickHouse keeps its handlers.
func keepSignalHandlers(func()) {}

// privateUmask is a no-op outside Linux.
func privateUmask() {}

// Confine does nothing outside Linux: the server is not confined (see confine_linux.go).
func Confine(Options) error { return nil }

// ConfinedOptions: no process is confined outside Linux.
func ConfinedOptions() (Options, bool, error) { return Options{}, false, nil }

// fileID: outside Linux hard links are not told apart (DiskUsage counts a shared file
// under each of its names).
func fileID(fs.FileInfo) (key fileKey, linked bool) { return fileKey{}, false }
