//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package dirlock

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Environment variables of the helper child process.
const (
	// execWrapperEnv names a program that runs child test binaries, for
	// example qemu-aarch64-static when the suite runs under qemu-user.
	execWrapperEnv = "EDGEMQ_TEST_EXEC_WRAPPER"
	// helperDirEnv tells TestHelperProcess which directory to lock.
	helperDirEnv = "EDGEMQ_DIRLOCK_HELPER_DIR"
)

// childTimeout bounds how long a child may take to start and lock; generous
// because children may run under qemu-user.
const childTimeout = 60 * time.Second

// helperCommand returns a command that runs this test binary with args,
// through the program named by $EDGEMQ_TEST_EXEC_WRAPPER when it is set.
func helperCommand(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("os.Executable: %v", err)
	}
	name := exe
	if w := os.Getenv(execWrapperEnv); w != "" {
		name = w
		args = append([]string{exe}, args...)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// TestHelperProcess is not a real test: run as a child with helperDirEnv set,
// it locks that directory, prints "locked <pid>" and holds the lock until its
// stdin closes or it is killed.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper process for TestLockOtherProcess")
	}
	l, err := Acquire(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("locked %d\n", os.Getpid())
	io.Copy(io.Discard, os.Stdin)
	l.Release()
	os.Exit(0)
}

// startHolder starts a child process that locks dir and returns it with the
// pid the child reported once it holds the lock.
func startHolder(t *testing.T, dir string) (*exec.Cmd, int) {
	t.Helper()
	cmd := helperCommand(t, []string{helperDirEnv + "=" + dir}, "-test.run=^TestHelperProcess$")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
		io.Copy(io.Discard, stdout)
	}()
	select {
	case s := <-line:
		pid, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(s), "locked "))
		if err != nil {
			t.Fatalf("child said %q, want \"locked <pid>\"", s)
		}
		return cmd, pid
	case <-time.After(childTimeout):
		t.Fatalf("child did not lock within %v", childTimeout)
	}
	return nil, 0
}

func TestLockOtherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd, pid := startHolder(t, dir)

	start := time.Now()
	l, err := Acquire(dir)
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Acquire took %v while locked, want it to fail fast", elapsed)
	}
	if err == nil {
		l.Release()
		t.Fatal("Acquire succeeded while a child holds the lock")
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("Acquire: got %v, want ErrLocked", err)
	}
	want := fmt.Sprintf("dirlock: data dir %s in use by pid %d", dir, pid)
	if err.Error() != want {
		t.Errorf("error: got %q, want %q", err, want)
	}
	var le *LockedError
	if !errors.As(err, &le) || le.PID != pid || le.Dir != dir {
		t.Errorf("LockedError: got %+v, want Dir %s PID %d", le, dir, pid)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	l, err = Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after the child died: %v", err)
	}
	defer l.Release()
	if got, want := readFile(t, dir), fmt.Sprintf("%d\n", os.Getpid()); got != want {
		t.Errorf("LOCK holds %q, want %q", got, want)
	}
}

func TestLockSameProcess(t *testing.T) {
	dir := t.TempDir()
	l, err := Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(dir)
	if err == nil {
		l2.Release()
		t.Fatal("second Acquire in the same process succeeded")
	}
	want := fmt.Sprintf("dirlock: data dir %s in use by pid %d", dir, os.Getpid())
	if !errors.Is(err, ErrLocked) || err.Error() != want {
		t.Fatalf("second Acquire: got %v, want %q", err, want)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := l.Release(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("second Release: got %v, want os.ErrClosed", err)
	}
	l, err = Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l.Release()
}

// TestLockHolderPID checks what a failed Acquire reports for various LOCK
// contents, with the lock held through a separate open of the file.
func TestLockHolderPID(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string // error text after "dirlock: data dir <dir> in use by "
	}{
		{"pid", "4242\n", "pid 4242"},
		{"pid without newline", "17", "pid 17"},
		{"empty", "", "another process"},
		{"garbage", "not a pid\n", "another process"},
		{"negative", "-5\n", "another process"},
		{"too long", strings.Repeat("1", 100), "another process"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, FileName)
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
				t.Fatal(err)
			}
			_, err = Acquire(dir)
			want := fmt.Sprintf("dirlock: data dir %s in use by %s", dir, tt.want)
			if !errors.Is(err, ErrLocked) || err.Error() != want {
				t.Errorf("Acquire: got %v, want %q", err, want)
			}
			if got := readFile(t, dir); got != tt.content {
				t.Errorf("failed Acquire changed LOCK to %q, want %q", got, tt.content)
			}
		})
	}
}

// TestLockStaleFile checks that a LOCK file left by a dead holder does not
// block and gets the new pid.
func TestLockStaleFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte("999999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire over a stale LOCK: %v", err)
	}
	defer l.Release()
	if got, want := readFile(t, dir), fmt.Sprintf("%d\n", os.Getpid()); got != want {
		t.Errorf("LOCK holds %q, want %q", got, want)
	}
}

func TestLockMissingDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "missing")
	_, err := Acquire(dir)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Acquire(missing dir): got %v, want os.ErrNotExist", err)
	}
}

func readFile(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
