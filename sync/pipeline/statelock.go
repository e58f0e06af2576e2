package pipeline

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/gofrs/flock"
)

// LockFile is the state lock inside the state directory.
const LockFile = "goldbridge.lock"

// ErrStateLocked is returned by LockState when another process holds the state lock.
var ErrStateLocked = errors.New("state is locked by another goldbridge process")

// LockState takes the exclusive lock <dir>/goldbridge.lock, so that two goldbridge
// processes never write the same embedded tables (SQLite catalog, local warehouse, local
// ClickHouse data). Every command that writes (ingest, silver, gold, forget, sync, run,
// replay, serve) takes it for its whole life; read-only commands do not. It does not
// wait: a second writer fails at once with ErrStateLocked (exit code 1), which is also
// what keeps a cron or systemd timer run from overlapping a slow previous one or a
// running `serve`. The kernel releases the lock when the process dies, however it dies.
//
// The lock is local to one machine: with a REST catalog and an external ClickHouse
// shared by several hosts, run one writer per pipeline (a Kubernetes Deployment with
// one replica, or CronJobs with concurrencyPolicy: Forbid).
func LockState(dir string, log *slog.Logger) (unlock func(), err error) {
	if err := privateDir(dir, log); err != nil {
		return nil, fmt.Errorf("state lock: %w", err)
	}
	path := filepath.Join(dir, LockFile)
	fl := flock.New(path)
	ok, err := fl.TryLock()
	if err != nil {
		return nil, fmt.Errorf("state lock %s: %w", path, err)
	}
	if !ok {
		return nil, fmt.Errorf("%w (%s); wait for it to finish or stop `goldbridge serve`", ErrStateLocked, path)
	}
	// The holder's pid, for people: the lock itself is the flock, not the content.
	_ = os.WriteFile(path, fmt.Appendf(nil, "%d\n", os.Getpid()), 0o600)
	return func() { _ = fl.Unlock() }, nil
}

// privateDir creates the state directory 0700, or makes an existing one 0700 (with a
// warning): it holds the catalog, the raw Bronze payloads, the ClickHouse data and the
// generated passwords, none of which other users of the machine may read. Files inside
// are created 0600 (setup sets the umask to 077), and the 0700 directory also guards
// files left readable by an older version.
func privateDir(dir string, log *slog.Logger) error {
	st, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		return err
	}
	if st.Mode().Perm()&0o077 != 0 && log != nil {
		log.Warn("state directory was readable by others: made private (0700)", "dir", dir, "was", st.Mode().Perm().String())
	}
	if st.Mode().Perm()&0o077 != 0 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}
