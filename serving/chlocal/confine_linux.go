//go:build linux

package chlocal

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock confinement of the server (docs/operations.md, "No files through SQL").
// clickhouse-local checks no path in its scalar file() function, which needs no grant,
// so SQL alone cannot keep a logged-in user from reading the machine's files; the kernel
// can. confine is hand-written on golang.org/x/sys/unix rather than go-landlock because
// it must restrict exactly the calling thread — the one that then enters ClickHouse, so
// every thread ClickHouse creates inherits the domain — where the library restricts all
// Go threads (psx) and needs cgo for it.

// landlockABI returns the kernel's Landlock ABI version, 0 if it has none.
func landlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

// fsRights are the file system rights Landlock knows at ABI version abi.
func fsRights(abi int) uint64 {
	r := uint64(unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_DIR | unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_DIR | unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK | unix.LANDLOCK_ACCESS_FS_MAKE_FIFO | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM)
	if abi >= 2 {
		r |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		r |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	return r
}

const roRights = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR

// errNoLandlock reports a kernel without Landlock.
var errNoLandlock = errors.New("the kernel has no Landlock (CONFIG_SECURITY_LANDLOCK, lsm=landlock)")

// confine restricts the calling OS thread and every thread it creates from now on
// (and what it executes):
// files only under rw (read, write, create, remove), ro (read) and exec (read, execute), TCP only binding the
// given ports and connecting to the connectPorts only (ABI ≥ 4), no signals to or ptrace of processes
// outside the domain — so neither /proc/<parent>/environ (ABI ≥ 6 for signals). The
// caller must have locked the thread (runtime.LockOSThread) and never unlock it.
func confine(rw, ro, exec []string, bindPorts, connectPorts []int) error {
	abi := landlockABI()
	if abi == 0 {
		return errNoLandlock
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: fsRights(abi)}
	if abi >= 4 {
		attr.Handled_access_net = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
	}
	if abi >= 6 {
		attr.Scoped = unix.LANDLOCK_SCOPE_SIGNAL | unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	}
	// The kernel takes the struct up to the last field it knows: Scoped since ABI 6.
	size := unsafe.Offsetof(attr.Quiet_access_fs)
	if abi < 6 {
		size = unsafe.Offsetof(attr.Scoped)
	}
	if abi < 4 {
		size = unsafe.Offsetof(attr.Handled_access_net)
	}
	fd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return fmt.Errorf("landlock create ruleset: %w", e)
	}
	defer unix.Close(int(fd))
	add := func(dir string, rights uint64) error {
		dfd, err := unix.Open(dir, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("landlock rule %s: %w", dir, err)
		}
		defer unix.Close(dfd)
		var st unix.Stat_t
		if err := unix.Fstat(dfd, &st); err != nil {
			return fmt.Errorf("landlock rule %s: %w", dir, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR { // a file takes only the rights on files
			rights &= unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
				unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
		}
		rule := unix.LandlockPathBeneathAttr{Allowed_access: rights & attr.Handled_access_fs, Parent_fd: int32(dfd)}
		if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); e != 0 {
			return fmt.Errorf("landlock rule %s: %w", dir, e)
		}
		return nil
	}
	for _, d := range rw {
		if err := add(d, attr.Handled_access_fs&^(unix.LANDLOCK_ACCESS_FS_EXECUTE|unix.LANDLOCK_ACCESS_FS_MAKE_CHAR|unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK)); err != nil {
			return err
		}
	}
	for _, d := range ro {
		if err := add(d, roRights); err != nil {
			return err
		}
	}
	for _, d := range exec {
		if err := add(d, roRights|unix.LANDLOCK_ACCESS_FS_EXECUTE); err != nil {
			return err
		}
	}
	if abi >= 4 {
		for _, p := range bindPorts {
			rule := landlockNetPort{allowed: unix.LANDLOCK_ACCESS_NET_BIND_TCP, port: uint64(p)}
			if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, landlockRuleNetPort, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); e != 0 {
				return fmt.Errorf("landlock port %d: %w", p, e)
			}
		}
		for _, p := range connectPorts {
			rule := landlockNetPort{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(p)}
			if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, fd, landlockRuleNetPort, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); e != 0 {
				return fmt.Errorf("landlock connect port %d: %w", p, e)
			}
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, fd, 0, 0); e != 0 {
		return fmt.Errorf("landlock restrict self: %w", e)
	}
	return nil
}

// landlockNetPort is struct landlock_net_port_attr (packed: u64, u64).
type landlockNetPort struct {
	allowed uint64
	port    uint64
}

const landlockRuleNetPort = 2 // LANDLOCK_RULE_NET_PORT

// systemReadPaths are what ClickHouse itself reads after its start: its own /proc
// entries but not its environment nor the links root, cwd and exe, the kernel's memory and CPU figures, and /sys
// (cgroup limits, block devices). Missing paths are left out.
func systemReadPaths() []string {
	self := "/proc/" + strconv.Itoa(os.Getpid())
	var paths []string
	if ents, err := os.ReadDir(self); err == nil {
		for _, e := range ents {
			// Not the symlinks (root and cwd would open the whole tree) nor the environment.
			if n := e.Name(); e.Type()&os.ModeSymlink == 0 && n != "environ" && n != "mem" {
				paths = append(paths, self+"/"+n)
			}
		}
	}
	for _, p := range []string{"/proc/meminfo", "/proc/loadavg", "/proc/stat", "/proc/cpuinfo", "/proc/sys", "/proc/pressure", "/proc/net", "/sys", "/dev/null", "/dev/urandom", "/dev/zero"} {
		if _, err := os.Stat(p); err == nil {
			paths = append(paths, p)
		}
	}
	return paths
}

