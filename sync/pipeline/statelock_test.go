package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestLockStatePrivate: the state directory is created 0700 whatever the umask, and an
// existing world-readable one is made private.
func TestLockStatePrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, existing := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "state")
		if existing {
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		unlock, err := LockState(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		unlock()
		for _, p := range []string{dir, filepath.Join(dir, LockFile)} {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm()&0o077 != 0 {
				t.Errorf("existing=%v: %s is %v", existing, p, st.Mode().Perm())
			}
		}
	}
}

func TestLockState(t *testing.T) {
	dir := t.TempDir()
	unlock, err := LockState(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockState(dir, nil); !errors.Is(err, ErrStateLocked) {
		t.Fatalf("second lock: %v, want ErrStateLocked", err)
	}
	unlock()
	unlock2, err := LockState(dir, nil)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}
