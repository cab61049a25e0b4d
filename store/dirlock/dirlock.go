package dirlock

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// FileName is the name of the lock file inside a locked directory.
const FileName = "LOCK"

// maxPIDLen bounds how much of a LOCK file is read to find the holder's pid.
const maxPIDLen = 32

// Lock is an exclusive lock on a data directory, held from [Acquire] until
// [Lock.Release] or process exit. Its methods are safe for concurrent use.
type Lock struct {
	dir string

	mu sync.Mutex // guards f
	f  *os.File   // nil once released
}

// Acquire takes an exclusive lock on dir, which must exist (and not be ""), by flocking
// dir/LOCK (creating it if needed) without blocking, and records the current
// pid in it. If the directory is already locked, by this process or another,
// Acquire returns a [*LockedError] matching [ErrLocked] at once.
func Acquire(dir string) (*Lock, error) {
	if dir == "" { // else LOCK would be made in the working directory
		return nil, errors.New("dirlock: empty dir path")
	}
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dirlock: open lock file: %w", err)
	}
	locked, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("dirlock: flock %s: %w", path, err)
	}
	if !locked {
		pid := readPID(f)
		f.Close()
		return nil, &LockedError{Dir: dir, PID: pid}
	}
	if err := writePID(f); err != nil {
		unlock(f)
		f.Close()
		return nil, fmt.Errorf("dirlock: write pid to %s: %w", path, err)
	}
	return &Lock{dir: dir, f: f}, nil
}

// Release unlocks the directory and closes the lock file; the file itself
// stays. Calling Release again returns an error matching [os.ErrClosed].
func (l *Lock) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("dirlock: release %s: %w", l.dir, os.ErrClosed)
	}
	f := l.f
	l.f = nil
	err := unlock(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("dirlock: release %s: %w", l.dir, err)
	}
	return nil
}

// writePID replaces the contents of f with the current pid and a newline.
func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}

// readPID returns the pid recorded in f, or 0 if it holds none.
func readPID(f *os.File) int {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, maxPIDLen))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}