// envConfined marks a process that Confine has confined and re-executed.
const envConfined = "GOLDBRIDGE_CHLOCAL_CONFINED"

// Confine confines this process to what the server of opt needs — Path read-write;
// opt.ReadDirs, libchdb, the system libraries and systemReadPaths read-only; binding
// its two ports — and re-executes it with the same arguments and environment (plus
// GOLDBRIDGE_CHLOCAL_CONFINED=1), so that every thread of the new image is confined;
// there it returns nil at once. Landlock restricts one thread and what it starts, and
// ClickHouse's thread pools do not all descend from the thread that calls it: only an
// exec from a confined thread confines a whole process. Call it before reading stdin.
// Without Landlock in the kernel it warns on stderr and returns nil.
func Confine(opt Options) error {
	if os.Getenv(envConfined) == "1" {
		return nil
	}
	if landlockABI() == 0 {
		fmt.Fprintf(os.Stderr, "chlocal: WARNING: %v: the server is not confined, any of its users can read this user's files with file()\n", errNoLandlock)
		return nil
	}
	rw, err := filepath.Abs(opt.Path)
	if err != nil {
		return fmt.Errorf("confine: %w", err)
	}
	if err := makePrivateDir(rw); err != nil {
		return fmt.Errorf("confine: %w", err)
	}
	if opt.LibPath == "" {
		if opt.LibPath, err = LibPath(); err != nil {
			return fmt.Errorf("confine: %w", err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("confine: %w", err)
	}
	ro := append(systemReadPaths(), opt.LibPath)
	for _, d := range opt.ReadDirs {
		if d, err = filepath.Abs(d); err != nil {
			return fmt.Errorf("confine: %w", err)
		}
		ro = append(ro, d)
	}
	// The loader and the libraries libchdb links (libc, libm, ...), and this binary.
	var exec []string
	for _, p := range []string{"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/etc/ld.so.cache", exe} {
		if _, err := os.Stat(p); err == nil {
			exec = append(exec, p)
		}
	}
	// A cluster node connects to the nodes of its cluster (Distributed reads), nowhere else.
	var connect []int
	if opt.Cluster != nil {
		if connect, err = opt.Cluster.ports(); err != nil {
			return fmt.Errorf("confine: %w", err)
		}
	}
	runtime.LockOSThread() // never unlocked: the exec replaces the process
	if err := confine([]string{rw}, ro, exec, []int{opt.TCPPort, opt.HTTPPort}, connect); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("confine: %w", err)
	}
	// The options (passwords included) reach the new image through a pipe it inherits,
	// never its environment or a file: the confined image may read neither the
	// password files nor the config outside its directories.
	fd, err := optionsPipe(opt)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("confine: %w", err)
	}
	env := append(os.Environ(), envConfined+"=1", envOptionsFD+"="+strconv.Itoa(fd))
	return fmt.Errorf("confine: re-exec %s: %w", exe, syscall.Exec(exe, os.Args, env))
}

// envOptionsFD names the inherited descriptor that holds the confined image's Options.
const envOptionsFD = "GOLDBRIDGE_CHLOCAL_OPTIONS_FD"

// optionsPipe writes opt as JSON into a new pipe and returns its read end, which an
// exec keeps (no close-on-exec); options are far below a pipe's buffer.
func optionsPipe(opt Options) (int, error) {
	b, err := json.Marshal(opt)
	if err != nil {
		return 0, err
	}
	var p [2]int
	if err := unix.Pipe(p[:]); err != nil {
		return 0, fmt.Errorf("options pipe: %w", err)
	}
	defer unix.Close(p[1])
	if n, err := unix.Write(p[1], b); err != nil || n != len(b) {
		unix.Close(p[0])
		return 0, fmt.Errorf("options pipe: wrote %d of %d bytes: %v", n, len(b), err)
	}
	return p[0], nil
}

// ConfinedOptions returns the Options that Confine handed to this re-executed image,
// and ok = false in any other process: the caller then builds its options itself.
func ConfinedOptions() (opt Options, ok bool, err error) {
	v := os.Getenv(envOptionsFD)
	if os.Getenv(envConfined) != "1" || v == "" {
		return Options{}, false, nil
	}
	_ = os.Unsetenv(envOptionsFD)
	fd, err := strconv.Atoi(v)
	if err != nil {
		return Options{}, true, fmt.Errorf("confined options: descriptor %q", v)
	}
	f := os.NewFile(uintptr(fd), "options")
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return Options{}, true, fmt.Errorf("confined options: %w", err)
	}
	if err := json.Unmarshal(b, &opt); err != nil {
		return Options{}, true, fmt.Errorf("confined options: %w", err)
	}
	return opt, true, nil
}
