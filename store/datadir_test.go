package store

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
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/edgemq/edgemq/store/commitlog"
	"github.com/edgemq/edgemq/store/cqueue"
	"github.com/edgemq/edgemq/store/dirlock"
	"github.com/edgemq/edgemq/store/internal/guard"
	"github.com/edgemq/edgemq/store/meta"
)

// TestOpenChild is not a real test: run as a child process of the tests below, it opens the
// store in $EDGEMQ_OPEN_DIR and prints "OPEN ERR <error>" or "OPEN OK <pid>". With
// $EDGEMQ_OPEN_HOLD set it then holds the store open until its stdin closes.
func TestOpenChild(t *testing.T) {
	dir := os.Getenv("EDGEMQ_OPEN_DIR")
	if dir == "" {
		t.Skip("child process of TestOpenDataDirInUse and TestOpenWithoutPermission")
	}
	s, err := Open(dir, &Options{MetaNoSync: true})
	if err != nil {
		fmt.Println("OPEN ERR", err)
		os.Exit(0)
	}
	fmt.Println("OPEN OK", os.Getpid())
	if os.Getenv("EDGEMQ_OPEN_HOLD") != "" {
		io.Copy(io.Discard, os.Stdin)
	}
	s.Close()
	os.Exit(0)
}

// TestOpenDataDirInUse opens a data dir another process holds: Open fails at once, naming the
// holder's pid, and succeeds once the holder is gone.
func TestOpenDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	cmd := childCommand(t, "TestOpenChild", "EDGEMQ_OPEN_DIR="+dir, "EDGEMQ_OPEN_HOLD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	}()
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(l)
		io.Copy(io.Discard, stdout)
	}()
	var pid int
	select {
	case l := <-line:
		if pid, err = strconv.Atoi(strings.TrimPrefix(l, "OPEN OK ")); err != nil {
			t.Fatalf("child said %q, want OPEN OK <pid>", l)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("child did not open the store within 60 s")
	}
	if pid != cmd.Process.Pid && os.Getenv("EDGEMQ_TEST_EXEC_WRAPPER") == "" {
		t.Fatalf("child says pid %d, started as %d", pid, cmd.Process.Pid)
	}

	start := time.Now()
	s, err := Open(dir, &Options{MetaNoSync: true})
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded while another process holds the data dir")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Open took %v to fail, want it to fail fast", d)
	}
	want := fmt.Sprintf("data dir %s in use by pid %d", dir, pid)
	if !errors.Is(err, dirlock.ErrLocked) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want ErrLocked saying %q", err, want)
	}

	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	s, err = Open(dir, &Options{MetaNoSync: true})
	if err != nil {
		t.Fatalf("Open after the holder closed: %v", err)
	}
	s.Close()
}

// TestOpenBadDataDir opens data dirs where a file stands for a directory or the other way
// round: Open fails naming the path, and once the entry is removed a correct Open succeeds;
// where the failed Open made no commitlog segment, with a segment size it did not ask for.
func TestOpenBadDataDir(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entry   string // relative to the data dir: made a regular file, or a dir if it ends in /
		logMade bool   // the failed Open got as far as creating the commitlog
	}{
		{"data dir is a file", ".", false},
		{"commitlog is a file", commitlogDir, false},
		{"consumequeue is a file", queuesDir, true},
		{"a queue dir is a file", queuesDir + "/T/0", true},
		{"meta.db is a directory", "meta.db/", false},
		{"LOCK is a directory", dirlock.FileName + "/", false},
		{"a segment is a directory", commitlogDir + "/" + fmt.Sprintf("%020d.log", 0) + "/", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			p := filepath.Join(dir, strings.TrimSuffix(tc.entry, "/"))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			var err error
			if strings.HasSuffix(tc.entry, "/") {
				err = os.Mkdir(p, 0o755)
			} else {
				err = os.WriteFile(p, []byte("x"), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			o := testOptions(Options{SegmentSize: 1 << 20})
			var s *Store
			err = guard.Call(t, "Open", func() (err error) { s, err = Open(dir, &o); return err })
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), p) {
				t.Errorf("got %q, want it to name %s", err, p)
			}
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
			if !tc.logMade {
				o = testOptions(Options{SegmentSize: 2 << 20})
			}
			s, err = Open(dir, &o)
			if err != nil {
				t.Fatalf("Open once %s is gone: %v", tc.entry, err)
			}
			s.Close()
		})
	}
}

