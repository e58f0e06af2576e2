//go:build linux

package chlocal

import (
	"io/fs"
	"syscall"
	"unsafe"
)

// sysProcAttr makes the kernel SIGKILL the child when the forking thread (kept
// alive by Start for the child's lifetime) dies, so no server outlives its parent.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// crashSignals are the signals chdb_set_signal_handlers_enabled(0) resets to SIG_DFL.
var crashSignals = []syscall.Signal{
	syscall.SIGABRT, syscall.SIGSEGV, syscall.SIGILL, syscall.SIGBUS,
	syscall.SIGSYS, syscall.SIGFPE, syscall.SIGTSTP, syscall.SIGTRAP,
}

// kernelSigaction is an opaque buffer larger than the kernel's struct sigaction.
type kernelSigaction [64]byte

// keepSignalHandlers runs f (which resets crash signal handlers as a side
// effect) and then puts back the handlers that were installed before, byte
// for byte at the kernel level, so the Go runtime keeps owning them.
func keepSignalHandlers(f func()) {
	saved := make([]kernelSigaction, len(crashSignals))
	ok := make([]bool, len(crashSignals))
	for i, sig := range crashSignals {
		_, _, e := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), 0,
			uintptr(unsafe.Pointer(&saved[i])), 8, 0, 0)
		ok[i] = e == 0
	}
	f()
	for i, sig := range crashSignals {
		if ok[i] {
			syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig),
				uintptr(unsafe.Pointer(&saved[i])), 0, 8, 0, 0)
		}
	}
}

// privateUmask makes the files this process creates from now on private to its user.
func privateUmask() { syscall.Umask(0o077) }

// fileID returns the key that identifies the file info describes across its names,
// and whether it has several (hard links).
func fileID(info fs.FileInfo) (key fileKey, linked bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{dev: st.Dev, ino: st.Ino}, st.Nlink > 1
}