// mountReadOnly makes a read-only view of dir (a read-only bind mount) and returns its path,
// or skips the test where this process cannot mount.
func mountReadOnly(t *testing.T, dir string) string {
	t.Helper()
	ro := t.TempDir()
	if err := unix.Mount(dir, ro, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount (needs root and CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(ro, 0); err != nil {
			t.Errorf("unmount %s: %v", ro, err)
		}
	})
	if err := unix.Mount("", ro, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot remount read-only: %v", err)
	}
	if err := os.WriteFile(filepath.Join(ro, "probe"), nil, 0o644); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("writing into the read-only mount: got %v, want EROFS", err)
	}
	return ro
}

// TestOpenReadOnlyFS opens a data dir, an empty dir and a dir to create on a read-only file
// system: each fails with an error naming the path and the read-only file system.
func TestOpenReadOnlyFS(t *testing.T) {
	data := t.TempDir()
	o := testOptions(Options{})
	s := openStore(t, data, o)
	appendN(t, s, "T", 0, 0, 10)
	s.Close()
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		dir  func(t *testing.T) string
	}{
		{"data dir", func(t *testing.T) string { return mountReadOnly(t, data) }},
		{"empty dir", func(t *testing.T) string { return mountReadOnly(t, empty) }},
		{"dir to create", func(t *testing.T) string { return filepath.Join(mountReadOnly(t, empty), "new") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.dir(t)
			var s *Store
			err := guard.Call(t, "Open", func() (err error) { s, err = Open(dir, &o); return err })
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded on a read-only file system")
			}
			if !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "read-only file system") {
				t.Errorf("got %q, want EROFS naming %s", err, dir)
			}
		})
	}
	// Each part of the store, opened on its own in the read-only data dir.
	t.Run("parts", func(t *testing.T) {
		dir := mountReadOnly(t, data)
		for _, tc := range []struct {
			name string
			open func() error
		}{
			{"dirlock", func() error { l, err := dirlock.Acquire(dir); closeIf(err, l.Release); return err }},
			{"meta", func() error { m, err := meta.Open(dir, &meta.Options{Timeout: -1}); closeIf(err, m.Close); return err }},
			{"commitlog", func() error {
				l, err := commitlog.Open(filepath.Join(dir, commitlogDir), &commitlog.Options{SegmentSize: o.SegmentSize})
				closeIf(err, l.Close)
				return err
			}},
			{"cqueue", func() error {
				q, err := cqueue.Open(filepath.Join(dir, queuesDir, "T", "0"), &cqueue.Options{SegmentEntries: o.QueueSegmentEntries})
				closeIf(err, q.Close)
				return err
			}},
		} {
			err := guard.Call(t, tc.name, tc.open)
			t.Logf("%s: %v", tc.name, err)
			if !errors.Is(err, syscall.EROFS) || !strings.Contains(err.Error(), dir) {
				t.Errorf("%s: got %v, want EROFS naming %s", tc.name, err, dir)
			}
		}
	})
}

// closeIf calls close when err is nil: for a part that opened where it should not have.
func closeIf(err error, close func() error) {
	if err == nil {
		close()
	}
}

// TestOpenWithoutPermission opens, as an unprivileged user, a data dir it may not write and
// one it would have to create in such a dir. Run as root, whom permissions do not stop, it
// runs the test binary as a child under uid 65534.
func TestOpenWithoutPermission(t *testing.T) {
	root, err := os.MkdirTemp("", "edgemq-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	dirs := []string{data, filepath.Join(data, "new")}
	if os.Geteuid() != 0 {
		if err := os.Chmod(data, 0o555); err != nil {
			t.Fatal(err)
		}
		for _, dir := range dirs {
			_, err := Open(dir, &Options{MetaNoSync: true})
			if !errors.Is(err, os.ErrPermission) || !strings.Contains(err.Error(), dir) {
				t.Errorf("Open(%s): got %v, want a permission error naming it", dir, err)
			}
		}
		return
	}
	if os.Getenv("EDGEMQ_TEST_EXEC_WRAPPER") != "" {
		t.Skip("root under an exec wrapper: the child cannot be run as another user")
	}
	// The child must be able to run the test binary, which sits in a directory only root
	// may enter: copy it into root (made 0755; data stays root's, 0755: not writable).
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	child := filepath.Join(root, "store.test")
	if err := os.WriteFile(child, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		cmd := exec.Command(child, "-test.run=^TestOpenChild$", "-test.v=false")
		cmd.Env = append(os.Environ(), "EDGEMQ_OPEN_DIR="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child for %s: %v\n%s", dir, err, out)
		}
		t.Logf("child as uid 65534: %s", out)
		if s := string(out); !strings.Contains(s, "OPEN ERR") || !strings.Contains(s, "permission denied") || !strings.Contains(s, dir) {
			t.Errorf("child opening %s said %q, want a permission error naming it", dir, s)
		}
	}
}
